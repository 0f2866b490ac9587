"""`crewai.events.types.task_events` (every event type is in chatagent.crewai.events.base_events)."""

from chatagent.crewai.events.base_events import (
    TaskCompletedEvent,
    TaskFailedEvent,
    TaskStartedEvent,
)

__all__ = [
    "TaskCompletedEvent",
    "TaskFailedEvent",
    "TaskStartedEvent",
]

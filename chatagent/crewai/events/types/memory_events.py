"""`crewai.events.types.memory_events` (every event type is in chatagent.crewai.events.base_events)."""

from chatagent.crewai.events.base_events import (
    MemoryQueryCompletedEvent,
    MemoryQueryStartedEvent,
    MemoryRetrievalFailedEvent,
    MemorySaveCompletedEvent,
    MemorySaveStartedEvent,
)

__all__ = [
    "MemoryQueryCompletedEvent",
    "MemoryQueryStartedEvent",
    "MemoryRetrievalFailedEvent",
    "MemorySaveCompletedEvent",
    "MemorySaveStartedEvent",
]

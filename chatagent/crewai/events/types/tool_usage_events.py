"""`crewai.events.types.tool_usage_events` (every event type is in chatagent.crewai.events.base_events)."""

from chatagent.crewai.events.base_events import (
    ToolUsageErrorEvent,
    ToolUsageEvent,
    ToolUsageFinishedEvent,
    ToolUsageStartedEvent,
)

__all__ = [
    "ToolUsageErrorEvent",
    "ToolUsageEvent",
    "ToolUsageFinishedEvent",
    "ToolUsageStartedEvent",
]

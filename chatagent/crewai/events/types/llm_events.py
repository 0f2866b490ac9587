"""`crewai.events.types.llm_events` (every event type is in chatagent.crewai.events.base_events)."""

from chatagent.crewai.events.base_events import (
    LLMCallCompletedEvent,
    LLMCallFailedEvent,
    LLMCallStartedEvent,
    LLMStreamChunkEvent,
)

__all__ = [
    "LLMCallCompletedEvent",
    "LLMCallFailedEvent",
    "LLMCallStartedEvent",
    "LLMStreamChunkEvent",
]

"""`crewai.events.types.agent_events` (every event type is in chatagent.crewai.events.base_events)."""

from chatagent.crewai.events.base_events import (
    AgentExecutionCompletedEvent,
    AgentExecutionErrorEvent,
    AgentExecutionStartedEvent,
    LiteAgentExecutionCompletedEvent,
    LiteAgentExecutionStartedEvent,
)

__all__ = [
    "AgentExecutionCompletedEvent",
    "AgentExecutionErrorEvent",
    "AgentExecutionStartedEvent",
    "LiteAgentExecutionCompletedEvent",
    "LiteAgentExecutionStartedEvent",
]

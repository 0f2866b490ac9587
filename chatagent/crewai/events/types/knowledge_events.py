"""`crewai.events.types.knowledge_events` (every event type is in chatagent.crewai.events.base_events)."""

from chatagent.crewai.events.base_events import (
    KnowledgeRetrievalCompletedEvent,
    KnowledgeRetrievalStartedEvent,
)

__all__ = [
    "KnowledgeRetrievalCompletedEvent",
    "KnowledgeRetrievalStartedEvent",
]

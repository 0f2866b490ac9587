"""`crewai.flow`: Flow, start, listen, router, or_, and_, persist, human_feedback and its providers."""

from chatagent.crewai.flow.async_feedback import (
    ConsoleProvider,
    HumanFeedbackPending,
    HumanFeedbackProvider,
    PendingFeedbackContext,
)
from chatagent.crewai.flow.flow import Flow, and_, listen, or_, router, start
from chatagent.crewai.flow.human_feedback import HumanFeedbackResult, human_feedback
from chatagent.crewai.flow.persistence import FlowPersistence, SQLiteFlowPersistence, persist

__all__ = [
    "ConsoleProvider",
    "Flow",
    "FlowPersistence",
    "HumanFeedbackPending",
    "HumanFeedbackProvider",
    "HumanFeedbackResult",
    "PendingFeedbackContext",
    "SQLiteFlowPersistence",
    "and_",
    "human_feedback",
    "listen",
    "or_",
    "persist",
    "router",
    "start",
]

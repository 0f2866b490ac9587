"""`crewai.flow`: Flow, start, listen, router, or_, and_, persist."""

from chatagent.crewai.flow.flow import Flow, and_, listen, or_, router, start
from chatagent.crewai.flow.persistence import FlowPersistence, SQLiteFlowPersistence, persist

__all__ = ["Flow", "FlowPersistence", "SQLiteFlowPersistence", "and_", "listen", "or_", "persist", "router", "start"]

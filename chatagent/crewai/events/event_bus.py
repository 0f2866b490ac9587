"""`crewai.events.event_bus`: the bus (see chatagent.crewai.events.bus)."""

from chatagent.crewai.events.bus import CrewAIEventsBus, crewai_event_bus

__all__ = ["CrewAIEventsBus", "crewai_event_bus"]

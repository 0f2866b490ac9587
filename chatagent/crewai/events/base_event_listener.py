"""`crewai.events.base_event_listener`."""

from chatagent.crewai.events.bus import BaseEventListener

__all__ = ["BaseEventListener"]

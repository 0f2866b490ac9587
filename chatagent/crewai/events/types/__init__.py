"""`crewai.events.types`."""

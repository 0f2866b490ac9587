"""`crewai.types`."""

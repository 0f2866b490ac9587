"""`crewai.crews`: CrewOutput (`crewai.crews.crew_output`)."""

from chatagent.crewai.crews.crew_output import CrewOutput

__all__ = ["CrewOutput"]

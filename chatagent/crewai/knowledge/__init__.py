"""`crewai.knowledge`: Knowledge and its sources (`crewai.knowledge.source.*`)."""

from chatagent.crewai.knowledge.knowledge import Knowledge

__all__ = ["Knowledge"]

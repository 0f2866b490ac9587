"""`crewai.knowledge.source`: where knowledge comes from (a text, files of several kinds)."""

"""`crewai.project`: CrewBase and its decorators (a crew defined by YAML and methods)."""

from chatagent.crewai.project.annotations import (
    after_kickoff,
    agent,
    before_kickoff,
    cache_handler,
    callback,
    crew,
    llm,
    output_json,
    output_pydantic,
    task,
    tool,
)
from chatagent.crewai.project.crew_base import CrewBase

__all__ = ["CrewBase", "after_kickoff", "agent", "before_kickoff", "cache_handler", "callback", "crew", "llm",
           "output_json", "output_pydantic", "task", "tool"]  # fmt: skip

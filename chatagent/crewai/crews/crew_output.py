"""`CrewOutput`: what `Crew.kickoff()` returns, in CrewAI's shape (`token_usage` as UsageMetrics)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from chatagent.agents.teams.task import TaskOutput
from chatagent.crewai.usage import UsageMetrics


@dataclass
class CrewOutput:
    """The last task's answer (`raw`, `pydantic`, `json_dict`), every task's output and the tokens used."""

    raw: str = ""
    pydantic: Any = None
    json_dict: dict[str, Any] | None = None
    tasks_output: list[TaskOutput] = field(default_factory=lambda: [])
    token_usage: UsageMetrics = field(default_factory=UsageMetrics)

    @property
    def usage_metrics(self) -> dict[str, Any]:
        """`token_usage` as a plain dict."""
        return self.token_usage.model_dump()

    @property
    def json(self) -> str:
        """The last task's JSON answer (its task needs `output_json`)."""
        if not self.tasks_output or self.tasks_output[-1].output_format != "json":
            raise ValueError("No JSON output found in the final task: give the final task output_json")
        return json.dumps(self.json_dict)

    def to_dict(self) -> dict[str, Any]:
        if self.json_dict:
            return dict(self.json_dict)
        return self.pydantic.model_dump() if self.pydantic is not None else {}

    def __getitem__(self, key: str) -> Any:
        if self.pydantic is not None and hasattr(self.pydantic, key):
            return getattr(self.pydantic, key)
        if self.json_dict and key in self.json_dict:
            return self.json_dict[key]
        raise KeyError(f"Key '{key}' not found in CrewOutput.")

    def __str__(self) -> str:
        if self.pydantic is not None:
            return str(self.pydantic)
        if self.json_dict is not None:
            return str(self.json_dict)
        return self.raw


__all__ = ["CrewOutput"]

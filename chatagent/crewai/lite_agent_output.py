"""`LiteAgentOutput`: what `Agent.kickoff()` returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class LiteAgentOutput:
    """An agent's answer (`raw`; `pydantic` with a response_format), who gave it, and the tokens used."""

    raw: str
    pydantic: Any = None
    agent_role: str = ""
    usage_metrics: dict[str, Any] | None = None
    messages: list[dict[str, Any]] = field(default_factory=lambda: [])

    def to_dict(self) -> dict[str, Any]:
        return self.pydantic.model_dump() if self.pydantic is not None else {}

    def __str__(self) -> str:
        return str(self.pydantic) if self.pydantic is not None else self.raw


__all__ = ["LiteAgentOutput"]

"""`crewai.memory.types`: MemoryRecord and MemoryMatch in CrewAI's shape."""

from __future__ import annotations

import datetime
from typing import Any

from pydantic import BaseModel, Field


class MemoryRecord(BaseModel):
    id: str
    content: str
    scope: str = "/"
    categories: list[str] = Field(default_factory=lambda: [])
    metadata: dict[str, Any] = Field(default_factory=lambda: {})
    importance: float = 0.5
    created_at: datetime.datetime = Field(default_factory=lambda: datetime.datetime.now(datetime.timezone.utc))
    source: str | None = None


class MemoryMatch(BaseModel):
    record: MemoryRecord
    score: float
    match_reasons: list[str] = Field(default_factory=lambda: [])

    def format(self) -> str:
        lines = [f"- (score={self.score:.2f}) {self.record.content}"]
        if self.record.categories:
            lines.append(f"  categories: {', '.join(self.record.categories)}")
        return "\n".join(lines)


__all__ = ["MemoryMatch", "MemoryRecord"]

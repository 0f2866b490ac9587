"""What long-term memory keeps: a record (a fact or a turn, with where it came from) and a recall's match."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MemoryMatch", "MemoryRecord"]


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """One thing remembered about a user.

    `source` says where it came from: `{"session": id, "message": i}` for a turn of a conversation,
    `{"session": id, "messages": [i, ...]}` for a fact drawn from several, `{}` for `remember()`. `scope` is a
    free category ('' by default: 'preferences', 'work', ...); `importance` is in [0, 1]; times are Unix seconds.
    """

    id: str
    user: str
    text: str
    scope: str = ""
    importance: float = 0.5
    source: dict[str, Any] = field(default_factory=dict)
    created: float = 0.0
    updated: float = 0.0

    @property
    def date(self) -> str:
        """The day it was last updated, as YYYY-MM-DD (UTC)."""
        return datetime.datetime.fromtimestamp(self.updated or self.created, datetime.timezone.utc).strftime("%Y-%m-%d")

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "user": self.user,
            "text": self.text,
            "scope": self.scope,
            "importance": self.importance,
            "source": dict(self.source),
            "created": self.created,
            "updated": self.updated,
        }


@dataclass(frozen=True, slots=True)
class MemoryMatch:
    """A record found by `recall`, with its score (higher is better; see `chatagent.memories.recall`)."""

    record: MemoryRecord
    score: float

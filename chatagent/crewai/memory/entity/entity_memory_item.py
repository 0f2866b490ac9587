"""`EntityMemoryItem`: an entity (a person, a place, an organisation, ...) with its type and description."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class EntityMemoryItem:
    name: str
    type: str
    description: str
    relationships: str = ""

    def __post_init__(self) -> None:
        for what in ("name", "type", "description"):
            if not isinstance(getattr(self, what), str) or not getattr(self, what).strip():
                raise ValueError(f"an EntityMemoryItem needs a {what} (a non-empty text)")


__all__ = ["EntityMemoryItem"]

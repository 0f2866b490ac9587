"""The base of knowledge sources: text cut into chunks (`chunk_size` characters, `chunk_overlap` shared with the
next), each with the source's `metadata`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class BaseKnowledgeSource(BaseModel):
    """A source of knowledge: `load_content()` gives its texts ({name: text}); `chunks()` cuts them."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    chunk_size: int = 4000
    chunk_overlap: int = 200
    metadata: dict[str, Any] = Field(default_factory=lambda: {})
    collection_name: str | None = None

    def load_content(self) -> dict[str, str]:
        raise NotImplementedError

    def chunks(self) -> list[tuple[str, str]]:
        """(where it came from, text) for every chunk of the source."""
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError("chunk_overlap must be smaller than chunk_size")
        out = []
        step = self.chunk_size - self.chunk_overlap
        for name, text in self.load_content().items():
            for start in range(0, max(len(text), 1), step):
                piece = text[start : start + self.chunk_size]
                if piece.strip():
                    out.append((name, piece))
                if start + self.chunk_size >= len(text):
                    break
        return out

    def add(self) -> None:
        """CrewAI's call to store the chunks; a Knowledge indexes its sources when first asked."""


__all__ = ["BaseKnowledgeSource"]

"""Knowledge from files: `file_paths` (or `file_path`) as CrewAI reads them, a text relative to the project's
`knowledge/` folder, a Path as it is; a missing file is a clear error when the source is made."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from chatagent.crewai.knowledge.source.base_knowledge_source import BaseKnowledgeSource

KNOWLEDGE_DIRECTORY = "knowledge"


class BaseFileKnowledgeSource(BaseKnowledgeSource):
    """Files read by `read(path)` (each file's text)."""

    file_paths: Any = Field(default_factory=lambda: [])
    file_path: Any = None

    @model_validator(mode="after")
    def _check_files(self) -> BaseFileKnowledgeSource:
        for path in self.paths():
            if not path.is_file():
                raise FileNotFoundError(f"knowledge file not found: {path}")
        return self

    def paths(self) -> list[Path]:
        given = self.file_paths or self.file_path or []
        if isinstance(given, (str, Path)):
            given = [given]
        return [Path(KNOWLEDGE_DIRECTORY) / p if isinstance(p, str) else Path(p) for p in given]

    def load_content(self) -> dict[str, str]:
        return {str(p): self.read(p) for p in self.paths()}

    def read(self, path: Path) -> str:
        raise NotImplementedError


def parsed_text(path: Path) -> str:
    """A file's text by chatagent's parsers (PDF, DOCX, XLSX, ...)."""
    from chatagent.rag.parsers import parse_file  # function-level: the parsers load their libraries on use

    return parse_file(path).text


__all__ = ["KNOWLEDGE_DIRECTORY", "BaseFileKnowledgeSource", "parsed_text"]

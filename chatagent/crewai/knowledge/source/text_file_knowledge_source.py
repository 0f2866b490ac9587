"""`TextFileKnowledgeSource(file_paths=[...])`: text files (also Markdown, YAML and source code)."""

from __future__ import annotations

from pathlib import Path

from chatagent.crewai.knowledge.source.base_file_knowledge_source import BaseFileKnowledgeSource


class TextFileKnowledgeSource(BaseFileKnowledgeSource):
    def read(self, path: Path) -> str:
        return path.read_text(encoding="utf-8", errors="replace")


__all__ = ["TextFileKnowledgeSource"]

"""`ExcelKnowledgeSource(file_paths=[...])`: spreadsheets, read by chatagent's parser (every sheet)."""

from __future__ import annotations

from pathlib import Path

from chatagent.crewai.knowledge.source.base_file_knowledge_source import BaseFileKnowledgeSource, parsed_text


class ExcelKnowledgeSource(BaseFileKnowledgeSource):
    def read(self, path: Path) -> str:
        return parsed_text(path)


__all__ = ["ExcelKnowledgeSource"]

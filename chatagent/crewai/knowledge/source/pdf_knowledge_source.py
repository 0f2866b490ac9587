"""`PDFKnowledgeSource(file_paths=[...])`: PDF files, read by chatagent's PDF parser."""

from __future__ import annotations

from pathlib import Path

from chatagent.crewai.knowledge.source.base_file_knowledge_source import BaseFileKnowledgeSource, parsed_text


class PDFKnowledgeSource(BaseFileKnowledgeSource):
    def read(self, path: Path) -> str:
        return parsed_text(path)


__all__ = ["PDFKnowledgeSource"]

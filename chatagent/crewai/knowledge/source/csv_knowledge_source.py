"""`CSVKnowledgeSource(file_paths=[...])`: CSV files, each row a line of its cells."""

from __future__ import annotations

import csv
from pathlib import Path

from chatagent.crewai.knowledge.source.base_file_knowledge_source import BaseFileKnowledgeSource


class CSVKnowledgeSource(BaseFileKnowledgeSource):
    def read(self, path: Path) -> str:
        with path.open(newline="", encoding="utf-8", errors="replace") as f:
            return "\n".join(" ".join(row) for row in csv.reader(f))


__all__ = ["CSVKnowledgeSource"]

"""`JSONKnowledgeSource(file_paths=[...])`: JSON files, as lines of `key: value` (nested keys joined)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chatagent.crewai.knowledge.source.base_file_knowledge_source import BaseFileKnowledgeSource


class JSONKnowledgeSource(BaseFileKnowledgeSource):
    def read(self, path: Path) -> str:
        return "\n".join(_lines(json.loads(path.read_text(encoding="utf-8")), ""))


def _lines(value: Any, prefix: str) -> list[str]:
    if isinstance(value, dict):
        return [line for k, v in value.items() for line in _lines(v, f"{prefix}{k}: ")]
    if isinstance(value, list):
        return [line for v in value for line in _lines(v, prefix)]
    return [f"{prefix}{value}"]


__all__ = ["JSONKnowledgeSource"]

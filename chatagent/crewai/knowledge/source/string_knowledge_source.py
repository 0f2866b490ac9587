"""`StringKnowledgeSource(content=...)`: knowledge given as text."""

from __future__ import annotations

from chatagent.crewai.knowledge.source.base_knowledge_source import BaseKnowledgeSource


class StringKnowledgeSource(BaseKnowledgeSource):
    content: str

    def load_content(self) -> dict[str, str]:
        if not isinstance(self.content, str) or not self.content.strip():
            raise ValueError("StringKnowledgeSource needs content (a non-empty text)")
        return {"string": self.content}


__all__ = ["StringKnowledgeSource"]

"""`Assistant.run(messages, knowledge=...)`: knowledge the caller already has, put in the system message the way
Qwen-Agent's Assistant does (instead of excerpts of the files).

`knowledge` is text, or Qwen-Agent's retrieval result: a list of `{'url': ..., 'text': [snippets]}` (or that list
as JSON text). Each source becomes a section of a "# Knowledge Base" block (Chinese headings for `lang='zh'`).
"""

from __future__ import annotations

import json
from typing import Any

from chatagent.rag.parsers import display_name

TEMPLATE = {"en": "# Knowledge Base\n\n{knowledge}", "zh": "# 知识库\n\n{knowledge}"}
SNIPPET = {
    "en": "## The content from {source}:\n\n```\n{content}\n```",
    "zh": "## 来自 {source} 的内容：\n\n```\n{content}\n```",
}
UPLOADED = "上传的文档"  # Qwen-Agent's source name for knowledge given as plain text, in every language


def knowledge_prompt(knowledge: str | list[dict[str, Any]], lang: str) -> str:
    """The system message's knowledge block for `knowledge` ('' when there is none)."""
    lang = "zh" if lang == "zh" else "en"
    sections = [SNIPPET[lang].format(source=s, content=c) for s, c in _sources(knowledge)]
    return TEMPLATE[lang].format(knowledge="\n\n".join(sections)) if sections else ""


def _sources(knowledge: str | list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(source, content) pairs, as Qwen-Agent reads them."""
    docs: Any = knowledge
    if isinstance(knowledge, str):
        text = knowledge.strip()
        if not text:
            return []
        try:
            docs = json.loads(text)
        except ValueError:
            return [(UPLOADED, text)]
    if not isinstance(docs, list) or not all(_is_doc(d) for d in docs):
        if isinstance(knowledge, str):
            return [(UPLOADED, knowledge.strip())]
        raise TypeError("knowledge must be text or a list of {'url': ..., 'text': [snippets]}")
    return [(f"[文件]({display_name(d['url'])})", "\n\n...\n\n".join(d["text"])) for d in docs]


def _is_doc(doc: Any) -> bool:
    if not isinstance(doc, dict):
        return False
    text: Any = doc.get("text")
    return isinstance(doc.get("url"), str) and isinstance(text, list) and all(isinstance(t, str) for t in text)


__all__ = ["knowledge_prompt"]

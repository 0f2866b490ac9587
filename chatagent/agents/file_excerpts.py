"""FileExcerpts: the files of a conversation, and what they say about its latest question; Qwen-Agent calls it
`Memory` (that name is handed on: `chatagent.agents.Memory`, `chatagent.memory.Memory`). chatagent's own memory,
what an agent remembers of a user across conversations, is `chatagent.memories`.

    mem = FileExcerpts(files=['manual.pdf'])
    *_, last = mem.run([{'role': 'user', 'content': [{'text': 'How do I flip an image?'}, {'file': 'extra.docx'}]}])
    json.loads(last[-1]['content'])   # [{'url': 'manual.pdf', 'text': ['...', ...]}, {'url': 'extra.docx', ...}]

The files are `files=` and the file items of every user message; the excerpts are the best chunks for the
latest user message within `max_ref_token` tokens (everything when it all fits), from the same parsed,
cached index the Assistant uses (see `chatagent.rag.store`). The one message it yields is named 'memory';
its content is the excerpts as JSON, grouped by file, its `extra['sources']` names each (`Chunk.as_source`), and
`extra['errors']` the files that could not be read. With no files the content is empty. No model is called:
unlike Qwen-Agent's Memory, it asks no model for search keywords.

`rag_cfg`: as the Assistant's (`max_ref_token`, `passwords`, `on_progress`, `store`, `chunk_tokens`, ...);
Qwen-Agent's `parser_page_size` is `chunk_tokens`; its `rag_searchers` select keywords only or hybrid search (see
the Assistant); its `rag_keygen_strategy` has no counterpart (logged and ignored).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from chatagent.agent import Agent
from chatagent.agents.assistant import DEFAULT_MAX_REF_TOKEN, RAG_CFG_KEYS, _make_store
from chatagent.schema import ASSISTANT, USER, Message
from chatagent.schema.fragment import fragment
from chatagent.tools.retrieval import allowed_files
from chatagent.utils.kwargs import unexpected_keyword

if TYPE_CHECKING:
    from chatagent.rag.file_index import Retrieved  # the rag index (numpy): on first use
    from chatagent.rag.store import DocStore

logger = logging.getLogger("chatagent.agent")

QWEN_IGNORED_RAG_KEYS = ("rag_keygen_strategy",)


class FileExcerpts(Agent):
    """Finds what the conversation's files say about its latest question (see the module docstring).

    Args:
        files: paths or URLs always searched, besides the file items of the user's messages.
        rag_cfg: retrieval settings (see the module docstring).
        function_list, llm, system_message, ...: see Agent (it calls no model itself).
    """

    def __init__(
        self,
        function_list: list | None = None,
        llm: Any = None,
        system_message: str | None = None,
        files: list[str] | None = None,
        rag_cfg: dict | None = None,
        name: str | None = "memory",
        description: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(function_list, llm, system_message, name, description, **kwargs)
        self.system_files = [os.fspath(f) for f in files or []]
        cfg = rag_settings(rag_cfg)
        self.max_ref_token = int(cfg.get("max_ref_token", DEFAULT_MAX_REF_TOKEN))
        self.passwords: dict[str, str] = dict(cfg.get("passwords") or {})
        self.on_progress = cfg.get("on_progress")
        self.store: DocStore = cfg.get("store") or _make_store(cfg)

    def get_rag_files(self, messages: list[Message] | list[dict]) -> list[str]:
        """The files to search: `files=`, then those of the user's messages (no repeats)."""
        return allowed_files(self.system_files, messages)

    def retrieve(self, messages: list[Message], max_ref_token: int | None = None, on_progress: Any = None) -> Retrieved:
        """The best excerpts of the conversation's files for its latest user message."""
        files = self.get_rag_files(messages)
        tokens = max_ref_token or self.max_ref_token
        return search_files(self.store, files, messages, tokens, self.passwords, on_progress or self.on_progress)

    fragment_native = True  # _run yields fragments and requests

    def _run(
        self, messages: list[Message], lang: str = "en", max_ref_token: int | None = None, **kwargs: Any
    ) -> Iterator[list[Message]]:
        found = yield from self._blocking(self.retrieve, messages, max_ref_token, kwargs.get("on_progress"))
        extra: dict[str, Any] = {"sources": [c.as_source() for c in found.chunks]}
        if found.errors:
            extra["errors"] = [str(e) for e in found.errors]
        content = knowledge_json(found) if found.chunks else ""
        yield [fragment(Message.unchecked(ASSISTANT, content, "memory", None, None, extra), 0)]


def search_files(
    store: DocStore,
    files: list[str],
    messages: list[Message],
    max_tokens: int,
    passwords: dict[str, str] | None = None,
    on_progress: Any = None,
) -> Retrieved:
    """The best excerpts of `files` for the latest user message of `messages` (none without files)."""
    from chatagent.rag.file_index import Retrieved  # the rag index (numpy): on first use

    if not files:
        return Retrieved([])
    query = next((m.text for m in reversed(messages) if m.role == USER), "")
    return store.retrieve(files, query, max_tokens, passwords=passwords, on_progress=on_progress)


def knowledge_json(found: Retrieved) -> str:
    """Excerpts as Qwen-Agent's retrieval gives them: `[{"url": file, "text": [excerpt, ...]}, ...]`."""
    by_file: dict[str, list[str]] = {}
    for chunk in found.chunks:
        by_file.setdefault(chunk.source, []).append(chunk.text)
    return json.dumps([{"url": f, "text": texts} for f, texts in by_file.items()], ensure_ascii=False)


def rag_settings(rag_cfg: dict | None) -> dict:
    """`rag_cfg` with Qwen-Agent's spellings translated; unknown keys raise TypeError."""
    cfg = dict(rag_cfg or {})
    if "parser_page_size" in cfg:
        cfg.setdefault("chunk_tokens", cfg.pop("parser_page_size"))
        cfg.pop("parser_page_size", None)
    ignored = [k for k in QWEN_IGNORED_RAG_KEYS if cfg.pop(k, None) is not None]
    if ignored:
        logger.warning("rag_cfg %s: Qwen-Agent's search settings have no counterpart here; ignored", ignored)
    unknown = sorted(set(cfg) - set(RAG_CFG_KEYS))
    if unknown:
        raise TypeError(str(unexpected_keyword("rag_cfg", unknown, RAG_CFG_KEYS)).replace("keyword argument", "key"))
    return cfg


Memory = FileExcerpts  # Qwen-Agent's name for it


__all__ = ["FileExcerpts", "Memory", "knowledge_json", "rag_settings", "search_files"]

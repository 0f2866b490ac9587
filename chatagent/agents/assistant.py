"""Assistant: answers from the user's files. Retrieves the best chunks, puts them in the system message, cites.

    from chatagent import Assistant
    bot = Assistant(llm=cfg, files=['manual.pdf', 'notes.docx'])
    for rsp in bot.run([{'role': 'user', 'content': [{'text': 'How do I install packages?'}, {'file': 'extra.pptx'}]}]):
        ...

Files come from `files=` and from the file items of every user message (paths or http(s) URLs). Before
the model is called, the best chunks for the latest user message, within `rag_cfg['max_ref_token']`
tokens (everything when it all fits), go into the system message, each headed `[file, p. N]`, and the
model is asked to cite them that way. A file that cannot be read is named to the model, which tells the
user; the answer comes from the rest. Files are parsed and indexed once (see `chatagent.rag.store`).
The Assistant is a FnCallAgent: it also calls the tools in `function_list`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from chatagent.agent import current_run
from chatagent.agents.fncall import FnCallAgent
from chatagent.rag.parsers import display_name
from chatagent.schema import SYSTEM, USER, ContentItem, Message
from chatagent.tools.retrieval import DEFAULT_MAX_REF_TOKEN, allowed_files, message_files

if TYPE_CHECKING:
    from chatagent.rag.store import DocStore, ProgressCallback

__all__ = ["Assistant", "message_files"]

logger = logging.getLogger("chatagent.agent")

RAG_CFG_KEYS = ("max_ref_token", "passwords", "on_progress", "store", "chunk_tokens", "overlap_tokens", "max_bytes")

KNOWLEDGE_PROMPT = """# Knowledge from the user's files
Below are excerpts from the files the user gave, each headed by its source as [file, p. N]. Answer from them \
when they are relevant and cite the source of what you use in the same form, e.g. [manual.pdf, p. 3]. If they do \
not contain the answer, say so and answer from what you know, without citing.

{knowledge}"""
KNOWLEDGE_PROMPT_ZH = """# 用户文件中的知识
以下是用户所给文件的摘录，每段开头用 [文件, p. 页码] 标明出处。回答时如果用到这些内容，请用同样的格式注明出处，\
例如 [manual.pdf, p. 3]。如果摘录中没有答案，请说明，然后根据你已有的知识回答，不要标注出处。

{knowledge}"""
UNREADABLE_PROMPT = "These files could not be read; tell the user which and why:\n{errors}"
UNREADABLE_PROMPT_ZH = "以下文件无法读取，请告诉用户是哪个文件以及原因：\n{errors}"


class Assistant(FnCallAgent):
    """A FnCallAgent that answers from files (see the module docstring).

    Args:
        files: paths or URLs always searched, in addition to the files in the user's messages.
        rag_cfg: `max_ref_token` (the token budget for excerpts, default 4000), `passwords`
            ({file name or path: password} for encrypted PDFs), `on_progress` (a callback given a
            `chatagent.rag.Progress` per file), `store` (a `chatagent.rag.DocStore`; default: the
            workspace's), or `chunk_tokens` / `overlap_tokens` / `max_bytes` for a store of its own.
        function_list, llm, system_message, name, description, ...: see FnCallAgent.
    """

    def __init__(
        self,
        function_list: list | None = None,
        llm: Any = None,
        system_message: str | None = None,
        name: str | None = None,
        description: str | None = None,
        files: list[str] | None = None,
        rag_cfg: dict | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(function_list, llm, system_message, name, description, files, **kwargs)
        cfg = dict(rag_cfg or {})
        unknown = sorted(set(cfg) - set(RAG_CFG_KEYS))
        if unknown:
            logger.warning("Assistant: ignoring unknown rag_cfg keys %s", unknown)
        self.max_ref_token = int(cfg.get("max_ref_token", DEFAULT_MAX_REF_TOKEN))
        self.passwords: dict[str, str] = dict(cfg.get("passwords") or {})
        self.on_progress: ProgressCallback | None = cfg.get("on_progress")
        self.store: DocStore = cfg.get("store") or _make_store(cfg)

    async_safe = True  # reading files goes through _blocking

    def _run(self, messages: list[Message], lang: str = "en", **kwargs: Any) -> Iterator[list[Message]]:
        on_progress = kwargs.pop("on_progress", None) or self.on_progress
        files = allowed_files(self.files, messages)
        if files:
            knowledge = yield from self._blocking(self._knowledge, files, messages, lang, on_progress)
            current_run().check_deadline()  # reading many new files can take a while
            messages = _with_system_text(messages, knowledge)
        return (yield from super()._run(_files_as_text(messages), lang=lang, **kwargs))

    def _knowledge(
        self, files: list[str], messages: list[Message], lang: str, on_progress: ProgressCallback | None
    ) -> str:
        """The system-message text: the best excerpts for the latest user message, and any unreadable files."""
        query = next((m.text for m in reversed(messages) if m.role == USER), "")
        found = self.store.retrieve(
            files, query, self.max_ref_token, passwords=self.passwords, on_progress=on_progress
        )  # fmt: skip
        parts = []
        if found.chunks:
            template = KNOWLEDGE_PROMPT_ZH if lang == "zh" else KNOWLEDGE_PROMPT
            parts.append(template.format(knowledge=found.as_text()))
        if found.errors:
            template = UNREADABLE_PROMPT_ZH if lang == "zh" else UNREADABLE_PROMPT
            parts.append(template.format(errors="\n".join(f"- {e}" for e in found.errors)))
        return "\n\n".join(parts)


def _make_store(cfg: dict[str, Any]) -> DocStore:
    """A store of its own when `cfg` sets chunking or size options, else the workspace's."""
    from chatagent.rag.store import DocStore, default_store

    options = {k: cfg[k] for k in ("chunk_tokens", "overlap_tokens", "max_bytes") if k in cfg}
    return DocStore(**options) if options else default_store()


def _with_system_text(messages: list[Message], text: str) -> list[Message]:
    if not text:
        return messages
    first = messages[0]
    if first.role != SYSTEM:
        return [Message._make(SYSTEM, text)] + messages
    if isinstance(first.content, str):
        content: str | list[ContentItem] = (first.content + "\n\n" + text) if first.content else text
    else:
        content = list(first.content) + [ContentItem(text="\n\n" + text)]
    return [first.copy(content=content)] + messages[1:]


def _files_as_text(messages: list[Message]) -> list[Message]:
    """File items become `[file: name]` text: their content is in the system message already."""
    out = []
    for m in messages:
        if not isinstance(m.content, str) and any(item.file is not None for item in m.content):
            items = [
                ContentItem(text=f"[file: {display_name(item.file)}]") if item.file is not None else item
                for item in m.content
            ]
            m = m.copy(content=items)
        out.append(m)
    return out

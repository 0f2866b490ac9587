"""The `retrieval` tool: search the user's files for passages, for agents that retrieve through tool calls.

    bot = FnCallAgent(llm=cfg, function_list=[{'name': 'retrieval', 'files': ['manual.pdf']}])

It reads only the files the user gave: those in the tool's `files` setting and the file items of the
user's messages. A file the model names that is not among them (another path, `../`, a URL of its own)
is refused with a message the model can read. Settings: `files`, `max_ref_token` (default 4000),
`passwords`, `store` (a DocStore).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from chatagent.rag.parsers import display_name
from chatagent.schema import USER, Message, to_messages
from chatagent.tools.arguments import JSONObject
from chatagent.tools.base import BaseTool, register_tool

if TYPE_CHECKING:
    from chatagent.rag.store import DocStore

__all__ = ["Retrieval", "allowed_files", "choose_files", "message_files", "store_from_cfg"]

DEFAULT_MAX_REF_TOKEN = 4000


@register_tool("retrieval")
class Retrieval(BaseTool):
    """Search the user's files; returns excerpts headed `[file, p. N]`."""

    description = (
        "Search the files the user gave for passages relevant to a query. Returns excerpts, each headed by "
        "its source as [file, p. N]; cite them that way."
    )
    parameters = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for, in the words of the documents."},
            "files": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Optional: names of the user's files to search (all of them when omitted).",
            },
        },
        "required": ["query"],
    }

    def call(self, params: str | JSONObject, **kwargs: Any) -> str:
        args = self.parse_params(params)
        allowed = allowed_files(self.cfg.get("files"), kwargs.get("messages"))
        files = choose_files(args.get("files"), allowed)
        if isinstance(files, str):
            return files
        found = store_from_cfg(self.cfg).retrieve(
            files,
            args["query"],
            int(self.cfg.get("max_ref_token", DEFAULT_MAX_REF_TOKEN)),
            passwords=self.cfg.get("passwords"),
        )
        parts = [found.as_text()] if found.chunks else ["No passage of the files matches this query."]
        if found.errors:
            parts.append("These files could not be read:\n" + "\n".join(f"- {e}" for e in found.errors))
        return "\n\n".join(parts)


def allowed_files(
    configured: Sequence[str | os.PathLike[str]] | None, messages: Sequence[Message | JSONObject] | None
) -> list[str]:
    """The files the user gave: the configured ones, then the file items of the user's messages (no repeats)."""
    given = messages or []
    msgs = [m for m in given if isinstance(m, Message)]
    if len(msgs) < len(given):
        msgs = to_messages(given)
    return list(dict.fromkeys([os.fspath(f) for f in configured or []] + message_files(msgs)))


def message_files(messages: Sequence[Message]) -> list[str]:
    """The file items of all user messages, in order (paths or URLs as given)."""
    files: list[str] = []
    for m in messages:
        if m.role == USER and not isinstance(m.content, str):
            files.extend(item.file for item in m.content if item.file)
    return files


def choose_files(requested: Sequence[object] | None, allowed: list[str]) -> list[str] | str:
    """The allowed files the model asked for (by full path/URL or by file name), or a refusal text."""
    if not allowed:
        return "The user has not given any files, so there is nothing to read."
    if not requested:
        return allowed
    by_name: dict[str, str] = {}
    for f in allowed:
        by_name.setdefault(f, f)
        by_name.setdefault(display_name(f), f)
    chosen: list[str] = []
    refused: list[str] = []
    for r in requested:
        match = by_name.get(r) if isinstance(r, str) else None
        (chosen if match else refused).append(match or str(r))
    if refused:
        names = ", ".join(display_name(f) for f in allowed)
        return (
            f"Refused: {', '.join(refused)} is not one of the user's files. Only these can be read: {names}. "
            "Use their names exactly."
        )
    return list(dict.fromkeys(chosen))


def store_from_cfg(cfg: dict[str, Any]) -> DocStore:
    """The DocStore in a tool's `store` setting, else the workspace's."""
    store = cfg.get("store")
    if store is None:
        from chatagent.rag.store import default_store  # the rag extra (numpy, parsers)

        store = default_store()
    return store

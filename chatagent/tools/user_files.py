"""Which files a tool may read: the user's (configured in the tool, attached to the user's messages), or when code
calls the tool directly, the ones it names; and the DocStore a tool reads them with."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from chatagent.rag.parsers import display_name
from chatagent.schema import USER, Message, to_messages
from chatagent.tools.arguments import JSONObject

if TYPE_CHECKING:
    from chatagent.rag.store import DocStore

__all__ = ["allowed_files", "choose_files", "configured_file", "files_to_read", "message_files", "store_from_cfg"]


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


def files_to_read(cfg: dict[str, Any], requested: Sequence[object] | None, kwargs: dict[str, Any]) -> list[str] | str:
    """The files a call may read, or a refusal text. Called by an agent (with the conversation's `messages`), only
    the user's files (see `choose_files`); called directly by code, as Qwen-Agent's tools are, the files it names."""
    if "messages" in kwargs:
        return choose_files(requested, allowed_files(cfg.get("files"), kwargs["messages"]))
    configured = allowed_files(cfg.get("files"), None)
    named = [configured_file(f, configured) for f in requested or [] if isinstance(f, str)]
    return named or choose_files(None, configured)


def configured_file(name: str, configured: list[str]) -> str:
    """The configured file `name` names (its path, or its file name), else `name` itself."""
    return next((f for f in configured if name in (f, display_name(f))), name)


def store_from_cfg(cfg: dict[str, Any]) -> DocStore:
    """The DocStore in a tool's `store` setting, else the workspace's."""
    store = cfg.get("store")
    if store is None:
        from chatagent.rag.store import default_store  # the rag extra (numpy, parsers)

        store = default_store()
    return store

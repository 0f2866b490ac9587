"""BaseToolWithFileAccess: a tool that works on the conversation's files, copied into its own `work_dir`.

    @register_tool('row_counter')
    class RowCounter(BaseToolWithFileAccess):
        description = 'Count the rows of the CSV files the user gave.'
        def call(self, params, files=None, **kwargs):
            super().call(params, files=files)          # copies each file into self.work_dir
            return {name: sum(1 for _ in open(os.path.join(self.work_dir, name))) for name in os.listdir(self.work_dir)}

As in Qwen-Agent, an agent hands a tool whose `file_access` is true the conversation's files as `files=`: the file
and image items of the user's messages and the agent's own `files`. `call` copies each into `work_dir` (the `work_dir`
setting, default `<workspace>/tools/<name>`): local paths by copy, http(s) URLs by download (under
`chatagent.utils.url_fetch.public_urls_only`, as `chatagent serve` runs, only public hosts). A copy keeps the file's
base name; a file that cannot be had is logged and skipped, as Qwen-Agent does.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chatagent.schema import USER, Message, to_messages
from chatagent.tools.arguments import JSONObject
from chatagent.tools.tool import BaseTool
from chatagent.utils.workspace import private_dirs, workspace_root

logger = logging.getLogger("chatagent.tools")

MAX_DOWNLOAD_BYTES = 100 << 20

__all__ = ["BaseToolWithFileAccess", "conversation_files", "save_to_work_dir"]


class BaseToolWithFileAccess(BaseTool):
    """A tool given the conversation's files as `files=`; `call` copies them into `self.work_dir`."""

    file_access = True

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        super().__init__(cfg)
        self.work_dir: str = os.fspath(self.cfg.get("work_dir") or workspace_root() / "tools" / self.name)

    def call(self, params: str | JSONObject, files: Sequence[str] | None = None, **kwargs: Any) -> Any:
        """Copy `files` into `work_dir`; a subclass does its work after `super().call(params, files=files)`."""
        if files:
            private_dirs(Path(self.work_dir))
            for file in files:
                try:
                    save_to_work_dir(file, self.work_dir)
                except (OSError, ValueError) as e:
                    logger.warning("%s: a file could not be copied into its work_dir: %s", self.name, e)
        return None


def save_to_work_dir(file: str, work_dir: str) -> str:
    """Copy a local file (a path or file:// URL) or download an http(s) URL into `work_dir`; the new path."""
    from chatagent.rag.document import DocumentError  # the rag package: only when a file is copied
    from chatagent.rag.urls import fetch_url, is_url  # (the parsers: not loaded by every tool call)

    if is_url(file, "http", "https"):
        try:
            data, name = fetch_url(file, MAX_DOWNLOAD_BYTES)
        except DocumentError as e:
            raise ValueError(str(e)) from None
        target = os.path.join(work_dir, _safe_name(name))
        with open(target, "wb") as out:
            out.write(data)
        return target
    path = file.removeprefix("file://")
    target = os.path.join(work_dir, _safe_name(os.path.basename(path)))
    if os.path.abspath(path) != os.path.abspath(target):
        shutil.copyfile(path, target)
    return target


def conversation_files(messages: Sequence[Message | JSONObject] | None) -> list[str]:
    """The file and image items of the user's messages, in order, without repeats (what `files=` holds)."""
    given = messages or []
    msgs = [m for m in given if isinstance(m, Message)]
    if len(msgs) < len(given):
        msgs = to_messages(given)
    found: list[str] = []
    for m in msgs:
        if m.role == USER and not isinstance(m.content, str):
            found.extend(v for item in m.content for v in (item.file, item.image) if v)
    return list(dict.fromkeys(found))


def _safe_name(name: str) -> str:
    base = os.path.basename(name.replace("\\", "/"))
    if base in ("", ".", ".."):
        raise ValueError(f"no file name in {name!r:.80}")
    return base

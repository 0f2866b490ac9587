"""code_interpreter: run the Python code the model writes, in a sandbox, with state kept per conversation.

    bot = FnCallAgent(llm=cfg, function_list=[{'name': 'code_interpreter', 'timeout': 20}])
    for rsp in bot.run(messages, session_id='user-42'):   # one sandboxed process per session_id
        ...
    bot.close_session('user-42')                           # ends that session's processes, removes its files
    bot.close()                                            # ends every session

A call returns what the code printed (stdout, stderr), the value of its last expression and, when it draws
with matplotlib, the figures as PNG images (data URLs in image content items). Errors (syntax, exceptions,
time, memory, too much output) come back as short text the model can act on. Files attached to the
conversation (`file` content items with a local path) are given to the session's work directory.

Each session (the `session_id` keyword passed to `agent.run`, else 'default') has its own process, uid and
work directory; see `chatagent.tools.sandbox` for what isolates it. Settings in the tool's cfg: `timeout`
(seconds per call, default 30), `sandbox` ('auto' | 'bwrap' | 'process'), `memory_mb`, `cpu_seconds`,
`max_processes`, `max_file_mb`, `max_disk_mb`, `keep_processes`, `max_output_chars`, `max_sessions` (live
sessions kept; the least recently used is closed, files included), `python`, `work_dir` (process mode: where
the sessions' directories are made).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import secrets
import tempfile
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, cast

from chatagent.schema import ContentItem
from chatagent.tools.base import BaseTool, register_tool
from chatagent.tools.sandbox import Limits, Sandbox, isolation_summary

if TYPE_CHECKING:
    from chatagent.tools._sandbox_protocol import RunReply

logger = logging.getLogger("chatagent.tools")

DEFAULT_TIMEOUT = 30.0
_FENCE = re.compile(r"^\s*```[\w+-]*[ \t]*\n(.*?)\n?```\s*$", re.S)


@register_tool("code_interpreter")
class CodeInterpreter(BaseTool):
    """Python in a sandboxed, persistent process per conversation."""

    runs_code = True

    description = (
        "Run Python code in a sandboxed Jupyter-like session and get back what it prints, the value of the last "
        "expression, and matplotlib figures as images. Variables, imports and files persist between calls in the "
        "same conversation. Files are read and written in the current directory. There is no internet access "
        "and no way to install packages."
    )
    parameters = {
        "type": "object",
        "properties": {"code": {"type": "string", "description": "The Python code to run."}},
        "required": ["code"],
    }

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        super().__init__(cfg)
        cfg = self.cfg
        self.exec_timeout = float(self.timeout or DEFAULT_TIMEOUT)
        # the framework's own timeout is only a backstop: the sandbox reports (and recovers from) its timeouts
        self.timeout = self.exec_timeout * 1.2 + 15.0
        defaults = Limits()
        self.limits = Limits(
            memory_mb=cfg.get("memory_mb", defaults.memory_mb),
            cpu_seconds=cfg.get("cpu_seconds", defaults.cpu_seconds),
            max_processes=cfg.get("max_processes", defaults.max_processes),
            max_file_mb=cfg.get("max_file_mb", defaults.max_file_mb),
            max_disk_mb=cfg.get("max_disk_mb", defaults.max_disk_mb),
            max_output_chars=int(cfg.get("max_output_chars", defaults.max_output_chars)),
            keep_processes=bool(cfg.get("keep_processes", False)),
        )
        self.sandbox_mode = cfg.get("sandbox", "auto")
        if self.sandbox_mode not in ("auto", "bwrap", "process"):
            raise ValueError(
                f"code_interpreter: sandbox must be 'auto', 'bwrap' or 'process', got {self.sandbox_mode!r}"
            )
        self.python = cfg.get("python")
        self.max_sessions = max(1, int(cfg.get("max_sessions", 8)))
        self._work_dir: str | None = cfg.get("work_dir")
        self._made_work_dir = False
        self._sessions: OrderedDict[str, Sandbox] = OrderedDict()
        self._noted: set[str] = set()
        self._lock = threading.Lock()

    def _session_dir(self, session_id: str) -> str | None:
        """A new host directory for a process-mode session (bubblewrap keeps files inside the sandbox)."""
        if self.sandbox_mode != "process":
            return None
        with self._lock:
            if self._work_dir is None:
                self._work_dir = tempfile.mkdtemp(prefix="chatagent-code-")
                self._made_work_dir = True
            os.makedirs(self._work_dir, exist_ok=True)
            if os.geteuid() == 0:
                os.chmod(self._work_dir, 0o711)  # each session's uid must reach its own directory, and no more
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", session_id)[:40].lstrip(".") or "session"
        digest = hashlib.sha1(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        return os.path.join(str(self._work_dir), f"{safe}-{digest}-{secrets.token_hex(4)}")

    def sandbox(self, session_id: str = "default") -> Sandbox:
        """The session's sandbox (created on first use; the least recently used beyond max_sessions is closed)."""
        with self._lock:
            sb = self._sessions.get(session_id)
            if sb is not None:
                self._sessions.move_to_end(session_id)
                return sb
        sb = Sandbox(self._session_dir(session_id), self.limits, self.sandbox_mode, self.python)
        evicted: list[tuple[str, Sandbox]] = []
        with self._lock:
            self._sessions[session_id] = sb
            while len(self._sessions) > self.max_sessions:
                evicted.append(self._sessions.popitem(last=False))
        for name, old in evicted:
            logger.info("code_interpreter: closing session %r (more than %d sessions)", name, self.max_sessions)
            old.close()
        return sb

    def live_sessions(self) -> list[str]:
        """The ids of the sessions that have a sandbox now."""
        with self._lock:
            return list(self._sessions)

    def call(self, params: str | dict[str, Any], **kwargs: Any) -> str | list[ContentItem]:
        code = _strip_fence(self.parse_params(params)["code"])
        session_id = str(kwargs.get("session_id") or "default")
        sb = self.sandbox(session_id)
        notes = [n for path in _input_files(kwargs.get("messages") or []) if (n := sb.put_file(path))]
        reply = sb.run(code, self.exec_timeout)
        if sb.mode != "bwrap" and session_id not in self._noted:
            self._noted.add(session_id)
            notes.insert(0, isolation_summary(sb))
        return format_reply(reply, "\n".join(notes) or None)

    @property
    def isolation(self) -> str:
        """What the sandbox guarantees on this machine (starts a probe session if none has run yet)."""
        with self._lock:
            live = next((s for s in self._sessions.values() if s.alive), None)
        if live is None:
            live = self.sandbox("default")
            live.start()
        return isolation_summary(live)

    def close_session(self, session_id: str) -> None:
        """End one session: its processes, its files, its uid."""
        with self._lock:
            sb = self._sessions.pop(session_id, None)
            self._noted.discard(session_id)
        if sb is not None:
            sb.close()

    def close(self) -> None:
        """End every session (processes and files)."""
        with self._lock:
            sessions = list(self._sessions.values())
            self._sessions.clear()
            self._noted.clear()
        for sb in sessions:
            sb.close()
        if self._made_work_dir and self._work_dir is not None:
            try:
                os.rmdir(self._work_dir)
            except OSError:
                pass


def _strip_fence(code: str) -> str:
    """Code without a surrounding Markdown fence (models often send ```python ... ```)."""
    m = _FENCE.match(code)
    return m.group(1) if m else code


def _input_files(messages: list[Any]) -> list[str]:
    """The local files attached to the conversation (`file` items that are paths, not URLs); `messages` are
    Messages or dicts, as the agent was given them."""
    paths: list[str] = []
    for msg in messages:
        content = msg.get("content") if hasattr(msg, "get") else None
        if not isinstance(content, list):
            continue
        for item in cast("list[Any]", content):  # ContentItems, or the dicts of a message given as a dict
            path = item.get("file") if hasattr(item, "get") else None
            if path and "://" not in path and path not in paths:
                paths.append(path)
    return paths


def format_reply(reply: RunReply, note: str | None = None) -> str | list[ContentItem]:
    """The sandbox's reply as the function message's content: text, plus an image item per figure."""
    parts: list[str] = []
    stdout, stderr, dropped = reply.get("stdout"), reply.get("stderr"), reply.get("dropped")
    result, error = reply.get("result"), reply.get("error")
    if stdout:
        parts.append("stdout:\n" + stdout.rstrip("\n"))
    if stderr:
        parts.append("stderr:\n" + stderr.rstrip("\n"))
    if dropped:
        parts.append(f"[{dropped} more characters of output were not kept]")
    if result is not None:
        parts.append("result:\n" + result)
    if error:
        parts.append("error:\n" + error)
    figures = reply.get("figures") or []
    for n, fig in enumerate(figures, 1):
        parts.append(f"[figure {n}: a {fig.width}x{fig.height} PNG image]")
    if not parts:
        parts.append("Finished with no output.")
    text = "\n\n".join([note, *parts] if note else parts)
    if not figures:
        return text
    return [ContentItem(text=text)] + [ContentItem(image=fig.data_url) for fig in figures]


__all__ = ["CodeInterpreter", "format_reply"]

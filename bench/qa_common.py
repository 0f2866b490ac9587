"""Shared by the qa_*.py scripts, which run inside the Qwen-Agent venv (bench/_qwen_agent.py), never ours.

guard() refuses every connection and name lookup that is not loopback, so that Qwen-Agent cannot reach the
network unnoticed; emit() prints the result as the last JSON line, with what was refused.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from _measure import best  # noqa: F401  (the qa_* scripts time with it, as our benches do)

LOOPBACK = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}
BLOCKED: list[str] = []
_installed = False


def _is_loopback(host: object) -> bool:
    return isinstance(host, str) and (host in LOOPBACK or host.startswith("127."))


def _hook(event: str, args: tuple) -> None:
    host = None
    if event == "socket.connect" and isinstance(args[1], tuple):
        host = args[1][0]
    elif event == "socket.getaddrinfo":
        host = args[0]
        host = host.decode() if isinstance(host, bytes) else host
        if host is None:
            return
    else:
        return
    if not _is_loopback(host):
        BLOCKED.append(f"{event} {host}")
        raise PermissionError(f"network access refused in the Qwen-Agent reference run: {event} {host}")


def guard() -> None:
    """Install (once) the audit hook that refuses non-loopback connections and lookups."""
    global _installed
    if not _installed:
        sys.addaudithook(_hook)
        _installed = True


def emit(result: dict[str, Any]) -> None:
    """Print the result as one JSON line (the runner reads the last line)."""
    result["blocked_network"] = BLOCKED
    print(json.dumps(result), flush=True)

"""Tools that come from third parties (an MCP server's, a remote A2A agent): their schemas are remembered here, so
that what chooses tools by meaning (`chatagent.llm.local.tool_router`) holds them to a higher bar than the tools the
application wrote, whose descriptions it trusts.

    mark_third_party(tool.function)   # BaseTool.function does it for a tool whose class says `third_party = True`
    is_third_party(function)          # the same name and description were marked

A schema is remembered by its name and description (a bounded set: the oldest are forgotten past `MAX_KEPT`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

MAX_KEPT = 4096
_marked: OrderedDict[tuple[str, str], None] = OrderedDict()
_lock = threading.Lock()


def _key(function: dict[str, Any]) -> tuple[str, str]:
    return str(function.get("name") or ""), str(function.get("description") or "")


def mark_third_party(function: dict[str, Any]) -> None:
    """Remember that this tool schema comes from a third party."""
    key = _key(function)
    with _lock:
        _marked[key] = None
        _marked.move_to_end(key)
        while len(_marked) > MAX_KEPT:
            _marked.popitem(last=False)


def is_third_party(function: dict[str, Any]) -> bool:
    """Whether a schema with this name and description was marked as a third party's."""
    return _key(function) in _marked


__all__ = ["MAX_KEPT", "is_third_party", "mark_third_party"]

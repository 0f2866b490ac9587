"""The bare relay (bench/_peer_bare.py) over chatagent's small connection pools (chatagent.llm.http_pool): httpx
and json with no framework, without the cost of one big httpcore pool; the floor for many concurrent streams."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
from _peer_bare import IMPORT, version  # noqa: F401  (the same import and version as the bare relay)
from _peer_bare import astream as _astream

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this worktree's chatagent

from chatagent.llm.http_pool import ShardedTransport  # noqa: E402


def astream(url: str, model: str) -> Callable[[], AsyncIterator[str]]:
    return _astream(url, model, httpx.AsyncClient(timeout=60, transport=ShardedTransport()))

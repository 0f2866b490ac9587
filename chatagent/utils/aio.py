"""One asyncio event loop in a daemon thread, for coroutines that synchronous code must run.

`run_coroutine(coro, timeout)` runs `coro` there and waits for it. Because the loop lives as long as the
process, what a coroutine leaves behind (an `httpx.AsyncClient`, a connection pool) keeps working on the
next call, which `asyncio.run` per call would break ("Event loop is closed").
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

_loop: asyncio.AbstractEventLoop | None = None
_lock = threading.Lock()


def background_loop() -> asyncio.AbstractEventLoop:
    """The process's background event loop (started on first use)."""
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="chatagent-asyncio", daemon=True).start()
            _loop = loop
        return _loop


def run_coroutine(coro: Any, timeout: float | None = None) -> Any:
    """Run `coro` on the background loop and wait for its result; on timeout it is cancelled and
    TimeoutError raised. Must not be called from the background loop itself."""
    loop = background_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        coro.close()
        raise RuntimeError("run_coroutine() called from the background loop itself: await the coroutine instead")
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return future.result(timeout)
    except FutureTimeout:
        future.cancel()
        raise TimeoutError from None


__all__ = ["background_loop", "run_coroutine"]

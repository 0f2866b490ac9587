"""Requests paced per model: `generate_cfg={'max_rpm': N}` spaces the requests to one model at least 60/N seconds
apart, across every thread and asyncio task of the process (CrewAI's `max_rpm`, LangChain's rate limiter).

A model is its endpoint and name: every model object with the same `model_server` and `model` (and the same
`max_rpm`) shares one pace. Each request takes the next free slot and waits for it: `time.sleep` in a thread,
`asyncio.sleep` on an event loop (never blocking it). A retry is a request too. A slot past the run's deadline
raises RunDeadlineExceeded at once instead of waiting for nothing.
"""

from __future__ import annotations

import threading
import time

from chatagent.errors import RunDeadlineExceeded

_paces: dict[tuple[str, float], Pace] = {}
_paces_lock = threading.Lock()


class Pace:
    """The slots of one model's requests: `interval` seconds apart."""

    __slots__ = ("interval", "_next", "_lock")

    def __init__(self, max_rpm: float) -> None:
        self.interval = 60.0 / max_rpm
        self._next = 0.0  # time.monotonic() of the next free slot
        self._lock = threading.Lock()

    def take(self, deadline: float | None = None) -> float:
        """Take the next slot; how long to wait for it (a plan's `Sleep`: `time.sleep` in a thread, `asyncio.sleep` on
        an event loop)."""
        with self._lock:
            now = time.monotonic()
            slot = max(now, self._next)
            if deadline is not None and slot > deadline:
                raise RunDeadlineExceeded("the run's deadline comes before this model's next request slot (max_rpm)")
            self._next = slot + self.interval
        return slot - now


def pace_of(model_key: str, max_rpm: float) -> Pace:
    """The process's pace for `model_key` at `max_rpm` requests a minute."""
    key = (model_key, float(max_rpm))
    with _paces_lock:
        found = _paces.get(key)
        if found is None:
            found = _paces[key] = Pace(max_rpm)
        return found


__all__ = ["Pace", "pace_of"]

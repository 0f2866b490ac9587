"""`counted_calls(fn, counts)`: run `fn()` once under a profile hook and count the Python calls (and generator
resumptions) it makes in this thread whose code `counts(code)` keeps: what a test compares across sizes or
variants instead of a time, which a busy machine would change."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any, TypeVar

T = TypeVar("T")


def counted_calls(fn: Callable[[], T], counts: Callable[[CodeType], bool] = lambda code: True) -> tuple[T, int]:
    """`fn()`'s result and how many of its calls `counts` kept."""
    count = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal count
        if event == "call" and counts(frame.f_code):
            count += 1

    sys.setprofile(profile)
    try:
        out = fn()
    finally:
        sys.setprofile(None)
    return out, count

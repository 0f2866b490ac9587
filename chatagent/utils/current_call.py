"""The tool call whose code is running in this context: its id as the model gave it (`CALL_ID`), set by the
tool-call path (`chatagent.tools.calling`) around a tool's execution and read through `current_run().call_id`."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, TypeVar

CALL_ID: ContextVar[str | None] = ContextVar("chatagent_tool_call", default=None)

_T = TypeVar("_T")


def run_as_call(call_id: str | None, fn: Callable[..., _T], /, *args: Any, **kwargs: Any) -> _T:
    """`fn(*args, **kwargs)` with `call_id` as the tool call running now."""
    token = CALL_ID.set(call_id)
    try:
        return fn(*args, **kwargs)
    finally:
        CALL_ID.reset(token)


__all__ = ["CALL_ID", "run_as_call"]

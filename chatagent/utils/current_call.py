"""The tool call whose code is running in this context: its id as the model gave it (`CALL_ID`), set by the
tool-call path (`chatagent.tools.calling`) around a tool's execution and read through `current_run().call_id`; and
`PendingQuestion`, what a tool's `chatagent.ask_user` raises to pause the run (the tool-call path turns it into the
call's outcome)."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, TypeVar

CALL_ID: ContextVar[str | None] = ContextVar("chatagent_tool_call", default=None)

_T = TypeVar("_T")


class PendingQuestion(BaseException):  # noqa: N818 (not an error: the run pauses for a person's answer)
    """A tool asked a person something (`chatagent.ask_user`) that has no answer yet: the call stops here and the
    run pauses with `question` ({'id', 'question', 'schema', 'call_id'}) pending. A BaseException, so that a
    tool's own `except Exception` does not take it for a failure."""

    def __init__(self, question: dict[str, Any]) -> None:
        super().__init__(question.get("question", ""))
        self.question = question


def run_as_call(call_id: str | None, fn: Callable[..., _T], /, *args: Any, **kwargs: Any) -> _T:
    """`fn(*args, **kwargs)` with `call_id` as the tool call running now."""
    token = CALL_ID.set(call_id)
    try:
        return fn(*args, **kwargs)
    finally:
        CALL_ID.reset(token)


__all__ = ["CALL_ID", "PendingQuestion", "run_as_call"]

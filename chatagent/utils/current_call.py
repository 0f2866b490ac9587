"""The tool call whose code is running in this context: its id as the model gave it (`CALL_ID`), set by the
tool-call path (`chatagent.tools.calling`) around a tool's execution and read through `current_run().call_id`."""

from __future__ import annotations

from contextvars import ContextVar

CALL_ID: ContextVar[str | None] = ContextVar("chatagent_tool_call", default=None)

__all__ = ["CALL_ID"]

"""One tool call as part of the current run: `run_tool`, what `Agent._run_tool` and `_call_tool` do, and what the
run's control uses to run the calls a person approved; `emit_tool_end`, the event after any tool call."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from chatagent.run import events
from chatagent.run.context import RunContext, current_run
from chatagent.run.driver import ask
from chatagent.run.interrupts import Asked
from chatagent.run.requests import Asking, ToolBatch, ToolWait

if TYPE_CHECKING:
    from chatagent.schema import ContentItem
    from chatagent.tools.calling import ToolCache
    from chatagent.tools.tool import BaseTool


class ToolOwner(Protocol):
    """What a tool call needs of the agent it is made for (a `chatagent.run.protocol.Runnable` has it, and so do the
    steps mixed into `chatagent.Agent`)."""

    @property
    def name(self) -> str | None: ...

    @property
    def function_map(self) -> Mapping[str, BaseTool]: ...

    @property
    def tool_cache(self) -> ToolCache | None: ...


def run_tool(
    agent: ToolOwner, tool_name: str, tool_args: str | dict[str, Any] | None = "{}", **kwargs: Any
) -> Asking[str | list[ContentItem]]:
    """One call of `agent`'s tool `tool_name` as part of the current run; the content of its function message."""
    from chatagent.tools.calling import PreparedCall, ToolErrorKind, prepare_call  # tool machinery: runs with tools

    ctx = current_run()
    call_id = kwargs.pop("call_id", None)
    if ctx.callbacks:
        emit_tool_start(agent.name, tool_name, tool_args, call_id, ctx)
    cache = agent.tool_cache
    call = prepare_call(
        agent.function_map, tool_name, tool_args, call_id=call_id, counts=ctx.tool_calls, cache=cache, kwargs=kwargs
    )
    if isinstance(call, PreparedCall):
        handle = yield from ask(ToolBatch([call], 1, cache, ctx.deadline, ctx))
        outcome = yield from ask(ToolWait(handle, 0, ctx))
    else:
        outcome = call
    if ctx.callbacks:
        emit_tool_end(agent.name, outcome, ctx)
    if outcome.error == ToolErrorKind.INTERRUPTED:  # it asked a person: the run pauses (chatagent.run.interrupts)
        raise Asked([outcome.content])
    ctx.check_deadline()
    return outcome.content


def emit_tool_start(agent: str | None, tool: str, arguments: Any, call_id: str | None, run: RunContext) -> None:
    """Tell `run`'s callbacks that handle tool_start about a call of `tool` about to be made in it."""
    found = events.handlers(run.callbacks, events.TOOL_START)
    if found:
        raw = arguments if isinstance(arguments, str) else str(arguments)
        event = events.make_event(events.TOOL_START, agent, run, tool=tool, arguments=raw, call_id=call_id)
        events.deliver(found, event)


def emit_tool_end(agent: str | None, outcome: Any, run: RunContext) -> None:
    """Tell `run`'s callbacks that handle tool_end (OpenTelemetry's among them) about a ToolOutcome (chatagent.tools.calling) of a
    call made in it; the Event is built only if a callback handles it."""
    found = events.handlers(run.callbacks, events.TOOL_END)
    if found:
        event = events.make_event(
            events.TOOL_END, agent, run, outcome.duration, error=outcome.content if outcome.error else None,
            data={"error_kind": outcome.error, "cached": outcome.cached}, tool=outcome.name,
            arguments=outcome.arguments, call_id=outcome.call_id, result=outcome.content,
        )  # fmt: skip
        events.deliver(found, event)


__all__ = ["ToolOwner", "emit_tool_end", "emit_tool_start", "run_tool"]

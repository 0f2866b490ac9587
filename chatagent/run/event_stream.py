"""One typed event stream: `run(..., events=True)` / `arun(..., events=True)` yield `RunEvent`s, in order.

    for ev in bot.run(messages, events=True):
        if ev.type == "text_delta":
            print(ev.data["text"], end="")

The stream is the run's callback events (`chatagent.run.events`: the same ones callbacks, traces and OpenTelemetry
listen to) and its streamed fragments, merged in the order they happen: both are made in the thread that iterates
the run. Types:

- `run_start`, `run_end` (`usage`, `duration`, `error`); `model_start`, `model_end` (`usage` of the call, `model`,
  `duration`, `error`);
- `text_delta`, `reasoning_delta` (`index`: the message, `text`); `tool_call_delta` (`index`, `call_id`, `name`,
  `arguments`: the piece of the arguments this fragment adds, as the model streams them);
- `tool_start` (`tool`, `call_id`, `arguments`), `tool_end` (`tool`, `call_id`, `result`, `error`, `duration`);
- `interrupt` (`questions`: what the run waits for, as `chatagent.pending_questions` lists it);
- `step_start`, `step_end` (`step`: 'task', 'flow', 'flow_step', ...; `name`), `handoff` (`to`), `retrieval`
  (`query`, `sources`), `memory` (`op`, `records`), `progress` (`text`).

Each event has `type`, `agent`, `run_id` and `parent_id` (the run a nested run is part of; None at the top), `time`
and `data`; `to_dict()` is its JSON form.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from chatagent.run.events import INTERRUPT, KINDS, Callbacks, Event
from chatagent.schema.fragment import STREAMING_CALL, Fragment
from chatagent.tools.calling import ToolErrorKind

if TYPE_CHECKING:
    from chatagent.run.context import RunContext

_TYPES = {"llm_start": "model_start", "llm_end": "model_end"}


class RunEvent:
    """Something that happened in a run (see the module docstring)."""

    __slots__ = ("type", "agent", "run_id", "parent_id", "time", "data")

    def __init__(self, type: str, agent: str | None, run_id: str | None, parent_id: str | None,
                 data: dict[str, Any]) -> None:  # fmt: skip
        self.type, self.agent, self.run_id, self.parent_id = type, agent, run_id, parent_id
        self.time = time.time()
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "agent": self.agent, "run_id": self.run_id, "parent_id": self.parent_id,
                "time": self.time, **self.data}  # fmt: skip

    def __repr__(self) -> str:
        return f"RunEvent({self.type!r}, {self.data!r:.120})"


def _run_ids(run: Any) -> tuple[str | None, str | None]:
    if run is None:
        return None, None
    parent = getattr(run, "parent", None)
    return f"{id(run):x}", f"{id(parent):x}" if parent is not None else None


def _usage(u: Any) -> dict[str, Any] | None:
    if u is None:
        return None
    return {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens, "cost": u.cost}


def from_event(e: Event) -> RunEvent:
    """The RunEvent of a callback event."""
    kind = e.kind
    data: dict[str, Any] = {}
    if kind in ("run_end", "llm_end"):
        data = {"usage": _usage(e.usage), "duration": e.duration, "error": e.error}
        if kind == "llm_end":
            data["model"] = e.data.get("model")
    elif kind == "tool_start":
        data = {"tool": e.tool, "call_id": e.call_id, "arguments": e.arguments}
    elif kind == "tool_end" and e.data.get("error_kind") == ToolErrorKind.INTERRUPTED:  # it asked a person (ask_user)
        data = {
            "tool": e.tool,
            "call_id": e.call_id,
            "result": None,
            "error": ToolErrorKind.INTERRUPTED.value,
            "duration": e.duration,
        }
    elif kind == "tool_end":
        data = {"tool": e.tool, "call_id": e.call_id, "result": e.result, "error": e.error, "duration": e.duration}
    elif kind in ("step_start", "step_end"):
        data = {"step": e.data.get("step"), "name": e.data.get("name")}
        if kind == "step_end":
            data |= {"duration": e.duration, "error": e.error}
    elif kind == "handoff":
        data = {"to": e.data.get("to")}
    elif kind == "retrieval":
        data = {"query": e.data.get("query"), "sources": e.data.get("sources")}
    elif kind == "memory":
        data = {"op": e.data.get("op"), "records": e.data.get("records")}
    elif kind == "progress":
        data = {"text": e.data.get("text")}
    run_id, parent_id = _run_ids(e.run)
    return RunEvent(_TYPES.get(kind, kind), e.agent, run_id, parent_id, data)


class Listener(Callbacks):
    """Keeps every callback event of a run, for the stream to give out in order."""

    __slots__ = ("pending",)

    def __init__(self) -> None:
        self.pending: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.pending.append(event)


for _kind in KINDS:  # every kind, so that `handlers` finds an overridden method for each
    if _kind != INTERRUPT:  # (the stream's interrupts are read from the fragments that pause the run)
        setattr(Listener, "on_" + _kind, Listener.__call__)


def fragment_events(
    fragments: list[Fragment], agent: str | None, run_id: str | None = None, streamed: set[int] | None = None
) -> list[RunEvent]:
    """The deltas and interrupts a list of streamed fragments (of the run `run_id`) makes. A call whose arguments
    streamed (`extra['streaming_call']`) gives a `tool_call_delta` per piece; the complete call that then replaces
    its message gives none (`streamed`: the messages whose calls streamed so far, kept by the caller)."""
    out: list[RunEvent] = []
    for f in fragments:
        extra = f.extra
        if f.role == "assistant":
            if f.reasoning_content:
                out.append(
                    RunEvent("reasoning_delta", agent, run_id, None, {"index": f.index, "text": f.reasoning_content})
                )
            text = f.content if isinstance(f.content, str) else f.text
            if text:
                out.append(RunEvent("text_delta", agent, run_id, None, {"index": f.index, "text": text}))
            piece = (extra or {}).get(STREAMING_CALL)
            if piece is not None:
                if streamed is not None:
                    streamed.add(f.index)
                data = {"index": f.index, "call_id": (extra or {}).get("function_id"), "name": piece.get("name"),
                        "arguments": piece.get("arguments", "")}  # fmt: skip
                out.append(RunEvent("tool_call_delta", agent, run_id, None, data))
            fc = f.function_call
            if fc is not None and not (f.replace and streamed is not None and f.index in streamed):
                data = {"index": f.index, "call_id": (extra or {}).get("function_id"), "name": fc.name,
                        "arguments": fc.arguments}  # fmt: skip
                out.append(RunEvent("tool_call_delta", agent, run_id, None, data))
        if extra and ("pending_questions" in extra or "pending_approval" in extra):
            questions = list(extra.get("pending_questions") or ()) + [
                {"id": a["id"], "kind": "approval", "name": a["name"], "arguments": a["arguments"]}
                for a in extra.get("pending_approval") or ()
            ]
            out.append(RunEvent("interrupt", agent, run_id, None, {"questions": questions}))
    return out


class Merged:
    """A run's events in order: those its listener kept since the last fragments, then those the fragments make."""

    __slots__ = ("pending", "agent", "run_id", "streamed")

    def __init__(self, ctx: RunContext) -> None:
        self.pending: list[Event] = ctx.events.pending
        self.agent, self.run_id = ctx.agent_name, f"{id(ctx):x}"
        self.streamed: set[int] = set()  # the messages whose calls streamed their arguments

    def take(self, fragments: list[Fragment]) -> list[RunEvent]:
        out = _drained(self.pending) if self.pending else []
        out += fragment_events(fragments, self.agent, self.run_id, self.streamed)
        return out

    def rest(self) -> list[RunEvent]:
        return _drained(self.pending)


def events(stream: Iterator[list[Fragment]], ctx: RunContext) -> Iterator[RunEvent]:
    """The run's events: `stream`'s fragments (a delta run's) and its listener's, in the order they happened."""
    merged = Merged(ctx)
    try:
        for fragments in stream:
            yield from merged.take(fragments)
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()
    yield from merged.rest()


class AsyncEvents(AsyncIterator[RunEvent]):
    """`events` for `arun()`: the stream's events as an async iterator (`aclose()` closes the run's stream)."""

    __slots__ = ("stream", "merged", "ready", "ended")

    def __init__(self, stream: AsyncIterator[list[Fragment]], ctx: RunContext) -> None:
        self.stream, self.merged = stream, Merged(ctx)
        self.ready: list[RunEvent] = []
        self.ended = False

    def __aiter__(self) -> AsyncEvents:
        return self

    async def __anext__(self) -> RunEvent:
        while not self.ready:
            if self.ended:
                raise StopAsyncIteration
            try:
                self.ready = self.merged.take(await self.stream.__anext__())
            except StopAsyncIteration:
                self.ended, self.ready = True, self.merged.rest()
        return self.ready.pop(0)

    async def aclose(self) -> None:
        aclose = getattr(self.stream, "aclose", None)
        if aclose is not None:
            await aclose()


def _drained(pending: list[Event]) -> list[RunEvent]:
    out = [from_event(e) for e in pending]
    pending.clear()
    return out


__all__ = ["AsyncEvents", "Listener", "Merged", "RunEvent", "events", "fragment_events", "from_event"]

"""One typed event stream: `run(..., events=True)` / `arun(..., events=True)` yield `RunEvent`s, in order.

    for ev in bot.run(messages, events=True):
        if ev.type == "text_delta":
            print(ev.data["text"], end="")

The stream is the run's callback events (`chatagent.run.events`: the same ones callbacks, traces and OpenTelemetry
listen to) and its streamed fragments, merged in the order they happen. The events reach a queue (`Listener`) when
they happen, in whatever thread: while the run waits for a tool (or a blocking call), the driver carries the wait out
in the stream's worker thread (one a stream, not one a wait) and the stream gives out each event as it arrives (a
tool's start before the tool has ended, the events of a run nested in the tool as they happen). Types:

- `run_start`, `run_end` (`usage`, `duration`, `error`); `model_start` (given out as the call's request leaves),
  `model_end` (`usage` of the call, `model`, `duration`, `error`);
- `text_delta`, `reasoning_delta` (`index`: the message, `text`); `tool_call_delta` (`index`, `call_id`, `name`,
  `arguments`: the piece of the arguments this fragment adds, as the model streams them); `tool_call_restart`
  (`index`, `call_id`, `name`): a retried model stream starts that call's arguments again and they differ from what
  was sent: forget the call's arguments so far, the deltas that follow are the new ones (a retry that sends the same
  arguments again gives only what goes past what was sent: the deltas of a call always add up to its arguments);
- `tool_start` (`tool`, `call_id`, `arguments`), `tool_end` (`tool`, `call_id`, `result`, `error`, `duration`);
- `interrupt` (`questions`: what the run waits for, as `chatagent.pending_questions` lists it);
- `step_start`, `step_end` (`step`: 'task', 'flow', 'flow_step', ...; `name`), `handoff` (`to`), `retrieval`
  (`query`, `sources`), `memory` (`op`: 'recall', with `text`, what the model was given; 'store', with `records`: how
  many were kept), `progress` (`text`).

Each event has `type`, `agent`, `run_id` and `parent_id` (the run a nested run is part of; None at the top), `time`
and `data`; `to_dict()` is its JSON form.
"""

from __future__ import annotations

import contextvars
import logging
import queue
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator
from time import time as _now
from typing import TYPE_CHECKING, Any

from chatagent.run.events import INTERRUPT, KINDS, Callbacks, Event
from chatagent.run.requests import Blocking, ToolWait
from chatagent.schema.fragment import STREAMING_CALL, Fragment
from chatagent.tools.calling import ToolErrorKind

if TYPE_CHECKING:
    from chatagent.run.context import RunContext

logger = logging.getLogger("chatagent.events")
_TYPES = {"llm_start": "model_start", "llm_end": "model_end"}


class RunEvent:
    """Something that happened in a run (see the module docstring)."""

    __slots__ = ("type", "agent", "run_id", "parent_id", "time", "data")

    def __init__(self, type: str, agent: str | None, run_id: str | None, parent_id: str | None,
                 data: dict[str, Any]) -> None:  # fmt: skip
        self.type, self.agent, self.run_id, self.parent_id = type, agent, run_id, parent_id
        self.time = _now()
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "agent": self.agent, "run_id": self.run_id, "parent_id": self.parent_id,
                "time": self.time, **self.data}  # fmt: skip

    def __repr__(self) -> str:
        return f"RunEvent({self.type!r}, {self.data!r:.120})"


def _run_ids(run: Any) -> tuple[str | None, str | None]:
    if run is None:
        return None, None
    parent = run.parent
    return run.run_id, parent.run_id if parent is not None else None


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
        data = {"op": e.data.get("op"), "records": e.data.get("records"), "text": e.data.get("text")}
    elif kind == "progress":
        data = {"text": e.data.get("text")}
    run_id, parent_id = _run_ids(e.run)
    return RunEvent(_TYPES.get(kind, kind), e.agent, run_id, parent_id, data)


#: a wait the stream's worker thread carries out: in this context, this function, its outcome's box, the signal
_Job = tuple[contextvars.Context, Callable[[], Any], list[tuple[bool, Any]], threading.Event]
#: how many events a thread other than the stream's may get ahead of it while the run waits (then it waits too)
LIMIT = 1024


class Listener(Callbacks):
    """The queue a run's callback events reach when they happen, in whatever thread, for its stream to give out in
    order. While the run waits for a tool or a blocking call (`waited`, `awaiting`) each event wakes the stream, and
    a thread other than the stream's that gets `LIMIT` events ahead of it waits for the stream to take them (bounded,
    nothing dropped)."""

    __slots__ = ("pending", "wake", "reader", "room", "blocked", "jobs")

    def __init__(self) -> None:
        self.pending: list[Event] = []
        self.wake: Callable[[], object] | None = None  # while the stream waits: tells it that an event arrived
        self.reader = 0  # the thread the waiting stream is in
        self.room = threading.Condition()  # a thread ahead of the stream by LIMIT events waits on it
        self.blocked = 0  # how many do
        self.jobs: queue.SimpleQueue[_Job | None] | None = None  # the worker thread's, once started (`waited`)

    def __call__(self, event: Event) -> None:
        pending = self.pending
        pending.append(event)
        wake = self.wake
        if wake is not None:
            wake()
            if len(pending) >= LIMIT and threading.get_ident() != self.reader:
                self._wait_for_room()

    def _wait_for_room(self) -> None:
        with self.room:
            self.blocked += 1
            try:
                self.room.wait_for(lambda: len(self.pending) < LIMIT or self.wake is None)
            finally:
                self.blocked -= 1

    def drained(self) -> list[RunEvent]:
        """The events that arrived since the last call, as RunEvents (taken off the queue)."""
        pending = self.pending
        n = len(pending)  # (another thread may append meanwhile: only these n are taken)
        out = [from_event(e) for e in pending[:n]]
        del pending[:n]
        if self.blocked:
            with self.room:
                self.room.notify_all()
        return out

    def _stopped_waiting(self) -> None:
        self.wake = None
        if self.blocked:
            with self.room:
                self.room.notify_all()

    def waited(self, item: Any, carry_out: Callable[[Any], Any]) -> Generator[list[Fragment], None, Any]:
        """`carry_out(item)` for the synchronous driver (`drive`), what happens meanwhile given out as it happens: it
        yields an empty list (for the stream to give out the events that arrived) before the request, and while a
        tool's wait or a blocking call runs in the stream's worker thread (in a copy of this context) at each event. A
        tool's hooks (`ToolControl.after_tool`) still run here. Asked while the stream waits already (by a loop
        driven inside what it waits for), it carries `item` out in place: the stream gives those events out."""
        if self.wake is not None:
            return carry_out(item)
        if self.pending:
            yield []  # what happened before (a tool's start, the model's end) goes out before it runs
        if type(item) is ToolWait:
            handle, index = item.handle, item.index
            outcome = yield from self._aside(lambda: handle(index))
            item.handle = _Carried(outcome)  # (this request's own: the batch's handle is left as it is)
        elif type(item) is Blocking:
            return (yield from self._aside(lambda: carry_out(item)))
        return carry_out(item)

    def _aside(self, fn: Callable[[], Any]) -> Generator[list[Fragment], None, Any]:
        signal = threading.Event()
        box: list[tuple[bool, Any]] = []
        self.wake, self.reader = signal.set, threading.get_ident()
        self._jobs().put((contextvars.copy_context(), fn, box, signal))
        try:
            while not box:
                signal.clear()
                if self.pending:
                    yield []
                elif not box:
                    signal.wait()
        finally:
            self._stopped_waiting()
        ok, value = box[0]
        if not ok:
            raise value
        return value

    def _jobs(self) -> queue.SimpleQueue[_Job | None]:
        """The queue of the stream's worker thread (started at the first wait: one a stream, not one a wait)."""
        jobs = self.jobs
        if jobs is None:
            jobs = self.jobs = queue.SimpleQueue()
            threading.Thread(target=self._work, args=(jobs,), name="chatagent-events-wait", daemon=True).start()
        return jobs

    def _work(self, jobs: queue.SimpleQueue[_Job | None]) -> None:
        """The worker thread: each wait in turn, in the context the stream had when it asked, until `close`."""
        while (job := jobs.get()) is not None:
            context, fn, box, signal = job
            try:
                box.append((True, context.run(fn)))
            except BaseException as e:
                box.append((False, e))
                if self.wake is None:  # the stream was closed while it ran: nobody else hears of it
                    logger.warning("a tool's wait failed after its event stream was closed", exc_info=e)
            finally:
                signal.set()

    def close(self) -> None:
        """The stream has ended: its worker thread ends once it has carried out what it was given."""
        jobs, self.jobs = self.jobs, None
        if jobs is not None:
            jobs.put(None)

    async def awaiting(self, wait: Awaitable[Any]) -> AsyncIterator[None]:
        """For the asynchronous driver (`adrive`): until `wait` (a tool call's future) is done, yield at each event
        that happens meanwhile, in this loop or in a tool's worker thread, for the stream to give it out (and once
        first if events wait already)."""
        import asyncio

        if self.pending:
            yield
        future = asyncio.ensure_future(wait)
        if future.done():
            return
        loop = asyncio.get_running_loop()
        signal = asyncio.Event()
        future.add_done_callback(lambda _: signal.set())

        def wake() -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(signal.set)

        self.wake, self.reader = wake, threading.get_ident()
        try:
            while not future.done():
                signal.clear()
                if self.pending:
                    yield
                else:
                    await signal.wait()
        finally:
            self._stopped_waiting()


class _Carried:
    """A ToolWait's handle once its outcome is in: `carry_out` takes it from there."""

    __slots__ = ("outcome",)

    def __init__(self, outcome: Any) -> None:
        self.outcome = outcome

    def __call__(self, index: int) -> Any:
        return self.outcome


for _kind in KINDS:  # every kind, so that `handlers` finds an overridden method for each
    if _kind != INTERRUPT:  # (the stream's interrupts are read from the fragments that pause the run)
        setattr(Listener, "on_" + _kind, Listener.__call__)


def waited(listener: Listener, item: Any, carry_out: Callable[[Any], Any]) -> Generator[list[Fragment], None, Any]:
    """`listener.waited(item, carry_out)`, typed for the driver (which finds the listener on the run's context)."""
    return (yield from listener.waited(item, carry_out))


def awaiting(listener: Listener, wait: Awaitable[Any]) -> AsyncIterator[None]:
    """`listener.awaiting(wait)`, typed for the driver."""
    return listener.awaiting(wait)


class Calls:
    """What a stream gave out of each streaming call's arguments, by message: the pieces sent, and in a retry that
    starts them again (`Fragment.replace`) the new arguments so far (with the call's id and name, which only the
    first piece has) while they are still a prefix of those sent."""

    __slots__ = ("sent", "again")

    def __init__(self) -> None:
        self.sent: dict[int, list[str]] = {}
        self.again: dict[int, dict[str, Any]] = {}

    def piece(self, f: Fragment, data: dict[str, Any], out: list[RunEvent], agent: str | None,
              run_id: str | None) -> None:  # fmt: skip
        """The events of a streaming call's piece (`data` its delta's): the piece, or in a retry only what differs."""
        i = f.index
        sent = self.sent.get(i)
        if sent is None:
            self.sent[i] = [data["arguments"]]
        elif f.replace or i in self.again:
            so_far = self.again.pop(i, None)
            if so_far is not None:  # (the id and name the retry's first piece gave)
                data = so_far | {k: v for k, v in data.items() if v is not None}
                data["arguments"] = so_far["arguments"] + data["arguments"]
            self._again(i, data, out, agent, run_id)
            return
        else:
            sent.append(data["arguments"])
        out.append(RunEvent("tool_call_delta", agent, run_id, None, data))

    def _again(self, i: int, data: dict[str, Any], out: list[RunEvent], agent: str | None,
               run_id: str | None, final: bool = False) -> None:  # fmt: skip
        old, new = "".join(self.sent[i]), data["arguments"]
        if old.startswith(new) and new != old and not final:
            self.again[i] = data  # the same so far: nothing new to say yet
            return
        if not new.startswith(old):
            out.append(RunEvent("tool_call_restart", agent, run_id, None,
                                {"index": i, "call_id": data["call_id"], "name": data["name"]}))  # fmt: skip
            old = ""
        self.sent[i] = [new]
        if len(new) > len(old):
            out.append(RunEvent("tool_call_delta", agent, run_id, None, data | {"arguments": new[len(old) :]}))

    def complete(self, f: Fragment, data: dict[str, Any], out: list[RunEvent], agent: str | None,
                 run_id: str | None) -> None:  # fmt: skip
        """The complete call replacing streamed pieces (or a retry emptying their message): what differs from them."""
        i = f.index
        self.again.pop(i, None)
        if f.function_call is None:  # emptied: the retry made no call there
            del self.sent[i]
            out.append(RunEvent("tool_call_restart", agent, run_id, None,
                                {"index": i, "call_id": None, "name": None}))  # fmt: skip
        else:
            self._again(i, data, out, agent, run_id, final=True)


def fragment_events(
    fragments: list[Fragment], agent: str | None, run_id: str | None = None, calls: Calls | None = None
) -> list[RunEvent]:
    """The deltas and interrupts a list of streamed fragments (of the run `run_id`) makes. A call whose arguments
    streamed (`extra['streaming_call']`) gives a `tool_call_delta` per piece; the complete call that then replaces
    its message gives only what differs from them (`calls`: what was sent so far, kept by the caller)."""
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
            if extra is None and f.function_call is None and not f.replace:
                continue
            piece = (extra or {}).get(STREAMING_CALL)
            if piece is not None:
                data = {"index": f.index, "call_id": (extra or {}).get("function_id"), "name": piece.get("name"),
                        "arguments": piece.get("arguments", "")}  # fmt: skip
                if calls is None:
                    out.append(RunEvent("tool_call_delta", agent, run_id, None, data))
                else:
                    calls.piece(f, data, out, agent, run_id)
            fc = f.function_call
            if f.replace and calls is not None and f.index in calls.sent and piece is None:
                data = {"index": f.index, "call_id": (extra or {}).get("function_id"),
                        "name": fc.name if fc is not None else None,
                        "arguments": fc.arguments if fc is not None else ""}  # fmt: skip
                calls.complete(f, data, out, agent, run_id)
            elif fc is not None:
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

    __slots__ = ("listener", "pending", "agent", "run_id", "calls")

    def __init__(self, ctx: RunContext) -> None:
        self.listener: Listener = ctx.events
        self.pending: list[Event] = self.listener.pending
        self.agent, self.run_id = ctx.agent_name, ctx.run_id
        self.calls = Calls()  # what was sent of the calls whose arguments streamed

    def take(self, fragments: list[Fragment]) -> list[RunEvent]:
        out = self.listener.drained() if self.pending else []
        if fragments:
            out += fragment_events(fragments, self.agent, self.run_id, self.calls)
        return out

    def rest(self) -> list[RunEvent]:
        return self.listener.drained()


def events(stream: Iterator[list[Fragment]], ctx: RunContext) -> Iterator[RunEvent]:
    """The run's events: `stream`'s fragments (a delta run's) and its listener's, in the order they happened."""
    merged = Merged(ctx)
    pending, drained, agent, run_id = merged.pending, merged.listener.drained, merged.agent, merged.run_id
    try:
        for fragments in stream:
            if pending:
                yield from drained()
            if len(fragments) == 1:  # the common chunk, a piece of text, written out here: the per-chunk path
                f = fragments[0]
                text = f.content
                if (f.extra is None and f.function_call is None and not f.reasoning_content and not f.replace
                        and type(text) is str and text and f.role == "assistant"):  # fmt: skip
                    yield RunEvent("text_delta", agent, run_id, None, {"index": f.index, "text": text})
                    continue
            if fragments:
                yield from fragment_events(fragments, agent, run_id, merged.calls)
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()
        merged.listener.close()
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
                self.merged.listener.close()  # (a worker thread a loop inside a tool's thread may have started)
        return self.ready.pop(0)

    async def aclose(self) -> None:
        aclose = getattr(self.stream, "aclose", None)
        if aclose is not None:
            await aclose()
        self.merged.listener.close()


__all__ = ["AsyncEvents", "Calls", "Listener", "Merged", "RunEvent", "events", "fragment_events", "from_event"]

"""Events: watch a run's model calls and tool calls as they happen.

    def log(event):
        print(event.kind, event.tool or '', event.duration, event.usage)

    bot = FnCallAgent(llm=cfg, function_list=[...], callbacks=[log])
    bot.run_nonstream(messages, callbacks=[other])        # per-run callbacks add to the agent's

A callback is a function taking an Event, or an object with `on_<kind>(event)` methods (subclass
`Callbacks` and override the ones you need). Kinds, in the order they happen:

    run_start  llm_start  llm_end(usage, duration)  tool_start(tool, arguments)  tool_end(duration, error)
    ...        run_end(usage: the whole run's, duration, error)

and `progress` whenever an agent reports how its own work goes (the Assistant: reading a file page by
page, indexing, searching): `data['progress']` is a `chatagent.rag.Progress`, `data['text']` a line for people.

Steps that are neither a model call, a tool call nor a run come as `step_start` and `step_end` (`data['step']`:
'task' for a crew's task, 'flow' and 'flow_step' for a flow and one of its methods, 'case' for an evaluation's
case; `data['name']`; the end's `data['start']` is its start event, its `duration` and `error` as for the others);
and as single events: `handoff` (`data['to']`: the agent the conversation goes to), `retrieval` (`data['query']`,
`data['sources']`: what the Assistant found for the question) and `memory` (`data['op']`: 'recall' or 'store',
`data['records']`), and `interrupt` when the run pauses for a person (`data['questions']`: what tools asked with
`chatagent.ask_user`; `data['approval']`: the calls waiting for approval). A step outside any run (a flow's, a case's) goes to the global callbacks, and the runs started
inside it see it as `STEP` (a context variable), so that a trace can place them under it.

All callbacks run in the thread iterating the run, also for tools that ran in parallel (their start
events come before the batch runs, their end events in call order). A callback that raises is logged
and does not stop the run. An Event is built only when some callback handles its kind (a function, or an
`on_<kind>` method overridden from `Callbacks`): with no callback set, none ever is.

`add_global_callback(cb)` makes `cb` see every run of every agent (what `chatagent.telemetry.instrument()` does);
`remove_global_callback(cb)` undoes it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger("chatagent.events")

RUN_START, RUN_END = "run_start", "run_end"
LLM_START, LLM_END = "llm_start", "llm_end"
TOOL_START, TOOL_END = "tool_start", "tool_end"
PROGRESS = "progress"
STEP_START, STEP_END = "step_start", "step_end"
HANDOFF, RETRIEVAL, MEMORY = "handoff", "retrieval", "memory"
INTERRUPT = "interrupt"  # the run pauses for a person: data 'questions' (chatagent.ask_user) and 'approval' (calls)
KINDS = (RUN_START, RUN_END, LLM_START, LLM_END, TOOL_START, TOOL_END, PROGRESS, STEP_START, STEP_END, HANDOFF,
         RETRIEVAL, MEMORY, INTERRUPT)  # fmt: skip


@dataclass(slots=True)
class Event:
    """Something that happened in a run. Fields that do not apply to the kind are None."""

    kind: str
    agent: str | None = None
    time: float = field(default_factory=time.time)
    duration: float | None = None  # seconds, on *_end events
    usage: Any = None  # llm_end: this call's Usage; run_end: the run's total
    tool: str | None = None
    arguments: str | None = None  # tool_start/tool_end: the arguments as the model wrote them
    call_id: str | None = None  # the function call's id, when the model gave one
    result: Any = None  # tool_end: the content sent back to the model
    error: str | None = None  # *_end: what went wrong (tool_end: the message the model got)
    # anything else: llm_start has 'messages' (count) and 'functions';
    # llm_end: 'model', 'model_type', 'input' (the messages sent), 'output' (the reply), 'functions' (the tools'
    # schemas sent, or None) and 'cfg' (the generation settings of the call)
    data: dict[str, Any] = field(default_factory=dict)
    run: Any = None  # the RunContext of the run (or of the sub-agent's part of it) this happened in


_alloc = object.__new__
_now = time.time


def make_event(
    kind: str, agent: str | None, run: Any, duration: float | None = None, usage: Any = None,
    error: str | None = None, data: dict[str, Any] | None = None, tool: str | None = None,
    arguments: str | None = None, call_id: str | None = None, result: Any = None,
) -> Event:  # fmt: skip
    """`Event(kind, agent, ..., run=run)` at half its cost (a class call with keywords costs more than the slots
    set here): the run builds several per model call while someone listens."""
    e = _alloc(Event)
    e.kind = kind
    e.agent = agent
    e.time = _now()
    e.duration = duration
    e.usage = usage
    e.tool = tool
    e.arguments = arguments
    e.call_id = call_id
    e.result = result
    e.error = error
    e.data = {} if data is None else data
    e.run = run
    return e


class Callbacks:
    """Base for callback objects: override the `on_<kind>` methods you need."""

    def on_run_start(self, event: Event) -> None: ...
    def on_run_end(self, event: Event) -> None: ...
    def on_llm_start(self, event: Event) -> None: ...
    def on_llm_end(self, event: Event) -> None: ...
    def on_tool_start(self, event: Event) -> None: ...
    def on_tool_end(self, event: Event) -> None: ...
    def on_progress(self, event: Event) -> None: ...
    def on_step_start(self, event: Event) -> None: ...
    def on_step_end(self, event: Event) -> None: ...
    def on_handoff(self, event: Event) -> None: ...
    def on_retrieval(self, event: Event) -> None: ...
    def on_memory(self, event: Event) -> None: ...
    def on_interrupt(self, event: Event) -> None: ...


Callback = Callable[[Event], Any] | Callbacks
Handler = Callable[[Event], Any]


def handlers(callbacks: Iterable[Callback], kind: str) -> list[Handler]:
    """What handles events of `kind` among `callbacks`: each object's `on_<kind>` method unless it is the one
    `Callbacks` has (which does nothing), and each plain function. Empty: build no Event of that kind. For the
    global callbacks themselves (a run with no callbacks of its own) the answer is the one worked out when they
    last changed; do not change the list."""
    known, table = _global_handlers
    if callbacks is known:
        found = table.get(kind)
        if found is not None:
            return found
    if isinstance(callbacks, tuple):  # a run asks this of its callbacks at each model and tool call: once is enough
        try:
            return _seen[callbacks][kind]  # (a tuple of callbacks hashes and compares its items by identity, in C)
        except KeyError:
            pass
        except TypeError:  # a callback that cannot be hashed: worked out each time
            return _handlers(callbacks, kind)
        if len(_seen) >= _SEEN_MAX:
            _seen.clear()
        found = _seen.setdefault(callbacks, {})[kind] = _handlers(callbacks, kind)
        return found
    return _handlers(callbacks, kind)


#: what handles each kind among the callbacks of recent runs, by their tuple
_seen: dict[tuple[Callback, ...], dict[str, list[Handler]]] = {}
_SEEN_MAX = 256


def _handlers(callbacks: Iterable[Callback], kind: str) -> list[Handler]:
    method, base = _METHODS.get(kind) or ("on_" + kind, None)
    found: list[Handler] = []
    for cb in callbacks:
        handler = getattr(cb, method, None)
        if handler is None:
            if callable(cb) and not isinstance(cb, Callbacks):
                found.append(cb)
        elif base is None or getattr(handler, "__func__", None) is not base:
            found.append(handler)
    return found


def deliver(found: list[Handler], event: Event) -> None:
    """Give `event` to each of `found` (see `handlers`); one that raises is logged with its traceback and skipped."""
    for handler in found:
        try:
            handler(event)
        except Exception:
            logger.exception("callback %r failed on %s", handler, event.kind)


def emit(callbacks: Iterable[Callback], event: Event) -> None:
    """Deliver `event` to each callback that handles its kind; one that raises is logged and skipped."""
    deliver(handlers(callbacks, event.kind), event)


#: each kind's method name, and Callbacks' own method of that name
_METHODS = {kind: ("on_" + kind, getattr(Callbacks, "on_" + kind)) for kind in KINDS}


#: callbacks every run gets besides its own (see add_global_callback)
global_callbacks: tuple[Callback, ...] = ()
#: global_callbacks, and what handles each kind among them (see handlers), worked out when they change
_global_handlers: tuple[tuple[Callback, ...], dict[str, list[Handler]]] = ((), {kind: [] for kind in KINDS})


def add_global_callback(callback: Callback) -> None:
    """Tell `callback` about every run of every agent from now on (runs already started are not affected)."""
    if callback not in global_callbacks:
        _set_global_callbacks((*global_callbacks, callback))


def remove_global_callback(callback: Callback) -> None:
    """Undo add_global_callback (a callback equal to `callback`, as `list.append` is to `list.append`, counts)."""
    _set_global_callbacks(tuple(cb for cb in global_callbacks if cb != callback))


def _set_global_callbacks(callbacks: tuple[Callback, ...]) -> None:
    global global_callbacks, _global_handlers
    _global_handlers = (callbacks, {kind: _handlers(callbacks, kind) for kind in KINDS})
    global_callbacks = callbacks


def with_global_callbacks(own: tuple[Callback, ...]) -> tuple[Callback, ...]:
    """A run's callbacks: its `own`, then the global ones not among them (a run may be given its caller's
    callbacks, which hold the global ones already: each callback is told once)."""
    return own + tuple(cb for cb in global_callbacks if cb not in own)


#: the step (a flow's method, an evaluation's case) whose code runs now, outside any run: its step_start Event
STEP: ContextVar[Event | None] = ContextVar("chatagent_step", default=None)


def start_step(
    callbacks: Iterable[Callback] | None, step: str, name: str, run: Any = None, data: dict[str, Any] | None = None
) -> Event | None:
    """Tell `callbacks` (the global ones when None) that a step of kind `step` starts; its start Event, to give to
    `end_step`, or None when no callback handles either end (nothing is built)."""
    given = global_callbacks if callbacks is None else callbacks
    found = handlers(given, STEP_START)
    if not found and not handlers(given, STEP_END):
        return None
    agent = getattr(run, "agent_name", None)
    event = make_event(STEP_START, agent, run, data={"step": step, "name": name, **(data or {})})
    deliver(found, event)
    return event


def end_step(
    callbacks: Iterable[Callback] | None, start: Event | None, error: str | None = None,
    data: dict[str, Any] | None = None,
) -> None:  # fmt: skip
    """Tell `callbacks` (as given to `start_step`) that the step `start` ended (`error`: why it failed; `data`: what
    it gave)."""
    if start is None:
        return
    found = handlers(global_callbacks if callbacks is None else callbacks, STEP_END)
    if found:
        more = {"step": start.data["step"], "name": start.data["name"], "start": start, **(data or {})}
        duration = _now() - start.time
        deliver(found, make_event(STEP_END, start.agent, start.run, duration, error=error, data=more))


def tell(callbacks: Iterable[Callback], kind: str, agent: str | None, run: Any, data: dict[str, Any]) -> None:
    """A single event of `kind` (handoff, retrieval, memory, interrupt) to the callbacks that handle it; built only if one does."""
    found = handlers(callbacks, kind)
    if found:
        deliver(found, make_event(kind, agent, run, data=data))


__all__ = [
    "STEP",
    "Callbacks",
    "Event",
    "KINDS",
    "add_global_callback",
    "deliver",
    "emit",
    "end_step",
    "handlers",
    "make_event",
    "remove_global_callback",
    "start_step",
    "tell",
    "with_global_callbacks",
]

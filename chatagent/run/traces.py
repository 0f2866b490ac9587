"""Recorded traces: every step of a run kept in the session store, to look at later (`chatagent traces`, the web
UI's trace page) and to evaluate with (`chatagent.evals`).

    CHATAGENT_TRACES=1 python my_app.py              # every run of the process (or CHATAGENT_TRACES=<store URL>)
    bot = FnCallAgent(..., traces=True)              # this agent's runs (or traces='sqlite:///traces.db')
    from chatagent.run import traces
    traces.record_traces()                           # from now on, every run; traces.stop_recording() ends it

A trace is a tree of steps: the run, its model calls (the messages, tools and settings each got, the reply, the
tokens, the cost), its tool calls (arguments, result, error), the runs inside it (sub-agents, agents as tools,
handed-over conversations), a crew's tasks, a flow's methods, what the Assistant retrieved (its sources) and
remembered, where the run paused for a person (`interrupt`: the questions asked, the calls waiting for approval),
each with its start, its duration and its error. The recorder is a listener of the run's events
(`chatagent.run.events`): it builds no second instrumentation, and a run nobody records builds nothing for it.

While the run goes, the recorder keeps references only; when the outermost run (or flow, or evaluation case) ends,
the trace is handed to one writer thread that turns it into JSON (each message once, however many calls got it)
and writes it in one statement (`chatagent.sessions.traces`), off the run's thread and event loop.
`flush_traces()` waits for the writes (the process does at exit).

Whose trace it is: the principal the run acts for (`RunContext.trust`, which a surface sets with `acting_as` and
every nested run inherits: `chatagent serve`'s API client, a job's submitter, a web UI visitor), else the user of
its session (`run(..., session=Session(..., user=...))`), else the local user; a run of a shared surface without a
principal belongs to no one's own (`NO_ONE`). Only that principal reads it (`TraceStore.list(owner)`,
`get(owner, id)`).
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from typing import Any

from chatagent.run.context import current_trust
from chatagent.run.events import STEP, Callbacks, Event, add_global_callback, remove_global_callback
from chatagent.run.trace_writer import flush_traces, trace_store, writer

logger = logging.getLogger("chatagent.traces")

ENV = "CHATAGENT_TRACES"
LOCAL_USER = "local"  # chatagent.sessions.DEFAULT_USER (not imported: sqlite on first use only)
NO_ONE = "shared:anonymous"  # the owner of a shared surface's runs that act for no principal (never the local user)
_ON = ("1", "true", "yes", "on")
_OFF = ("", "0", "false", "no", "off")


class Trace:
    """A trace being recorded: its steps (in the order they started, a step's id is its place from 1; a step's
    'parent' is the id of the step it is part of), the messages its model calls got and gave, the tool lists they
    were offered and their settings (each once: a model step holds their indexes). A model call or a tool call is a
    tuple (`trace_body` says which fields; a tuple of texts and numbers the garbage collector stops walking), any
    other step a dict; a model call's input is an earlier call's input (a tool loop's next call gets the same
    messages again, and more) and the indexes it adds, kept in `refs`. Made into JSON once it ends (`trace_body`:
    the totals of tokens and cost are its model calls')."""

    __slots__ = ("id", "owner", "kind", "name", "started", "steps", "title", "recorder", "done", "messages", "seen",
                 "functions", "cfgs", "refs")  # fmt: skip

    def __init__(self, recorder: TraceRecorder, owner: str, kind: str, name: str, started: float) -> None:
        self.id = uuid.uuid4().hex
        self.owner, self.kind, self.name, self.started = owner, kind, name, started
        self.steps: list[Any] = []
        self.title = ""
        self.recorder = recorder
        self.done: Any = None  # called with the trace's JSON dict when it is written (an evaluation's case)
        self.messages: list[Any] = []
        self.seen: dict[int, int] = {}  # id(message or tool list) -> its index in the list keeping it
        self.functions: list[Any] = []
        self.cfgs: list[Any] = []
        self.refs: list[int] = []  # the message indexes model calls added to an earlier call's input

    def add(self, step: dict[str, Any]) -> dict[str, Any]:
        steps = self.steps
        step["id"] = len(steps) + 1
        steps.append(step)
        return step


class _Recording:
    """A run as recorded: its trace, its step, the step its parts go under now (a crew's task while it runs), and
    its last model call's messages and that call's step id (the next call of a tool loop gets them again, and
    more)."""

    __slots__ = ("recorder", "trace", "step", "open", "given", "call")

    def __init__(self, recorder: TraceRecorder, trace: Trace, step: dict[str, Any]) -> None:
        self.recorder, self.trace, self.step, self.open = recorder, trace, step, step["id"]
        self.given: Any = ()
        self.call: int | None = None


class TraceRecorder(Callbacks):
    """Records runs as traces into `store` (a store URL or path; None: the default session store). With
    `everything`, every run it sees whose trace no other recorder keeps; else only the steps that ask for it (an
    evaluation's cases: `data['record']`) and what runs inside them."""

    def __init__(self, store: Any = None, *, everything: bool = True) -> None:
        self.store = store  # False: the traces are made (for `Trace.done`) and not written
        self.everything = everything

    # ---- runs -------------------------------------------------------------------------------------------

    def on_run_start(self, event: Event) -> None:
        ctx = event.run
        if ctx is None:
            return
        parent = ctx.parent
        if parent is not None:
            rec = parent.recording
            if rec is None or rec.recorder is not self:
                return  # not recorded, or another recorder's
            trace, under = rec.trace, rec.open
        else:
            outer = _open.get(id(STEP.get()))
            if outer is not None:
                if outer[0] is not self:
                    return  # inside a step another recorder keeps
                trace, under = outer[1], outer[2]["id"]
            elif not self.everything or _kept_by_another(self, ctx.callbacks):
                if not self.everything:  # nothing here asks for this run: leave it, and the runs inside it, alone
                    ctx.callbacks = tuple(cb for cb in ctx.callbacks if cb is not self)
                return
            else:
                trace, under = Trace(self, principal_of(ctx), "run", event.agent or "agent", event.time), None
        step = trace.add({"kind": "run", "name": event.agent or "agent", "parent": under, "start": event.time})
        ctx.recording = _Recording(self, trace, step)

    def on_run_end(self, event: Event) -> None:
        rec = _mine(self, event)
        if rec is None:
            return
        step = rec.step
        step["duration"] = event.duration
        if event.error:
            step["error"] = event.error
        usage = event.usage
        if usage is not None and event.run.parent is None:
            step["usage"] = {"input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens,
                             "cost": usage.cost}  # fmt: skip
        trace = rec.trace
        if step["id"] == 1:
            self._finish(trace, step["duration"], event.error)

    # ---- model and tool calls -------------------------------------------------------------------------------

    def on_llm_end(self, event: Event) -> None:
        rec = event.run.recording
        if rec is None or rec.recorder is not self:
            return
        data, usage, trace = event.data, event.usage, rec.trace
        given, before = data["input"], rec.given
        seen, stored, refs = trace.seen, trace.messages, trace.refs
        known = len(before)
        if known and given[:known] == before:  # a tool loop's next call gets the same messages again, and more
            base, new = rec.call, given[known:]  # (a list compares its items by identity first, in C)
        else:
            base, new = None, given
        first = len(refs)
        for m in new:  # each message stored once, by identity
            i = seen.get(id(m))
            if i is None:
                i = seen[id(m)] = len(stored)
                stored.append(m)
            refs.append(i)
        out = data["output"]
        out_first = len(stored)
        for m in out:  # a reply is new
            seen[id(m)] = len(stored)
            stored.append(m)
        fns, cfg, steps = data["functions"], data["cfg"], trace.steps
        if fns is not None:
            fns = seen.get(id(fns))
            if fns is None:
                fns = seen[id(data["functions"])] = len(trace.functions)
                trace.functions.append(data["functions"])
        if cfg:  # a tool loop's calls get equal settings (each its own dict): kept once while they repeat
            cfgs = trace.cfgs
            if not cfgs or cfgs[-1] != cfg:
                cfgs.append(cfg)
            cfg = len(cfgs) - 1
        else:
            cfg = None
        duration = event.duration or 0.0
        rec.given, rec.call = given, len(steps) + 1
        steps.append(("model", rec.open, int((event.time - duration - trace.started) * 1e6), int(duration * 1e6),
                      data["model"] or "model", data["model_type"], base, first, len(refs) - first, out_first,
                      len(out), usage.prompt_tokens, usage.completion_tokens, usage.cost, fns, cfg, event.error))  # fmt: skip
        if not known:
            trace.title = trace.title or _question(given)

    def on_tool_end(self, event: Event) -> None:
        rec = event.run.recording
        if rec is None or rec.recorder is not self:
            return
        duration, trace = event.duration or 0.0, rec.trace
        error = event.error
        trace.steps.append(("tool", rec.open, int((event.time - duration - trace.started) * 1e6),
                            int(duration * 1e6), event.tool or "tool", event.call_id, event.arguments, event.result,
                            event.data["cached"], error, event.data["error_kind"] if error else None))  # fmt: skip

    # ---- steps (tasks, flows, evaluation cases) and single events ----------------------------------------------

    def on_step_start(self, event: Event) -> None:
        data = dict(event.data)
        kind, name = data.pop("step"), data.pop("name")
        step = {"kind": kind, "name": name, "start": event.time, "data": data}
        if event.run is not None:  # a step of a run (a crew's task): what the run does next goes under it
            rec = _mine(self, event)
            if rec is None:
                return
            step["parent"], step["previous"] = rec.open, rec.open
            rec.trace.add(step)
            rec.open = step["id"]
            _open[id(event)] = (self, rec.trace, step)
            return
        asked, wanted = data.pop("record", False), data.pop("recorder", None)
        owner, done = data.pop("owner", None), data.pop("on_trace", None)
        outer = _open.get(id(STEP.get()))
        if outer is not None:
            if outer[0] is not self:
                return
            trace, step["parent"] = outer[1], outer[2]["id"]
        elif (wanted is self) if asked else self.everything:  # a step that asks is kept by the recorder it names
            trace, step["parent"] = Trace(self, owner or owner_of(current_trust()), kind, name, event.time), None
            trace.title = str(data.get("title") or "")
            trace.done = done
        else:
            return
        trace.add(step)
        _open[id(event)] = (self, trace, step)

    def on_step_end(self, event: Event) -> None:
        found = _open.get(id(event.data.get("start")))
        if found is None or found[0] is not self:
            return
        del _open[id(event.data.get("start"))]
        _, trace, step = found
        step["duration"] = event.duration
        if event.error:
            step["error"] = event.error
        more = {k: v for k, v in event.data.items() if k not in ("step", "name", "start")}
        if more:
            step["data"] = {**step.get("data", {}), **more}
        if "previous" in step:
            previous = step.pop("previous")
            rec = event.run.recording if event.run is not None else None
            if rec is not None:
                rec.open = previous
        elif step["id"] == 1:
            self._finish(trace, event.duration, event.error)

    def on_handoff(self, event: Event) -> None:
        self._point(event, "handoff", str(event.data.get("to")))

    def on_retrieval(self, event: Event) -> None:
        self._point(event, "retrieval", "retrieval")

    def on_memory(self, event: Event) -> None:
        self._point(event, "memory", f"memory {event.data.get('op')}")

    def on_interrupt(self, event: Event) -> None:
        self._point(event, "interrupt", "waiting for a person")

    def _point(self, event: Event, kind: str, name: str) -> None:
        rec = _mine(self, event)
        if rec is not None:
            rec.trace.add({"kind": kind, "name": name, "parent": rec.open, "start": event.time, "duration": 0.0,
                           "data": dict(event.data)})  # fmt: skip

    # ---- the end ------------------------------------------------------------------------------------------------

    def _finish(self, trace: Trace, duration: float | None, error: str | None) -> None:
        writer().put(trace, self.store, duration, error)


#: the steps being recorded, by id(their start event): (the recorder keeping it, its trace, the step)
_open: dict[int, tuple[TraceRecorder, Trace, dict[str, Any]]] = {}


def _mine(recorder: TraceRecorder, event: Event) -> _Recording | None:
    """The recording of the event's run if `recorder` keeps it."""
    ctx = event.run
    rec = getattr(ctx, "recording", None) if ctx is not None else None
    return rec if rec is not None and rec.recorder is recorder else None


def _kept_by_another(recorder: TraceRecorder, callbacks: tuple[Any, ...]) -> bool:
    """Whether a recorder before `recorder` in a run's callbacks keeps every run (the agent's own, say): one trace."""
    for cb in callbacks:
        if cb is recorder:
            return False
        if isinstance(cb, TraceRecorder) and cb.everything:
            return True
    return False


def _question(messages: Any) -> str:
    """The text of the last user message among `messages`: a trace's title."""
    for m in reversed(messages or ()):
        if getattr(m, "role", None) == "user":
            return " ".join(str(m.text).split())[:200]
    return ""


def principal_of(ctx: Any) -> str:
    """Whose a run is: the principal it acts for (`ctx.trust`), else its session's user, else `owner_of`."""
    trust = ctx.trust
    if trust.principal is None and not trust.shared:
        while ctx.parent is not None:
            ctx = ctx.parent
        session = ctx.session
        if session is not None and getattr(session, "user", None):
            return str(session.user)
    return owner_of(trust)


def owner_of(trust: Any) -> str:
    """Whose the traces of runs under `trust` are (`chatagent.run.trust.Trust`): its principal's; on a shared surface
    without one, `NO_ONE`'s; else the local user's."""
    return trust.principal or (NO_ONE if trust.shared else LOCAL_USER)


# ---- turning it on -------------------------------------------------------------------------------------------

_everything: TraceRecorder | None = None
_scoped: dict[Any, tuple[TraceRecorder, int]] = {}
_lock = threading.Lock()


def record_traces(store: Any = None) -> TraceRecorder:
    """Record every run of every agent from now on, into `store` (a URL or path; None: the default session store).
    Calling it again replaces the earlier setting. Returns the recorder (a global callback)."""
    global _everything
    with _lock:
        if _everything is not None:
            remove_global_callback(_everything)
        _everything = TraceRecorder(store)
        add_global_callback(_everything)
        return _everything


def stop_recording() -> None:
    """Stop `record_traces` (runs already started finish their traces)."""
    global _everything
    with _lock:
        if _everything is not None:
            remove_global_callback(_everything)
            _everything = None


def recorders_for(value: Any) -> tuple[TraceRecorder, ...]:
    """The recorder of an agent's `traces=` option, in a tuple (empty for False or None): True records into the
    default session store, a store URL or path into that store; a TraceRecorder is itself."""
    if value is None or value is False:
        return ()
    if isinstance(value, TraceRecorder):
        return (value,)
    if value is True:
        return (_shared(None),)
    if isinstance(value, (str, os.PathLike)):
        return (_shared(os.fspath(value)),)
    raise TypeError(f"traces must be True, False, a store URL or a TraceRecorder, got {type(value).__name__}")


_agents: dict[Any, TraceRecorder] = {}


def _shared(store: str | None) -> TraceRecorder:
    with _lock:
        found = _agents.get(store)
        if found is None:
            found = _agents[store] = TraceRecorder(store)
        return found


def scoped(store: Any = None) -> TraceRecorder:
    """A global recorder of the steps that ask for it (`data['record']`) into `store`, installed until `unscoped`
    is called as often (an evaluation installs it while it runs)."""
    key = store if isinstance(store, (str, type(None))) else id(store)
    with _lock:
        found, n = _scoped.get(key, (None, 0))
        if found is None:
            found = TraceRecorder(store, everything=False)
            add_global_callback(found)
        _scoped[key] = (found, n + 1)
        return found


def unscoped(recorder: TraceRecorder) -> None:
    with _lock:
        for key, (found, n) in list(_scoped.items()):
            if found is recorder:
                if n > 1:
                    _scoped[key] = (found, n - 1)
                else:
                    del _scoped[key]
                    remove_global_callback(found)
                return


def from_environment() -> None:
    """`CHATAGENT_TRACES`: 1 (or true, yes, on) records every run into the default store, a store URL or path into
    that store, 0 (or empty, false, no, off) nothing."""
    value = os.environ.get(ENV, "").strip()
    if value.lower() in _OFF:
        return
    record_traces(None if value.lower() in _ON else value)


__all__ = [
    "ENV",
    "NO_ONE",
    "Trace",
    "TraceRecorder",
    "flush_traces",
    "owner_of",
    "principal_of",
    "record_traces",
    "recorders_for",
    "scoped",
    "stop_recording",
    "trace_store",
    "unscoped",
]

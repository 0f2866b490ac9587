"""Flow: a process of methods that start each other, whose state is persisted after every method.

    class Pipeline(Flow[Counts]):               # or Flow (state: a dict); Counts: a FlowState (pydantic, with `id`)
        @start()
        def fetch(self): return load()
        @listen(fetch)                          # given fetch's output
        def work(self, fetched): self.state.size = len(fetched); return fetched
        @router(work)
        def decide(self, worked): return "big" if self.state.size > 10 else "small"
        @listen("big")
        def big(self): ...

    result = Pipeline().kickoff(inputs={'size': 0})     # the output of the last method that ran
    Pipeline.resume(flow_id)                            # after a crash: on from the last completed method

Start methods run first; when a method completes, the routers it triggers run one after another (each router's
label is a trigger too), then the listeners it triggers run concurrently (`async def` methods on the event loop,
others in worker threads). After every method the flow's record (its state, the methods still to run, the
partial `and_` conditions) is written to the session store (`store=`: a URL or path as for sessions; SQLite by
default), so a flow killed at any point resumes with `MyFlow.resume(flow_id)`: the methods that completed are
not run again, those that were running start over. A method that raises stops the flow (the error propagates);
`resume` tries it again.

`self.ask(question)` in a method pauses the flow for a person: `kickoff` returns a `FlowPaused` (its `flow_id`
and `question`), and `MyFlow.resume(flow_id, feedback=...)`, in this process or another, runs that method again
with `ask` returning the feedback (code before the `ask` runs again: keep it free of side effects, or put them
in an earlier method). Outputs and state are kept as JSON (pydantic models as their dump, other objects as text).

A flow belongs to whom its run acts for (`chatagent.run.trust`: a client of `chatagent serve`, a web UI visitor;
the machine's own user in your code): its record names that owner, and only a run acting for the same owner resumes
it (your own code, outside any surface, resumes any). `kickoff` starts a new flow: given the `id` of a stored one it
refuses (going on is `resume`'s job, which checks the owner). A stored record's steps must be the flow's own: a
pending or asked method that is not one of its start, listen or router methods is refused, never run.

`flow.history()` lists the flow's checkpoints (its record after each step), `flow.fork(checkpoint, state=...)` starts
a new flow run from one, its state edited, the original intact (`chatagent.flows.history`).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Coroutine
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar, get_args, get_origin

from chatagent.flows.conditions import ROLE, WHEN, Condition
from chatagent.flows.history import FlowCheckpoint, branch_record, checkpoints
from chatagent.flows.plot import write_plot
from chatagent.run.context import current_trust
from chatagent.run.events import STEP, end_step, start_step
from chatagent.sessions.flow_checkpoints import DEFAULT_KEEP
from chatagent.sessions.flow_states import FlowStates
from chatagent.tools.base import is_pydantic_model
from chatagent.utils.kwargs import reject_unknown

logger = logging.getLogger("chatagent.flow")

StateT = TypeVar("StateT")
FlowT = TypeVar("FlowT", bound="Flow[Any]")
_RUNNING: ContextVar[tuple[Any, dict[str, Any]] | None] = ContextVar("chatagent_flow_method", default=None)
RUNNING, PAUSED, DONE, FAILED = "running", "paused", "done", "failed"


@dataclass
class FlowPaused:
    """What `kickoff`/`resume` return when a method asked a person (`Flow.ask`): resume with
    `MyFlow.resume(flow_id, feedback=...)`."""

    flow_id: str
    question: str
    method: str


class _Asked(BaseException):  # noqa: N818 (not an error: the flow waits for a person; a BaseException so that a method's `except Exception` lets it through)
    def __init__(self, question: str) -> None:
        super().__init__(question)
        self.question = question


class Flow(Generic[StateT]):
    """A flow (see the module docstring). Args: `store`, where its record is kept (a URL or a path as for
    sessions; default: the class's `store`, else the default session store); `persist=False` keeps nothing."""

    initial_state: ClassVar[Any] = None  # a FlowState subclass or a dict; else taken from Flow[State]
    store: ClassVar[Any] = None
    history_limit: ClassVar[int] = DEFAULT_KEEP  # the checkpoints each run keeps, its newest (0: none)
    _starts: ClassVar[list[str]] = []
    _triggered: ClassVar[dict[str, Condition]] = {}  # method -> the condition that runs it (listeners, routers)
    _routers: ClassVar[frozenset[str]] = frozenset()
    _takes_input: ClassVar[dict[str, bool]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        starts, triggered, routers, takes = [], {}, set(), {}
        for name in dir(cls):
            fn = inspect.getattr_static(cls, name, None)
            role = getattr(fn, ROLE, None)
            if role is None or not callable(fn):
                continue
            when = getattr(fn, WHEN, None)
            if role == "start":
                starts.append(name)
            if when is not None:
                if name in when.names():
                    raise TypeError(f"{cls.__name__}.{name} listens to itself (a label must not be a method's name)")
                triggered[name] = when
            if role == "router":
                routers.add(name)
            params = [p for p in inspect.signature(fn).parameters.values() if p.kind in (p.POSITIONAL_ONLY,
                      p.POSITIONAL_OR_KEYWORD)]  # fmt: skip
            takes[name] = len(params) > 1
        cls._starts, cls._triggered, cls._routers, cls._takes_input = starts, triggered, frozenset(routers), takes
        if cls.initial_state is None:
            for base in getattr(cls, "__orig_bases__", ()):
                if get_origin(base) is not None and issubclass(get_origin(base), Flow) and get_args(base):
                    cls.initial_state = get_args(base)[0]

    def __init__(self, *, store: Any = None, persist: bool = True, **kwargs: Any) -> None:
        reject_unknown(type(self), kwargs)
        if not self._starts:
            raise TypeError(f"{type(self).__name__} has no @start() method")
        self.state: StateT = _new_state(self.initial_state)
        self.persist = persist
        self._store_arg = store if store is not None else type(self).store
        self._states: Any = None
        self._record: dict[str, Any] = new_record()
        self._asks: dict[int, int] = {}
        self._paused: tuple[dict[str, Any], str] | None = None
        self._active = 0

    @property
    def id(self) -> str:
        """The id of this flow run (the state's `id`)."""
        state: Any = self.state
        return str(state["id"] if isinstance(state, dict) else state.id)

    # ---- running ------------------------------------------------------------------------------------------------

    def kickoff(self, inputs: dict[str, Any] | None = None) -> Any:
        """Run the flow: its last method's output, or a FlowPaused. `inputs` set state fields first (an `id` names
        the new flow; the id of a stored flow is refused: go on with it with `resume`)."""
        return run_sync(self.akickoff(inputs), "kickoff")

    async def akickoff(self, inputs: dict[str, Any] | None = None) -> Any:
        """`kickoff()` on the running asyncio event loop."""
        inputs = dict(inputs or {})
        if "id" in inputs and self.persist and self._flow_states().load(str(inputs["id"])) is not None:
            raise ValueError(
                f"a flow {str(inputs['id'])[:80]!r} is stored already: kickoff starts a new flow (give no id, or a new "
                f"one); go on with a stored flow with {type(self).__name__}.resume(flow_id)"
            )
        self._set_inputs(inputs)
        self._record = new_record()
        self._record["owner"] = flow_owner()
        batch = [self._invocation(name, None) for name in self._starts]
        self._save(RUNNING, step=True)
        return await self._go(batch)

    @classmethod
    def resume(cls, flow_id: str, feedback: str | None = None, *, store: Any = None) -> Any:
        """Go on with a stored flow from its last completed method; `feedback` answers the question it paused on."""
        return run_sync(cls.aresume(flow_id, feedback, store=store), "resume")

    @classmethod
    async def aresume(cls, flow_id: str, feedback: str | None = None, *, store: Any = None) -> Any:
        """`resume()` on the running asyncio event loop."""
        flow = cls(store=store)
        return await flow._continue(flow._restore(flow_id), feedback)

    async def _continue(self, status: str, feedback: str | None) -> Any:
        """Go on with the restored flow (its `status`), `feedback` answering the question it paused on."""
        asked = self._record.get("asked")
        if feedback is not None:
            if asked is None:
                raise ValueError(f"flow {self.id!r} waits for no feedback (it is {status})")
            self._record["answers"].setdefault(str(asked["id"]), []).append(feedback)
            self._record["asked"] = None
        elif asked is not None:
            raise ValueError(f"flow {self.id!r} waits for a person: {asked['question']!r}; resume it with feedback=")
        if status == DONE:
            return self._record["output"]
        return await self._go([dict(i) for i in self._record["pending"]])

    def ask(self, question: str) -> str:
        """Ask a person (from inside a method): the flow pauses and `resume(flow_id, feedback=...)` goes on with the
        feedback as what this returns."""
        running = _RUNNING.get()
        if running is None or running[0] is not self:
            raise RuntimeError("ask() is for a flow's methods, while the flow runs them")
        if not self.persist:
            raise RuntimeError("ask() pauses the flow until resume(): it needs the flow persisted (persist=True)")
        inv = running[1]
        n = self._asks.get(inv["id"], 0)
        answers = self._record["answers"].get(str(inv["id"]), [])
        if n < len(answers):
            self._asks[inv["id"]] = n + 1
            return answers[n]
        raise _Asked(str(question))

    # ---- history ------------------------------------------------------------------------------------------------

    def history(self, flow_id: str | None = None) -> list[FlowCheckpoint]:
        """The checkpoints of this flow run (or the stored `flow_id`), oldest first: its record after each step."""
        flow_id = self.id if flow_id is None else flow_id
        if not self.persist or self._reachable(flow_id) is None:
            return []
        return checkpoints(self._flow_states(), flow_id, self.history_limit)

    def fork(self: FlowT, checkpoint: str, state: Any = None, *, flow_id: str | None = None) -> FlowT:
        """A new stored flow run at `checkpoint` (an id from `history()`) of this flow (or `flow_id`), `state`'s
        fields set over the checkpoint's; this flow is left as it is. Run it on with `resume(branch.id)`."""
        flow_id = self.id if flow_id is None else flow_id
        found = self._reachable(flow_id)
        if found is None or found[0] != _class_key(type(self)):
            raise ValueError(f"no {type(self).__name__} {flow_id[:80]!r} is stored in {self._flow_states().store.url}")
        record = branch_record(self._flow_states(), flow_id, checkpoint, state, self.history_limit)
        branch = type(self)(store=self._store_arg)
        kept = record["state"]
        branch.state = kept if isinstance(branch.state, dict) else type(branch.state).model_validate(kept)  # type: ignore[assignment]
        branch._record = {**record, "owner": flow_owner()}
        branch._save(RUNNING, checkpoint=True)
        return branch

    def replay(self: FlowT, checkpoint: str, state: Any = None, *, flow_id: str | None = None) -> tuple[FlowT, Any]:
        """`fork`, then the branch run on: (the branch, its last method's output or a FlowPaused)."""
        return run_sync(self.areplay(checkpoint, state, flow_id=flow_id), "replay")

    async def areplay(
        self: FlowT, checkpoint: str, state: Any = None, *, flow_id: str | None = None
    ) -> tuple[FlowT, Any]:
        """`replay()` on the running asyncio event loop."""
        branch = self.fork(checkpoint, state, flow_id=flow_id)
        return branch, await branch._go([dict(i) for i in branch._record["pending"]])

    async def _go(self, batch: list[dict[str, Any]]) -> Any:
        self._paused = None
        step = start_step(None, "flow", type(self).__name__, data={"flow_id": self.id})  # for traces (run.events)
        token = STEP.set(step) if step is not None else None
        try:
            await self._wave(batch)
        except BaseException as e:
            if not isinstance(e, (asyncio.CancelledError, KeyboardInterrupt)):
                self._record["error"] = f"{type(e).__name__}: {e}"
            self._save(FAILED)
            end_step(None, step, f"{type(e).__name__}: {e}")
            raise
        finally:
            if token is not None:
                STEP.reset(token)
        paused = self._pause()
        if paused is not None:
            inv, question = paused
            self._record["asked"] = {"id": inv["id"], "method": inv["method"], "question": question}
            self._save(PAUSED)
            end_step(None, step, None, {"status": PAUSED, "question": question})
            return FlowPaused(self.id, question, inv["method"])
        self._save(DONE)
        end_step(None, step, None, {"status": DONE})
        return self._record["output"]

    def _pause(self) -> tuple[dict[str, Any], str] | None:
        """The invocation that asked a person and its question, if one did."""
        return self._paused

    async def _wave(self, batch: list[dict[str, Any]]) -> None:
        """Run invocations and what they trigger: the routers one after another, then the rest concurrently, each
        branch going on as soon as its method completes. A chain of methods is a loop here, not a recursion."""
        while batch:
            triggered: list[dict[str, Any]] = []
            for inv in [i for i in batch if i["method"] in self._routers]:
                triggered += await self._invoke(inv, False)
            rest = [i for i in batch if i["method"] not in self._routers]
            if len(rest) == 1:
                triggered += await self._invoke(rest[0], self._active > 0)
            elif rest:
                await asyncio.gather(*(self._branch(i) for i in rest))
            batch = triggered

    async def _branch(self, inv: dict[str, Any]) -> None:
        """One of several concurrent invocations (in a worker thread if not async), then what it triggers."""
        await self._wave(await self._invoke(inv, True))

    async def _invoke(self, inv: dict[str, Any], in_thread: bool) -> list[dict[str, Any]]:
        """Run one method; the invocations its completion triggers (none if the flow paused)."""
        if self._paused is not None:
            return []  # stays pending: it runs when the flow is resumed
        name = inv["method"]
        fn: Callable[..., Any] = getattr(self, name)
        args = (inv.get("arg"),) if self._takes_input.get(name) else ()
        self._asks[inv["id"]] = 0
        step = start_step(None, "flow_step", name, data={"flow_id": self.id})  # the runs inside go under it
        token = _RUNNING.set((self, inv))
        step_token = STEP.set(step) if step is not None else None
        self._active += 1
        try:
            if inspect.iscoroutinefunction(fn):
                out = await fn(*args)
            elif in_thread:
                out = await asyncio.to_thread(fn, *args)
            else:
                out = fn(*args)
        except _Asked as asked:
            if self._paused is None:
                self._paused = (inv, asked.question)
            end_step(None, step, None, {"asked": asked.question})
            return []
        except BaseException as e:
            end_step(None, step, f"{type(e).__name__}: {e}")
            raise
        finally:
            self._active -= 1
            if step_token is not None:
                STEP.reset(step_token)
            _RUNNING.reset(token)
        end_step(None, step, None, {"output": out})
        return self._completed(inv, out)

    def _completed(self, inv: dict[str, Any], out: Any) -> list[dict[str, Any]]:
        """Record a method's completion and save; the invocations it triggers."""
        record = self._record
        record["pending"] = [i for i in record["pending"] if i["id"] != inv["id"]]
        record["answers"].pop(str(inv["id"]), None)
        record["completed"].append(inv["method"])
        record["output"] = out
        triggers = {inv["method"]}
        fired = record.setdefault("fired_or", [])
        if inv["method"] in self._routers and out is not None:
            triggers.add(str(out))
            # a router's label re-arms the or_() listeners that name it (so a loop through the router runs them again)
            fired[:] = [n for n in fired if str(out) not in self._triggered[n].names()]
        new = []
        for name, condition in self._triggered.items():
            hit = triggers & condition.names()
            if not hit:
                continue
            once = condition.kind == "or" and len(condition.items) > 1
            if once and name in fired:
                continue  # or_(a, b) runs when the first of them happens, not once for each
            if once:
                fired.append(name)
            seen = set(record["seen"].get(name, ())) | hit
            if condition.met(seen):
                record["seen"].pop(name, None)
                given = self._routed(inv, out) if inv["method"] in self._routers and inv["method"] not in hit else out
                new.append(self._invocation(name, given))
            else:
                record["seen"][name] = sorted(seen)
        self._save(RUNNING, step=True)
        return new

    def _routed(self, inv: dict[str, Any], out: Any) -> Any:
        """What the listeners of a router's label are given: the router's own input."""
        return inv.get("arg")

    def _running_invocation(self) -> dict[str, Any]:
        """The invocation of this flow's method running now (for code that wraps a method)."""
        running = _RUNNING.get()
        if running is None or running[0] is not self:
            raise RuntimeError("this is for a flow's methods, while the flow runs them")
        return running[1]

    def _invocation(self, name: str, arg: Any) -> dict[str, Any]:
        record = self._record
        inv = {"id": record["next_id"], "method": name, "arg": arg}
        record["next_id"] += 1
        record["pending"].append(inv)
        return inv

    # ---- state and its record -------------------------------------------------------------------------------------

    def _set_inputs(self, inputs: dict[str, Any]) -> None:
        if not inputs:
            return
        state: Any = self.state
        if isinstance(state, dict):
            state.update(inputs)
        else:
            self.state = type(state).model_validate({**state.model_dump(), **inputs})

    def _flow_states(self) -> Any:
        if self._states is None:
            self._states = FlowStates(self._store_arg)
        return self._states

    def _save(self, status: str, step: bool = False, checkpoint: bool = False) -> None:
        """Persist the record: a change of `status` (with `checkpoint`, kept as a checkpoint too), or (`step`) the
        record of the running flow as it starts and after each method, written as a turn's checkpoints are (see
        `chatagent.sessions.flow_states`)."""
        if not self.persist:
            return
        state: Any = self.state
        self._record["state"] = dict(state) if isinstance(state, dict) else state.model_dump(mode="json")
        keep = self.history_limit
        if step:
            self._flow_states().step(self.id, _class_key(type(self)), self._record, keep=keep)
        else:
            self._flow_states().save(self.id, _class_key(type(self)), status, self._record, keep=keep,
                                     checkpoint=checkpoint)  # fmt: skip

    def _reachable(self, flow_id: str) -> tuple[str, str, dict[str, Any]] | None:
        """The stored flow `flow_id` (class, status, record) if the running run acts for its owner, else None (as
        if there were none: its id tells nothing)."""
        found = self._flow_states().load(flow_id)
        trust = current_trust()
        if (
            found is not None
            and (trust.shared or trust.principal is not None)
            and found[2].get("owner") != flow_owner()
        ):
            return None
        return found

    def _restore(self, flow_id: str) -> str:
        """Load a stored flow's record and state, when the running run acts for its owner and its steps are the
        flow's own; its status."""
        found = self._reachable(flow_id)
        if found is None:
            raise ValueError(f"no flow {flow_id[:80]!r} is stored in {self._flow_states().store.url}")
        flow_class, status, record = found
        if flow_class != _class_key(type(self)):
            raise ValueError(f"flow {flow_id!r} is a {flow_class}, not a {_class_key(type(self))}")
        steps = {*self._starts, *self._triggered}
        asked = record.get("asked")
        named = [i.get("method") for i in record.get("pending") or ()] + ([asked.get("method")] if asked else [])
        strange = [str(m)[:80] for m in named if m not in steps]
        if strange:
            raise ValueError(f"flow {flow_id!r}: its stored record names {', '.join(strange)}, not a step of the flow")
        self._record = record
        state = record["state"]
        self.state = state if isinstance(self.state, dict) else type(self.state).model_validate(state)  # type: ignore[assignment]
        return status

    def plot(self, filename: str = "flow_plot") -> str:
        """Write a diagram of the flow to `filename` (.html, or .svg; .html is added to a name without either),
        drawn here without any network; returns the path written."""
        return write_plot(type(self), filename)


def flow_owner() -> str | None:
    """Whom a flow started now belongs to: the principal the running run acts for; on a shared surface without one
    (a server without keys) every such client (their flows reachable by id only); None: the machine's own user."""
    trust = current_trust()
    if trust.principal is not None:
        return trust.principal
    return "shared:anonymous" if trust.shared else None


def new_record() -> dict[str, Any]:
    return {"pending": [], "next_id": 0, "seen": {}, "answers": {}, "asked": None, "completed": [], "output": None}


def _new_state(initial: Any) -> Any:
    import uuid

    if initial is None or initial is dict:
        return {"id": uuid.uuid4().hex}
    if isinstance(initial, dict):
        state = {k: v for k, v in initial.items()}
        state.setdefault("id", uuid.uuid4().hex)
        return state
    if is_pydantic_model(initial):
        if "id" not in initial.model_fields:
            raise TypeError(
                f"a flow's state model needs an `id` field: subclass chatagent.FlowState ({initial.__name__})"
            )
        return initial()
    raise TypeError(f"a flow's state is a pydantic model class with an `id` or a dict, got {initial!r:.80}")


def _class_key(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def run_sync(coro: Coroutine[Any, Any, Any], what: str) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    coro.close()
    raise RuntimeError(f"{what}() was called on a running event loop: await a{what}() there instead")


__all__ = ["Flow", "FlowPaused"]

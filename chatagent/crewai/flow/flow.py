"""CrewAI's `Flow`: chatagent's Flow (`chatagent.flows`) as CrewAI runs one.

    class Counter(Flow[CounterState]):          # CounterState: any pydantic model (an `id` is added to it)
        @start()
        def first(self): self.state.count += 1
        @listen(first)
        def second(self): return self.state.count

    Counter().kickoff(inputs={"count": 1})       # the last method's output
    @persist()                                   # on the class (or a method): the state is kept after each method,
    class Kept(Flow[State]): ...                 # and kickoff(inputs={"id": ...}) starts again from that state

What differs from chatagent's Flow, as CrewAI has it: nothing is persisted unless `@persist` says so; a state model
without an `id` gets one; `kickoff(inputs={"id": ...})` of a persisted flow restores that state and runs the flow
from its start methods again (chatagent's `Flow.resume` goes on from the last completed method instead); keyword
arguments of the constructor set state fields; the flow and each method emit CrewAI's events.
"""

from __future__ import annotations

import functools
import uuid
from typing import Any, ClassVar, TypeVar

from pydantic import Field, create_model

from chatagent.crewai.events import base_events as ev
from chatagent.crewai.events.bus import crewai_event_bus
from chatagent.crewai.flow.async_feedback import HumanFeedbackPending, PendingFeedbackContext
from chatagent.crewai.flow.human_feedback import CONFIG, HISTORY, RESULT_FIELDS, REVIEWS, HumanFeedbackResult
from chatagent.crewai.flow.persistence import PERSIST, FlowPersistence, SQLiteFlowPersistence
from chatagent.crewai.memory.unified_memory import Memory
from chatagent.flows.conditions import and_, listen, or_, router, start
from chatagent.flows.flow import PAUSED, FlowPaused, flow_owner, new_record, run_sync
from chatagent.flows.flow import Flow as ChatFlow
from chatagent.tools.base import is_pydantic_model

StateT = TypeVar("StateT")


class Flow(ChatFlow[StateT]):
    """A CrewAI flow (see the module docstring)."""

    memory: Any = None  # a Memory for remember()/recall() (made when first used, if none is given)
    _persistence: ClassVar[FlowPersistence | None] = None  # a method's @persist (the class's is read when made)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        if "initial_state" not in vars(cls) and isinstance(cls.initial_state, TypeVar):
            cls.initial_state = None  # inherited from Flow[StateT] itself: the subclass's own Flow[State] says it
        super().__init_subclass__(**kwargs)
        state = cls.initial_state
        if isinstance(state, TypeVar):
            state = cls.initial_state = None
        if is_pydantic_model(state) and "id" not in state.model_fields:
            cls.initial_state = create_model(state.__name__, __base__=state, __module__=state.__module__,
                                             id=(str, Field(default_factory=lambda: str(uuid.uuid4()))))  # fmt: skip
        methods = [getattr(cls, n) for n in dir(cls) if getattr(getattr(cls, n, None), PERSIST, None) is not None]
        cls._persistence = getattr(methods[0], PERSIST) if methods else None  # @persist on a method
        configs = {n: getattr(getattr(cls, n), CONFIG, None) for n in cls._triggered.keys() | set(cls._starts)}
        emits = {n for n, config in configs.items() if config is not None and config.emit}
        cls._routers = cls._routers | emits  # a @human_feedback(emit=...) method's outcome is a router's label

    def __init__(self, persistence: FlowPersistence | None = None, *, store: Any = None, **kwargs: Any) -> None:
        for key in ("tracing", "suppress_flow_events", "max_method_calls", "stream"):
            kwargs.pop(key, None)  # CrewAI's settings of its own runtime
        fields = kwargs
        chosen = persistence or getattr(type(self), PERSIST, None) or type(self)._persistence  # @persist on the class
        # kept only with @persist, and once it waits for a person's feedback (in the default store without it)
        kept = FlowPersistence(store) if store is not None else chosen  # store=: chatagent's (the workers give it)
        super().__init__(store=(kept or FlowPersistence()).store, persist=kept is not None)
        if fields:
            self._set_inputs(fields)
        self.human_feedback_history: list[HumanFeedbackResult] = []
        self._given: dict[str, HumanFeedbackResult] = {}  # invocation id -> the result its outcome's listeners get
        self._pending_feedback_context: PendingFeedbackContext | None = None

    # ---- running ------------------------------------------------------------------------------------------

    async def akickoff(self, inputs: dict[str, Any] | None = None) -> Any:
        inputs = dict(inputs or {})
        if "id" in inputs and self.persist:
            found = self._flow_states().load(str(inputs["id"]))
            if found is not None:  # CrewAI: the stored state, then the flow from its start again
                saved = found[2]["state"]
                self.state = saved if isinstance(self.state, dict) else type(self.state).model_validate(saved)  # type: ignore[assignment]
                inputs.pop("id")
        name = type(self).__name__
        crewai_event_bus.emit(self, ev.FlowStartedEvent(flow_name=name, inputs=inputs or None))
        if inputs:
            self._set_inputs(inputs)
        self._record = new_record()
        self._record["owner"] = flow_owner()  # whom the run acts for (chatagent.run.trust)
        batch = [self._invocation(method, None) for method in self._starts]
        self._save("running")
        return self._ended(await self._go(batch))

    kickoff_async = akickoff

    # ---- paused for a person's feedback ----------------------------------------------------------------------

    @classmethod
    def from_pending(cls, flow_id: str, persistence: FlowPersistence | None = None, **kwargs: Any) -> Any:
        """The flow `flow_id`, stored while it waits for feedback, ready for `resume(feedback)`; only for the
        owner its run acted for (another's is not found)."""
        flow = cls(persistence=persistence, **kwargs)
        status = flow._restore(flow_id)
        asked = flow._record.get("asked")
        kept = (flow._record.get(REVIEWS) or {}).get(str(asked["id"])) if asked else None
        if status != PAUSED or kept is None:
            raise ValueError(f"No pending feedback found for flow_id: {flow_id[:80]}")
        flow._pending_feedback_context = PendingFeedbackContext.from_dict(kept["context"])
        return flow

    def _restore(self, flow_id: str) -> str:
        status = super()._restore(flow_id)
        self.persist = self.persist or status == PAUSED  # it was kept while it waited: it is kept to its end
        self.human_feedback_history = [HumanFeedbackResult.from_record(r) for r in self._record.get(HISTORY) or ()]
        for inv in self._record.get("pending") or ():  # an outcome's listener given the result, kept as JSON
            if isinstance(inv.get("arg"), dict) and set(inv["arg"]) == RESULT_FIELDS:
                inv["arg"] = HumanFeedbackResult.from_record(inv["arg"])
        return status

    @property
    def pending_feedback(self) -> PendingFeedbackContext | None:
        """What this flow (from `from_pending`) waits for feedback on."""
        return self._pending_feedback_context

    @property
    def last_human_feedback(self) -> HumanFeedbackResult | None:
        return self.human_feedback_history[-1] if self.human_feedback_history else None

    def _resume_pending(self, feedback: str = "") -> Any:
        """Go on with a flow from `from_pending` with the person's `feedback`: the flow's output, or a
        HumanFeedbackPending if it waits again."""
        return run_sync(self.resume_async(feedback), "resume")

    async def resume_async(self, feedback: str = "") -> Any:
        """`resume(feedback)` on the running event loop."""
        if self._pending_feedback_context is None:
            raise ValueError("No pending feedback context: use from_pending() to restore a paused flow")
        self._pending_feedback_context = None
        crewai_event_bus.emit(self, ev.FlowStartedEvent(flow_name=type(self).__name__, inputs=None))
        return self._ended(await self._continue(PAUSED, str(feedback)))

    def _ended(self, result: Any) -> Any:
        """What kickoff or resume returns: the result, or the HumanFeedbackPending of a flow that paused on one."""
        name = type(self).__name__
        if isinstance(result, FlowPaused):
            kept = (self._record.get(REVIEWS) or {}).get(str((self._record.get("asked") or {}).get("id")))
            if kept is not None:
                pending = HumanFeedbackPending(PendingFeedbackContext.from_dict(kept["context"]), kept["callback_info"])
                crewai_event_bus.emit(self, ev.FlowPausedEvent(flow_name=name, flow_id=self.id,
                                                               method_name=result.method, message=result.question))  # fmt: skip
                return pending
            return result
        crewai_event_bus.emit(self, ev.FlowFinishedEvent(flow_name=name, result=result, state=self.state))
        return result

    def _routed(self, inv: dict[str, Any], out: Any) -> Any:
        given = self._given.get(str(inv["id"]))
        return given if given is not None else super()._routed(inv, out)

    def _completed(self, inv: dict[str, Any], out: Any) -> list[dict[str, Any]]:
        triggered = super()._completed(inv, out)
        given = self._given.pop(str(inv["id"]), None)
        if given is not None:
            self._record["output"] = given.output  # the flow's result is the method's output, not its outcome
        return triggered

    async def _invoke(self, inv: dict[str, Any], in_thread: bool) -> list[dict[str, Any]]:
        name, flow_name = inv["method"], type(self).__name__
        crewai_event_bus.emit(self, ev.MethodExecutionStartedEvent(flow_name=flow_name, method_name=name,
                                                                   state=self.state))  # fmt: skip
        try:
            triggered = await super()._invoke(inv, in_thread)
        except Exception as e:
            crewai_event_bus.emit(self, ev.MethodExecutionFailedEvent(flow_name=flow_name, method_name=name, error=e))
            raise
        crewai_event_bus.emit(self, ev.MethodExecutionFinishedEvent(
            flow_name=flow_name, method_name=name, result=self._record.get("output"), state=self.state))  # fmt: skip
        return triggered

    # ---- memory ---------------------------------------------------------------------------------------------

    def remember(self, content: str, **kwargs: Any) -> Any:
        """Keep `content` in the flow's memory (`Memory.remember`'s arguments)."""
        return self._memory().remember(content, **kwargs)

    def recall(self, query: str, **kwargs: Any) -> list[Any]:
        """What the flow's memory holds for `query` (`Memory.recall`'s arguments)."""
        return self._memory().recall(query, **kwargs)

    def _memory(self) -> Any:
        if self.memory is None:
            self.memory = Memory()
        return self.memory

    @property
    def method_outputs(self) -> list[Any]:
        return [self._record.get("output")] if self._record.get("completed") else []

    def plot(self, filename: str = "crewai_flow") -> str:
        crewai_event_bus.emit(self, ev.FlowPlotEvent(flow_name=type(self).__name__))
        return super().plot(filename)


class _Resume:
    """`flow.resume(feedback)` on a flow from `from_pending` (CrewAI's); `MyFlow.resume(flow_id, feedback)` on the
    class (chatagent's, which the workers call)."""

    def __get__(self, flow: Any, cls: Any) -> Any:
        if flow is None:
            return functools.partial(vars(ChatFlow)["resume"].__func__, cls)
        return flow._resume_pending


Flow.resume = _Resume()  # type: ignore[assignment]

__all__ = ["Flow", "SQLiteFlowPersistence", "and_", "listen", "or_", "router", "start"]

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

import uuid
from typing import Any, ClassVar, TypeVar

from pydantic import Field, create_model

from chatagent.crewai.events import base_events as ev
from chatagent.crewai.events.bus import crewai_event_bus
from chatagent.crewai.flow.persistence import PERSIST, FlowPersistence, SQLiteFlowPersistence
from chatagent.crewai.memory.unified_memory import Memory
from chatagent.flows.conditions import and_, listen, or_, router, start
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

    def __init__(self, persistence: FlowPersistence | None = None, **kwargs: Any) -> None:
        for key in ("tracing", "suppress_flow_events", "max_method_calls", "stream"):
            kwargs.pop(key, None)  # CrewAI's settings of its own runtime
        fields = kwargs
        store = persistence or getattr(type(self), PERSIST, None) or type(self)._persistence  # @persist on the class
        super().__init__(store=store.store if store is not None else None, persist=store is not None)
        if fields:
            self._set_inputs(fields)

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
        self._record = {"pending": [], "next_id": 0, "seen": {}, "answers": {}, "asked": None, "completed": [],
                        "output": None}  # fmt: skip
        batch = [self._invocation(method, None) for method in self._starts]
        self._save("running")
        result = await self._go(batch)
        crewai_event_bus.emit(self, ev.FlowFinishedEvent(flow_name=name, result=result, state=self.state))
        return result

    kickoff_async = akickoff

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


__all__ = ["Flow", "SQLiteFlowPersistence", "and_", "listen", "or_", "router", "start"]

"""`crewai_event_bus`: CrewAI's event bus, built on chatagent's run events (`chatagent.run.events`).

    @crewai_event_bus.on(ToolUsageFinishedEvent)
    def seen(source, event): print(event.tool_name, event.output)

    class Listener(BaseEventListener):                   # CrewAI's listener class
        def setup_listeners(self, bus):
            @bus.on(CrewKickoffCompletedEvent)
            def done(source, event): ...

The face's crews, agents, tasks, flows, memories and knowledge emit their own events (crew kickoff, task, flow
method, memory save and query, knowledge query); what happens inside a run (an agent's execution, each model
call and tool call, the answer's text as it streams) comes from chatagent's run events, which a run carries only
while some handler listens: with none registered, runs carry no listener at all. Handlers run synchronously, in
the thread of the run, in the order they were registered; one that raises is logged and skipped (as CrewAI
does), and `flush()` has nothing to wait for.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from chatagent.crewai.events import base_events as ev
from chatagent.run.events import Callbacks, Event

logger = logging.getLogger("chatagent.crewai.events")
Handler = Callable[[Any, Any], Any]


class CrewAIEventsBus:
    """Handlers per event type; `emit(source, event)` gives an event to those of its type and its bases."""

    def __init__(self) -> None:
        self._handlers: dict[type, list[Handler]] = {}
        self._lock = threading.Lock()

    def on(self, event_type: type) -> Callable[[Handler], Handler]:
        """Decorator: `handler(source, event)` is called for every event of `event_type` (or a subclass)."""
        if not (isinstance(event_type, type) and issubclass(event_type, ev.BaseEvent)):
            raise TypeError(f"on() takes an event type (a BaseEvent subclass), got {event_type!r:.80}")

        def register(handler: Handler) -> Handler:
            self.register_handler(event_type, handler)
            return handler

        return register

    def register_handler(self, event_type: type, handler: Handler) -> None:
        if not callable(handler):
            raise TypeError("an event handler is a function of (source, event)")
        with self._lock:
            self._handlers.setdefault(event_type, []).append(handler)

    def off(self, event_type: type, handler: Handler) -> None:
        """Stop calling `handler` for `event_type`."""
        with self._lock:
            found = self._handlers.get(event_type, [])
            if handler in found:
                found.remove(handler)

    def listens(self, event_type: type | None = None) -> bool:
        """Whether some handler takes `event_type` (any event, without one)."""
        handlers = self._handlers
        if event_type is None:
            return any(handlers.values())
        return any(found and issubclass(event_type, t) for t, found in handlers.items())

    def emit(self, source: Any, event: Any) -> None:
        """Give `event` (from `source`) to every handler of its type, in the order they were registered."""
        if not self._handlers:
            return
        event.source_type = type(source).__name__.lower() if source is not None else None
        with self._lock:
            found = [h for t, hs in self._handlers.items() if isinstance(event, t) for h in hs]
        for handler in found:
            try:
                handler(source, event)
            except Exception:
                logger.exception("event handler %r failed on %s", handler, type(event).__name__)

    def flush(self, timeout: float | None = None) -> bool:
        """CrewAI waits here for its handlers' threads; these run as events happen: nothing to wait for."""
        return True

    @contextlib.contextmanager
    def scoped_handlers(self) -> Iterator[None]:
        """Handlers registered inside the block are removed when it ends (and those before are kept)."""
        with self._lock:
            saved = {t: list(hs) for t, hs in self._handlers.items()}
        try:
            yield
        finally:
            with self._lock:
                self._handlers = saved

    def run_listener(self, source: Any, task: Any = None) -> Callbacks | None:
        """What a run of `source` (a crew, an agent) carries so that its model and tool calls reach the bus: None
        while no handler listens to any event."""
        return _RunEvents(self, source, task) if self.listens() else None


class _RunEvents(Callbacks):
    """chatagent's run events as CrewAI's: agent execution, model calls, tool calls."""

    def __init__(self, bus: CrewAIEventsBus, source: Any, task: Any) -> None:
        self.bus, self.source, self.task = bus, source, task

    def on_run_start(self, event: Event) -> None:
        if event.agent and event.agent != getattr(self.source, "name", None):
            self.bus.emit(self.source, ev.AgentExecutionStartedEvent(agent_role=event.agent, task=self.task))

    def on_run_end(self, event: Event) -> None:
        if not event.agent or event.agent == getattr(self.source, "name", None):
            return
        if event.error:
            self.bus.emit(self.source, ev.AgentExecutionErrorEvent(agent_role=event.agent, error=event.error))
        else:
            self.bus.emit(self.source, ev.AgentExecutionCompletedEvent(agent_role=event.agent, task=self.task))

    def on_llm_start(self, event: Event) -> None:
        self.bus.emit(self.source, ev.LLMCallStartedEvent(agent_role=event.agent, model=event.data.get("model"),
                                                          messages=event.data.get("messages"),
                                                          call_id=str(id(event.run))))  # fmt: skip

    def on_llm_end(self, event: Event) -> None:
        if event.error:
            self.bus.emit(self.source, ev.LLMCallFailedEvent(agent_role=event.agent, error=event.error))
            return
        output = event.data.get("output") or []
        text = "".join(str(m.get("content") or "") for m in output if isinstance(m, dict) or hasattr(m, "get"))
        usage = event.usage
        self.bus.emit(self.source, ev.LLMCallCompletedEvent(
            agent_role=event.agent, model=event.data.get("model"), response=text, call_id=str(id(event.run)),
            usage={"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens}
            if usage is not None else None))  # fmt: skip

    def on_tool_start(self, event: Event) -> None:
        self.bus.emit(self.source, ev.ToolUsageStartedEvent(tool_name=event.tool or "", tool_args=event.arguments,
                                                            agent_role=event.agent))  # fmt: skip

    def on_tool_end(self, event: Event) -> None:
        kind = ev.ToolUsageErrorEvent if event.error else ev.ToolUsageFinishedEvent
        self.bus.emit(self.source, kind(tool_name=event.tool or "", tool_args=event.arguments, agent_role=event.agent,
                                        output=event.result, error=event.error))  # fmt: skip


class BaseEventListener:
    """CrewAI's listener base: subclass it, register handlers in `setup_listeners(bus)`; making one registers them."""

    verbose: bool = False

    def __init__(self) -> None:
        self.setup_listeners(crewai_event_bus)

    def setup_listeners(self, crewai_event_bus: CrewAIEventsBus) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define setup_listeners(crewai_event_bus)")


crewai_event_bus = CrewAIEventsBus()

__all__ = ["BaseEventListener", "CrewAIEventsBus", "crewai_event_bus"]

"""Durable turns, the run's side: checkpoints at the run's phase boundaries, and how a resumed turn starts.

`checkpointed(loop, turn)` passes an agent's loop on to the driver. Before each request (a model call, a tool
batch, a wait for a tool), once something completed since the last checkpoint, it has the turn write one
(`chatagent.sessions.turn.Turn.flush`: a store write, asked for as a `Blocking` request so that `arun()` makes it
in a worker thread). A model reply is thus in the store before its calls run, and each tool result before anything
that follows it; the run's context finds the idempotency keys of the calls there (`Turn.get`).

`Resumed(agent, calls)` is the agent as a resumed turn runs it: the calls its last model reply made that have no
result yet run first (through the one tool-call path, so approval and plugins apply), then the agent's loop goes on
with their results. The agent's loop starts anew on the conversation and what the turn had completed: a tool loop
(FnCallAgent) goes on exactly where it was; its limits (`max_llm_calls`) count from the resumption.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from chatagent.run.protocol import UNSET, Runnable
from chatagent.run.requests import AgentLoop, Blocking, ModelCall, pass_on, step
from chatagent.run.tool_call import run_tool
from chatagent.schema import FUNCTION, Message
from chatagent.schema.fragment import fragment, shift, typed

if TYPE_CHECKING:
    from chatagent.llm.base import BaseChatModel
    from chatagent.run.events import Callback
    from chatagent.tools.calling import ToolCache
    from chatagent.tools.tool import BaseTool


class Checkpoints(Protocol):
    """What `checkpointed` needs of a stored turn (`chatagent.sessions.turn.Turn` has it)."""

    @property
    def dirty(self) -> bool: ...

    def flush(self) -> None: ...


def checkpointed(gen: AgentLoop, turn: Checkpoints) -> AgentLoop:
    """`gen`'s items, with a checkpoint of the turn before each request that follows completed work."""
    value: Any = None
    error: BaseException | None = None
    try:
        while True:
            try:
                item = step(gen, value, error)
            except StopIteration as stop:
                return stop.value
            value = error = None
            if isinstance(item, list):
                yield item
                continue
            if turn.dirty:
                yield Blocking(turn.flush)  # a failed write ends the run
            value, error = yield from pass_on(item)
    finally:
        gen.close()


def shifted(gen: AgentLoop, offset: int) -> AgentLoop:
    """`gen`'s response placed `offset` messages later (its fragments, and the replies of its model calls)."""
    value: Any = None
    error: BaseException | None = None
    try:
        while True:
            try:
                item = step(gen, value, error)
            except StopIteration as stop:
                return stop.value
            value = error = None
            if isinstance(item, list):
                yield shift(typed(item), offset)
                continue
            if isinstance(item, ModelCall):
                item.start += offset
            value, error = yield from pass_on(item)
    finally:
        gen.close()


class Resumed:
    """`agent` as a resumed turn runs it (a `Runnable`): `calls`, the unanswered calls of the turn's last model
    reply, run first; then the agent's loop, on the conversation with their results."""

    def __init__(self, agent: Runnable, calls: list[Message]) -> None:
        self.agent = agent
        self.calls = calls

    @property
    def name(self) -> str | None:
        return self.agent.name

    @property
    def async_safe(self) -> bool:
        return self.agent.async_safe

    @property
    def callbacks(self) -> tuple[Callback, ...]:
        return self.agent.callbacks

    @property
    def llm(self) -> BaseChatModel:
        return self.agent.llm

    @property
    def extra_generate_cfg(self) -> dict[str, Any]:
        return self.agent.extra_generate_cfg

    @property
    def function_map(self) -> Mapping[str, BaseTool]:
        return self.agent.function_map

    @property
    def tool_cache(self) -> ToolCache | None:
        return self.agent.tool_cache

    def tools_need_approval(self) -> bool:
        return self.agent.tools_need_approval()

    def run_plugins(self, extra: Iterable[Any] | None = None, response_format: Any = UNSET) -> Sequence[Any]:
        return self.agent.run_plugins(extra, response_format)

    def loop(self, messages: list[Message], lang: str, kwargs: dict[str, Any]) -> AgentLoop:
        results: list[Message] = []
        for k, call in enumerate(self.calls):
            fc = call.function_call
            if fc is None:
                continue
            cid = (call.extra or {}).get("function_id")
            content = yield from run_tool(self.agent, fc.name, fc.arguments, call_id=cid, messages=messages,
                                          lang=lang, **kwargs)  # fmt: skip
            msg = Message.unchecked(FUNCTION, content, fc.name, None, None, {"function_id": cid} if cid else None)
            yield [fragment(msg, k)]
            results.append(msg)
        return (yield from shifted(self.agent.loop(messages + results, lang, kwargs), len(results)))


__all__ = ["Checkpoints", "Resumed", "checkpointed", "shifted"]

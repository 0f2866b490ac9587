"""Durable turns, the run's side: checkpoints at the run's phase boundaries, and how a resumed turn starts.

`checkpointed(loop, turn)` passes an agent's loop on to the driver (a `Checkpointed` stage). Before each request (a
model call, a tool batch, a wait for a tool), once something completed since the last checkpoint, it has the turn
write one (`chatagent.sessions.turn.Turn.flush`: a store write, asked for as a `Blocking` request so that `arun()`
makes it in a worker thread). A model reply is thus in the store before its calls run, and each tool result before
anything that follows it; the run's context finds the idempotency keys of the calls there (`Turn.get`).

`resumed_loop(agent, calls, ...)` is how a resumed turn starts: the calls its last model reply made that have no result
yet run first (through the one tool-call path, so approval and plugins apply), then the agent's own loop goes on with
their results, its response placed after them (`Shifted`). The agent's loop starts anew on the conversation and what
the turn had completed: a tool loop (FnCallAgent) goes on exactly where it was; its limits (`max_llm_calls`) count
from the resumption.
"""

from __future__ import annotations

from typing import Any, Protocol

from chatagent.run.interrupts import Asked
from chatagent.run.protocol import Runnable
from chatagent.run.requests import AgentLoop, Asking, Blocking, Fragments, ModelCall, Request
from chatagent.run.stage import Stage, relay
from chatagent.run.tool_call import run_tool
from chatagent.schema import FUNCTION, Message
from chatagent.schema.fragment import fragment, shift, typed


class Checkpoints(Protocol):
    """What `checkpointed` needs of a stored turn (`chatagent.sessions.turn.Turn` has it)."""

    @property
    def dirty(self) -> bool: ...

    def flush(self) -> None: ...


class Checkpointed(Stage):
    """A checkpoint of `turn` before each request that follows completed work."""

    __slots__ = ("turn",)

    def __init__(self, turn: Checkpoints) -> None:
        self.turn = turn

    def request(self, request: Request) -> Asking[Request]:
        if self.turn.dirty:
            yield Blocking(self.turn.flush)  # a failed write ends the run
        return request


def checkpointed(loop: AgentLoop, turn: Checkpoints) -> AgentLoop:
    """`loop`'s items, with a checkpoint of the turn before each request that follows completed work."""
    return relay(loop, Checkpointed(turn))


class Shifted(Stage):
    """A loop's response placed `offset` messages later (its fragments, and the replies of its model calls)."""

    __slots__ = ("offset",)

    def __init__(self, offset: int) -> None:
        self.offset = offset

    def show(self, fragments: Fragments) -> Fragments:
        return shift(typed(fragments), self.offset)

    def request(self, request: Request) -> Asking[Request]:
        if isinstance(request, ModelCall):
            request.start += self.offset
        return request
        yield  # (a generator: see Stage.request)


def own_loop(agent: Runnable, messages: list[Message], lang: str, kwargs: dict[str, Any],
             calls: list[Message] | None = None, waiting: list[dict[str, Any]] | None = None) -> AgentLoop:  # fmt: skip
    """The agent's own loop on `messages`; on a resumed turn with `calls` unanswered, those first (`resumed_loop`)."""
    if calls or waiting:
        return resumed_loop(agent, calls or [], messages, lang, kwargs, waiting)
    return agent.loop(messages, lang, kwargs)


def resumed_loop(agent: Runnable, calls: list[Message], messages: list[Message], lang: str, kwargs: dict[str, Any],
                 waiting: list[dict[str, Any]] | None = None) -> AgentLoop:  # fmt: skip
    """A resumed turn's loop: `calls`, the unanswered calls of its last model reply, run first; then the agent's own
    loop, on the conversation with their results. `waiting`: questions of other calls still without an answer (the
    run pauses again once `calls` ran: `chatagent.run.interrupts`)."""
    results: list[Message] = []
    try:
        for call in calls:
            fc = call.function_call
            if fc is None:
                continue
            cid = (call.extra or {}).get("function_id")
            content = yield from run_tool(agent, fc.name, fc.arguments, call_id=cid, messages=messages, lang=lang,
                                          **kwargs)  # fmt: skip
            msg = Message.unchecked(FUNCTION, content, fc.name, None, None, {"function_id": cid} if cid else None)
            yield [fragment(msg, len(results))]
            results.append(msg)
        if waiting:
            raise Asked(waiting)
        return (yield from relay(agent.loop(messages + results, lang, kwargs), Shifted(len(results))))
    except Asked as stop:  # a call asked (again), or others still wait: the pause goes after what was shown
        stop.questions = [*(waiting or ()), *(q for q in stop.questions if q not in (waiting or ()))]
        stop.at = len(results) + (stop.at or 0)
        raise


__all__ = ["Checkpointed", "Checkpoints", "Shifted", "checkpointed", "own_loop", "resumed_loop"]

"""Starting a run: messages in, the agent's loop out, ready for a driver.

`prepare` copies and checks the caller's messages and makes the run's context; `loop` starts the agent's loop on
them, under the run's plugins and tool approval when it has any (`chatagent.run.control`), with the run's events
around it; `stream` drives it, on a stored conversation when given a session (the turn checkpointed as it goes:
`chatagent.run.durable`); `resumed` continues a session's pending turn. Both take the `Driving` pair that says how:
`SYNC` in the calling thread (for `run()`), `ASYNC` on the running event loop (for `arun()`).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from types import ModuleType
from typing import Any, Generic, TypeVar

from chatagent.run import event_stream, events, interrupts
from chatagent.run.approval import approval_message, may_pause
from chatagent.run.compaction import DROP_OLDEST, compacted
from chatagent.run.context import CURRENT, RunContext
from chatagent.run.driver import adrive, drive, observed
from chatagent.run.durable import checkpointed, own_loop
from chatagent.run.interrupts import answer_message, interruptible
from chatagent.run.plugin import Plugins
from chatagent.run.protocol import UNSET, Runnable
from chatagent.run.requests import AgentLoop, Fragments
from chatagent.schema import Message, not_a_message_list, to_messages
from chatagent.schema.history import conversation_lang
from chatagent.utils.lazy import settle_imports

# CHATAGENT_TRACES=1: every run of the process is recorded (chatagent.run.traces)
if os.environ.get("CHATAGENT_TRACES"):
    from chatagent.run.traces import from_environment  # the recorder is loaded only when asked for

    from_environment()


_Stream = TypeVar("_Stream", Iterator[Fragments], AsyncIterator[Fragments])


class Driving(Generic[_Stream]):
    """How a run is driven: `drive(loop, agent)` runs the agent's loop and gives its fragments; `turns(module)` picks,
    from `chatagent.sessions.turn` (imported on first use: it loads sqlite), the runner of a turn on a session."""

    __slots__ = ("drive", "turns", "events")

    def __init__(self, drive: Callable[[AgentLoop, Runnable], _Stream], turns: Callable[[ModuleType], Any],
                 events: Callable[[_Stream, RunContext], Any]) -> None:  # fmt: skip
        self.drive = drive
        self.turns = turns
        self.events = events  # the run's typed events made of its fragments (run(..., events=True))


#: `run()`: the loop driven in the calling thread
SYNC: Driving[Iterator[Fragments]] = Driving(
    lambda loop, agent: drive(loop), lambda turns: turns.run_turn, lambda s, ctx: event_stream.events(s, ctx)
)
#: `arun()`: the loop driven on the running event loop (its own code in a worker thread unless it is async-safe)
ASYNC: Driving[AsyncIterator[Fragments]] = Driving(
    lambda loop, agent: adrive(loop, not agent.async_safe, _model_build(agent)), lambda turns: turns.arun_turn,
    event_stream.AsyncEvents,
)  # fmt: skip


def _model_build(agent: Runnable) -> Callable[[], object] | None:
    """The agent's model build when it is still to be done, for `adrive` to do off the event loop."""
    if agent.model_built:
        return None

    def build() -> None:
        modules = len(sys.modules)
        try:
            _ = agent.llm
        except Exception:  # a config's error: raised again, with the run's reporting, when the run reads `llm`
            return
        settle_imports(modules)  # a first build imports its backend

    return build


def prepare(
    agent: Runnable, messages: Iterable[dict[str, Any] | Message], deadline: float | None, kwargs: dict[str, Any]
) -> tuple[list[Message], bool, RunContext]:
    """The input normalised (a copy), whether the caller gave dicts (and so gets dicts), the run's context (the
    run's own `callbacks`, `generate_cfg`, `plugins` and `response_format` taken out of `kwargs`)."""
    if not_a_message_list(messages):
        raise TypeError(f"messages must be a list of messages, got {type(messages).__name__}")
    given = list(messages)
    as_dicts = not given or not all(isinstance(m, Message) for m in given)
    msgs = to_messages(given)
    if not msgs:
        raise ValueError("messages is empty: give at least one message")
    return msgs, as_dicts, new_context(agent, deadline, kwargs)


def new_context(agent: Runnable, deadline: float | None, kwargs: dict[str, Any]) -> RunContext:
    """A run's context (its own `callbacks`, `generate_cfg`, `seed`, `plugins` and `response_format` out of
    `kwargs`)."""
    listener = event_stream.Listener() if kwargs.pop("events", False) else None  # run(..., events=True)
    own = agent.callbacks + tuple(kwargs.pop("callbacks", None) or ()) + ((listener,) if listener is not None else ())
    callbacks = events.with_global_callbacks(own) if own else events.global_callbacks  # the latter: see handlers
    context = RunContext(time.monotonic() + deadline if deadline else None, callbacks, agent.name)
    context.events = listener
    if "generate_cfg" in kwargs or "seed" in kwargs:
        context.generate_cfg = _run_cfg(kwargs.pop("generate_cfg", None), kwargs.pop("seed", None))
    plugins = agent.run_plugins(kwargs.pop("plugins", None), kwargs.pop("response_format", UNSET))
    if plugins:
        context.plugins = Plugins(plugins)
    return context


def _run_cfg(given: dict[str, Any] | None, seed: Any) -> dict[str, Any] | None:
    """The run's own generate_cfg (None when empty), with Qwen-Agent's run(seed=...): its model calls sample with it."""
    run_cfg = dict(given or {})
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"seed must be an integer, got {seed!r}")
        run_cfg["seed"] = seed
    return run_cfg or None


def loop(agent: Runnable, msgs: list[Message], lang: str | None, context: RunContext, kwargs: dict[str, Any],
         calls: list[Message] | None = None) -> AgentLoop:  # fmt: skip
    """The agent's loop on `msgs` (after `calls`, a resumed turn's unanswered calls), controlled, compacted as the
    agent says, with the run's events around it."""
    context.session_id = kwargs.get("session_id")
    lang = lang or conversation_lang(msgs)
    token = CURRENT.set(context)  # a Qwen-style _run may do work before its first yield
    try:
        if agent.compaction.mode == DROP_OLDEST:  # (the model layer drops the oldest turns)
            gen = controlled_loop(agent, msgs, lang, kwargs, context, calls)
        else:  # a conversation that outgrew the window is summarised (or refused) first
            gen = compacted(agent, msgs, context, lambda fitted: controlled_loop(agent, fitted, lang, kwargs, context,
                                                                                 calls))  # fmt: skip
    finally:
        CURRENT.reset(token)
    if context.callbacks:
        gen = observed(gen, context)
    return gen


def controlled_loop(agent: Runnable, msgs: list[Message], lang: str, kwargs: dict[str, Any], context: RunContext,
                    calls: list[Message] | None = None) -> AgentLoop:  # fmt: skip
    """The agent's loop under the run's plugins and tool approval when it has any (see `chatagent.run.control`),
    paused when a tool asks a person something and resumed with the answers (`chatagent.run.interrupts`)."""
    msgs, answered = interrupts.resolve(msgs, context, agent.function_map)
    calls, waiting = (answered.calls, answered.waiting) if answered is not None else (calls, None)
    if context.plugins is None and not may_pause(agent, context.trust.approval):
        own = own_loop(agent, msgs, lang, kwargs, calls, waiting)
        return interruptible(own, context) if agent.function_map else own
    from chatagent.run.control import controlled  # only runs with plugins or approval load the control machinery

    return controlled(agent, context.plugins or Plugins(()), msgs, lang, kwargs, context, calls, waiting)


def stream(agent: Runnable, messages: Iterable[dict[str, Any] | Message], lang: str | None, deadline: float | None,
           session: Any, kwargs: dict[str, Any], driving: Driving[_Stream]
           ) -> tuple[_Stream, bool, RunContext]:  # fmt: skip
    """The run's fragments as `driving` drives them, whether the caller gets dicts, and the run's context."""
    msgs, as_dicts, context = prepare(agent, messages, deadline, kwargs)
    if session is None:
        stream = driving.drive(loop(agent, msgs, lang, context, kwargs), agent)
    else:
        stream = _stored(agent, session, msgs, interrupts.is_decision(msgs[-1]), False, lang, context, kwargs, driving)
    return (stream if context.events is None else driving.events(stream, context)), as_dicts, context


def resumed(
    agent: Runnable, session: Any, approval: Any, reason: str, answers: Any, lang: str | None,
    deadline: float | None, kwargs: dict[str, Any], driving: Driving[_Stream],
) -> tuple[_Stream, RunContext]:  # fmt: skip
    """The fragments of `session`'s pending turn continued (its completed part first), and the run's context: with
    the decision on its calls (`approval`) or the answers to its questions (`answers`), if given."""
    if approval is not None and answers is not None:
        raise TypeError("resume(approval=...) decides calls waiting for approval, answers=... answers questions: "
                        "give one (an answers dict may decide approvals too, by their id)")  # fmt: skip
    context = new_context(agent, deadline, kwargs)
    decision = answer_message(answers) if answers is not None else None if approval is None else approval_message(
        approval, reason)  # fmt: skip
    msgs = [] if decision is None else to_messages([decision])
    return _stored(agent, session, msgs, False, True, lang, context, kwargs, driving), context


def _stored(
    agent: Runnable, session: Any, msgs: list[Message], decision: bool, resume: bool, lang: str | None,
    context: RunContext, kwargs: dict[str, Any], driving: Driving[_Stream],
) -> _Stream:  # fmt: skip
    from chatagent.sessions import turn as turns  # sqlite: on first use

    session = turns.checked_session(session)
    kwargs.setdefault("session_id", turns.tool_state_key(session))
    context.session = session  # whose run it is: per-user state (long-term memory) follows the session's user

    def start(turn: turns.Turn) -> _Stream:
        return driving.drive(_durable_loop(agent, turn, lang, context, kwargs), agent)

    run_turn = driving.turns(turns)
    return run_turn(
        lambda: turns.Turn(session, msgs, decision=decision, resume=resume, check=interrupts.check_decision),
        start,
        agent.name,
    )


def _durable_loop(
    agent: Runnable, turn: Any, lang: str | None, context: RunContext, kwargs: dict[str, Any]
) -> AgentLoop:
    """The agent's loop on a stored turn: checkpointed, and on a resumed turn its unanswered calls first."""
    context.turn_key = turn.key
    turn.usage = context.usage
    context.call_keys = turn  # the idempotency keys of its checkpointed calls
    restarted = turn.restored and turn.offset and not turn.decided  # (a decision: the control runs the calls)
    calls: list[Message] | None = turn.unanswered() if restarted else None
    return checkpointed(loop(agent, turn.conversation, lang, context, kwargs, calls), turn)


__all__ = ["ASYNC", "SYNC", "Driving", "controlled_loop", "loop", "new_context", "prepare", "resumed", "stream"]

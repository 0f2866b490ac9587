"""Starting a run: messages in, the agent's loop out, ready for a driver.

`prepare` copies and checks the caller's messages and makes the run's context; `loop` starts the agent's loop on
them, under the run's plugins and tool approval when it has any (`chatagent.run.control`), with the run's events
around it; `stream` and `astream` drive it (`chatagent.run.driver`), on a stored conversation when given a session
(the turn checkpointed as it goes: `chatagent.run.durable`); `resumed` and `aresumed` continue a session's pending
turn.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

from chatagent.run import events
from chatagent.run.approval import approval_message, is_approval, may_pause
from chatagent.run.compaction import compacted
from chatagent.run.context import CURRENT, RunContext
from chatagent.run.driver import adrive, drive, observed
from chatagent.run.durable import Resumed, checkpointed
from chatagent.run.plugin import Plugins
from chatagent.run.protocol import UNSET, Runnable
from chatagent.run.requests import AgentLoop, Fragments
from chatagent.schema import Message, not_a_message_list, to_messages
from chatagent.schema.history import conversation_lang


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
    """A run's context (its own `callbacks`, `generate_cfg`, `plugins` and `response_format` out of `kwargs`)."""
    own = agent.callbacks + tuple(kwargs.pop("callbacks", None) or ())
    callbacks = events.with_global_callbacks(own) if own else events.global_callbacks  # the latter: see handlers
    context = RunContext(time.monotonic() + deadline if deadline else None, callbacks, agent.name)
    run_cfg = kwargs.pop("generate_cfg", None)
    if run_cfg:
        context.generate_cfg = dict(run_cfg)
    plugins = agent.run_plugins(kwargs.pop("plugins", None), kwargs.pop("response_format", UNSET))
    if plugins:
        context.plugins = Plugins(plugins)
    return context


def loop(
    agent: Runnable, msgs: list[Message], lang: str | None, context: RunContext, kwargs: dict[str, Any]
) -> AgentLoop:
    """The agent's loop on `msgs`, controlled, with the run's events around it."""
    context.session_id = kwargs.get("session_id")
    lang = lang or conversation_lang(msgs)
    policy = getattr(agent, "compaction", None)
    token = CURRENT.set(context)  # a Qwen-style _run may do work before its first yield
    try:
        if policy is None or policy.mode == "drop-oldest":  # (the model layer drops the oldest turns)
            gen = controlled_loop(agent, msgs, lang, kwargs, context)
        else:  # a conversation that outgrew the window is summarised (or refused) first
            gen = compacted(agent, msgs, context, lambda fitted: controlled_loop(agent, fitted, lang, kwargs, context))
    finally:
        CURRENT.reset(token)
    if context.callbacks:
        gen = observed(gen, context)
    return gen


def controlled_loop(
    agent: Runnable, msgs: list[Message], lang: str, kwargs: dict[str, Any], context: RunContext
) -> AgentLoop:
    """The agent's loop under the run's plugins and tool approval when it has any (see `chatagent.run.control`)."""
    if context.plugins is None and not may_pause(agent, context.trust.approval):
        return agent.loop(msgs, lang, kwargs)
    from chatagent.run.control import controlled  # only runs with plugins or approval load the control machinery

    return controlled(agent, context.plugins or Plugins(()), msgs, lang, kwargs, context)


def stream(
    agent: Runnable,
    messages: Iterable[dict[str, Any] | Message],
    lang: str | None,
    deadline: float | None,
    session: Any,
    kwargs: dict[str, Any],
) -> tuple[Iterator[Fragments], bool, RunContext]:
    """The run's fragments for `run()` (driven in the calling thread), whether the caller gets dicts, the context."""
    msgs, as_dicts, context = prepare(agent, messages, deadline, kwargs)
    if session is None:
        return drive(loop(agent, msgs, lang, context, kwargs)), as_dicts, context
    return _stored(agent, session, msgs, is_approval(msgs[-1]), False, lang, context, kwargs), as_dicts, context


def astream(
    agent: Runnable,
    messages: Iterable[dict[str, Any] | Message],
    lang: str | None,
    deadline: float | None,
    session: Any,
    kwargs: dict[str, Any],
) -> tuple[AsyncIterator[Fragments], bool, RunContext]:
    """`stream` for `arun()`: driven on the event loop."""
    msgs, as_dicts, context = prepare(agent, messages, deadline, kwargs)
    if session is None:
        return adrive(loop(agent, msgs, lang, context, kwargs), not agent.async_safe), as_dicts, context
    return _astored(agent, session, msgs, is_approval(msgs[-1]), False, lang, context, kwargs), as_dicts, context


def resumed(
    agent: Runnable, session: Any, approval: Any, reason: str, lang: str | None, deadline: float | None,
    kwargs: dict[str, Any],
) -> tuple[Iterator[Fragments], RunContext]:  # fmt: skip
    """The fragments of `session`'s pending turn continued (its completed part first), and the run's context."""
    context = new_context(agent, deadline, kwargs)
    msgs = [] if approval is None else to_messages([approval_message(approval, reason)])
    return _stored(agent, session, msgs, False, True, lang, context, kwargs), context


def aresumed(
    agent: Runnable, session: Any, approval: Any, reason: str, lang: str | None, deadline: float | None,
    kwargs: dict[str, Any],
) -> tuple[AsyncIterator[Fragments], RunContext]:  # fmt: skip
    """`resumed` for `aresume()`."""
    context = new_context(agent, deadline, kwargs)
    msgs = [] if approval is None else to_messages([approval_message(approval, reason)])
    return _astored(agent, session, msgs, False, True, lang, context, kwargs), context


def _stored(
    agent: Runnable, session: Any, msgs: list[Message], decision: bool, resume: bool, lang: str | None,
    context: RunContext, kwargs: dict[str, Any],
) -> Iterator[Fragments]:  # fmt: skip
    from chatagent.sessions.turn import Turn, checked_session, run_turn, tool_state_key  # sqlite: on first use

    session = checked_session(session)
    kwargs.setdefault("session_id", tool_state_key(session))
    context.session = session  # whose run it is: per-user state (long-term memory) follows the session's user

    def start(turn: Turn) -> Iterator[Fragments]:
        return drive(_durable_loop(agent, turn, lang, context, kwargs))

    return run_turn(lambda: Turn(session, msgs, decision=decision, resume=resume), start, agent.name)


def _astored(
    agent: Runnable, session: Any, msgs: list[Message], decision: bool, resume: bool, lang: str | None,
    context: RunContext, kwargs: dict[str, Any],
) -> AsyncIterator[Fragments]:  # fmt: skip
    from chatagent.sessions.turn import Turn, arun_turn, checked_session, tool_state_key  # sqlite: on first use

    session = checked_session(session)
    kwargs.setdefault("session_id", tool_state_key(session))
    context.session = session  # whose run it is: per-user state (long-term memory) follows the session's user

    def start(turn: Turn) -> AsyncIterator[Fragments]:
        return adrive(_durable_loop(agent, turn, lang, context, kwargs), not agent.async_safe)

    return arun_turn(lambda: Turn(session, msgs, decision=decision, resume=resume), start, agent.name)


def _durable_loop(
    agent: Runnable, turn: Any, lang: str | None, context: RunContext, kwargs: dict[str, Any]
) -> AgentLoop:
    """The agent's loop on a stored turn: checkpointed, and on a resumed turn its unanswered calls first."""
    context.turn_key = turn.key
    turn.usage = context.usage
    runnable: Runnable = agent
    context.call_keys = turn  # the idempotency keys of its checkpointed calls
    if turn.restored:
        calls: list[Message] = turn.unanswered() if turn.offset and not turn.decided else []  # a decision: control
        if calls:
            runnable = Resumed(agent, calls)
    return checkpointed(loop(runnable, turn.conversation, lang, context, kwargs), turn)


__all__ = ["aresumed", "astream", "controlled_loop", "loop", "new_context", "prepare", "resumed", "stream"]

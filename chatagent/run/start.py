"""Starting a run: messages in, the agent's loop out, ready for a driver.

`prepare` copies and checks the caller's messages and makes the run's context; `loop` starts the agent's loop on
them, under the run's plugins and tool approval when it has any (`chatagent.run.control`), with the run's events
around it; `stream` and `astream` drive it (`chatagent.run.driver`), on a stored conversation when given a session.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

from chatagent.run import events
from chatagent.run.context import CURRENT, RunContext
from chatagent.run.driver import adrive, drive, observed
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
    own = agent.callbacks + tuple(kwargs.pop("callbacks", None) or ())
    callbacks = own + events.global_callbacks if own else events.global_callbacks  # the latter: see handlers
    context = RunContext(time.monotonic() + deadline if deadline else None, callbacks, agent.name)
    run_cfg = kwargs.pop("generate_cfg", None)
    if run_cfg:
        context.generate_cfg = dict(run_cfg)
    plugins = agent.run_plugins(kwargs.pop("plugins", None), kwargs.pop("response_format", UNSET))
    if plugins:
        context.plugins = Plugins(plugins)
    return msgs, as_dicts, context


def loop(
    agent: Runnable, msgs: list[Message], lang: str | None, context: RunContext, kwargs: dict[str, Any]
) -> AgentLoop:
    """The agent's loop on `msgs`, controlled, with the run's events around it."""
    context.session_id = kwargs.get("session_id")
    token = CURRENT.set(context)  # a Qwen-style _run may do work before its first yield
    try:
        gen = controlled_loop(agent, msgs, lang or conversation_lang(msgs), kwargs, context)
    finally:
        CURRENT.reset(token)
    if context.callbacks:
        gen = observed(gen, context)
    return gen


def controlled_loop(
    agent: Runnable, msgs: list[Message], lang: str, kwargs: dict[str, Any], context: RunContext
) -> AgentLoop:
    """The agent's loop under the run's plugins and tool approval when it has any (see `chatagent.run.control`)."""
    if context.plugins is None and not agent.tools_need_approval():
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
    from chatagent.sessions.session import checked_session, run_turn, tool_state_key  # asyncio, sqlite: on first use

    session = checked_session(session)
    kwargs.setdefault("session_id", tool_state_key(session))
    context.session = session  # whose run it is: per-user state (long-term memory) follows the session's user

    def start(conversation: list[Message]) -> Iterator[Fragments]:
        return drive(loop(agent, conversation, lang, context, kwargs))

    return run_turn(session, msgs, start, agent.name), as_dicts, context


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
    blocking = not agent.async_safe
    if session is None:
        return adrive(loop(agent, msgs, lang, context, kwargs), blocking), as_dicts, context
    from chatagent.sessions.session import arun_turn, checked_session, tool_state_key  # sqlite: on first use

    session = checked_session(session)
    kwargs.setdefault("session_id", tool_state_key(session))
    context.session = session  # whose run it is: per-user state (long-term memory) follows the session's user

    def start(conversation: list[Message]) -> AsyncIterator[Fragments]:
        return adrive(loop(agent, conversation, lang, context, kwargs), blocking)

    return arun_turn(session, msgs, start, agent.name), as_dicts, context


__all__ = ["astream", "controlled_loop", "loop", "prepare", "stream"]

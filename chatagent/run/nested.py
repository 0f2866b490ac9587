"""Nested runs: an agent run inside another's run as one of its steps (an agent used as a tool), its messages shown
to the caller's consumer but never sent to a model.

A nested run's messages stream at their place in the caller's response, named after its agent and marked
`extra['nested_in'] = <the id of the call that ran it>`; `visible_to_model` drops them from what any model is sent
(the caller's model sees its call and the result). A nested run paused for a person (approval, or a question its
tools asked: `chatagent.ask_user`) pauses the caller's run, the nested run's pause last in the response (so
`pending_questions` lists it); `paused_nested` finds it again when the decision comes, `own_messages` gives the
agent its messages back.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from chatagent.errors import RunDeadlineExceeded
from chatagent.run.approval import PENDING_APPROVAL
from chatagent.run.interrupts import NESTED, PENDING_QUESTIONS, is_decision
from chatagent.run.requests import Asking, Fragments
from chatagent.run.subagent import run_subagent
from chatagent.schema import ASSISTANT, Message, content_text
from chatagent.schema.stream import Collector
from chatagent.tools.calling import ToolErrorKind

if TYPE_CHECKING:
    from chatagent.run.protocol import Runnable

logger = logging.getLogger("chatagent.agent_tool")


class Nested:
    """What a nested run came to: the tool's result (`content`, or an error for the model in it with `error` set),
    the messages it showed (marked), and whether it paused for a person."""

    __slots__ = ("content", "error", "messages", "paused")

    def __init__(self, content: str, error: ToolErrorKind | None, messages: list[Message], paused: bool) -> None:
        self.content, self.error, self.messages, self.paused = content, error, messages, paused


def nested(
    agent: Runnable, messages: list[Message], call_id: str, start: int, lang: str, raise_errors: bool = False
) -> Asking[Nested]:
    """Run `agent` on `messages` as a nested run whose messages are shown from `start`, marked with `call_id`."""
    seen: set[int] = set()
    shown = Collector()  # what was shown, marked (for the caller's place in its response)

    def mark(fragments: Fragments) -> Fragments:
        for f in fragments:
            if f.replace or f.index not in seen:  # the first piece of each message carries the mark
                seen.add(f.index)
                f.extra = {**f.extra, NESTED: call_id} if f.extra else {NESTED: call_id}
        shown.add([f.copy(index=f.index - start) for f in fragments])
        return fragments

    try:
        response = yield from run_subagent(agent, messages, lang, start, mark)
    except RunDeadlineExceeded:
        raise
    except Exception as e:
        if raise_errors:
            raise
        logger.warning("agent %s, run as a tool, failed: %s", agent.name, type(e).__name__, exc_info=e)
        text = str(e).strip().replace("\n", " ")[:300]
        error = f"Error: {agent.name} failed: {type(e).__name__}" + (f": {text}" if text else "")
        return Nested(error, ToolErrorKind.EXCEPTION, shown.messages(), False)
    last = response[-1].extra if response else None
    paused = bool(last and (PENDING_APPROVAL in last or PENDING_QUESTIONS in last))
    return Nested(answer_of(response), None, shown.messages(), paused)


def answer_of(response: list[Message]) -> str:
    """An agent's answer in its response: the last assistant message that calls no tool (its text)."""
    for m in reversed(response):
        if m.role == ASSISTANT and m.function_call is None:
            return content_text(m.content)
    return ""


def visible_to_model(messages: list[Message]) -> list[Message]:
    """`messages` without nested runs' messages (the list itself when it has none)."""
    for m in messages:
        if m.extra and NESTED in m.extra:
            return [m for m in messages if not (m.extra and NESTED in m.extra)]
    return messages


def paused_nested(messages: list[Message]) -> tuple[int, int] | None:
    """When the conversation ends with a nested run paused for a person, then the decision (approval, answers):
    (the index of the caller's call that ran it, the index of its first message); else None."""
    last = messages[-2].extra if len(messages) >= 3 and is_decision(messages[-1]) else None
    if not (last and NESTED in last and (PENDING_APPROVAL in last or PENDING_QUESTIONS in last)):
        return None
    return _paused_at(messages, last[NESTED])


def _paused_at(messages: list[Message], mark: Any) -> tuple[int, int] | None:
    """`paused_nested`'s search: where the nested run marked `mark` starts, and the call that ran it."""
    first = len(messages) - 2
    while first > 0 and (messages[first - 1].extra or {}).get(NESTED) == mark:
        first -= 1
    k = first - 1
    while k >= 0 and (messages[k].role != ASSISTANT or messages[k].function_call is None or _is_nested(messages[k])):
        k -= 1
    if k < 0:
        return None
    return k, first


def _is_nested(m: Message) -> bool:
    return bool(m.extra and NESTED in m.extra)


def own_messages(messages: list[Message]) -> list[Message]:
    """A nested run's messages as its agent's own conversation (the mark taken off)."""
    out: list[Message] = []
    for m in messages:
        extra = {k: v for k, v in (m.extra or {}).items() if k != NESTED} or None
        out.append(Message.unchecked(m.role, m.content, m.name, m.function_call, m.reasoning_content, extra))
    return out


__all__ = ["NESTED", "Nested", "answer_of", "nested", "own_messages", "paused_nested", "visible_to_model"]

"""UserAgent: a person taking part in a multi-agent conversation (the human in the loop).

A UserAgent never calls a model. When it is its turn, it yields one *pending-input marker* and stops,
so whoever drives the conversation (the web UI, the CLI, your code) asks that person for a message and
resumes by calling `run()` again with the message appended. The marker is an assistant message:

    {'role': 'assistant', 'name': 'Alice', 'content': '<!-- INTERRUPT: PENDING_USER_INPUT -->',
     'extra': {'pending_user_input': 'Alice'}}

`content` is Qwen-Agent's PENDING_USER_INPUT string, so code written for its UI keeps working;
`extra['pending_user_input']` holds the person's name. Use `is_pending_input(msg)` and
`pending_input(response)` rather than comparing strings. Agents that read a conversation drop markers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from chatagent.agent import Agent
from chatagent.schema import ASSISTANT, Message
from chatagent.schema.fragment import fragment

PENDING_USER_INPUT = "<!-- INTERRUPT: PENDING_USER_INPUT -->"
PENDING_KEY = "pending_user_input"


def pending_marker(name: str) -> Message:
    """The marker asking the person called `name` for their message."""
    return Message.unchecked(ASSISTANT, PENDING_USER_INPUT, name, None, None, {PENDING_KEY: name})


def is_pending_input(msg: Message | dict[str, Any]) -> bool:
    """Whether `msg` (a Message or a dict) is a pending-input marker."""
    extra = msg.get("extra") or {}
    return PENDING_KEY in extra or (msg.get("role") == ASSISTANT and msg.get("content") == PENDING_USER_INPUT)


def pending_input(response: list[Message] | list[dict]) -> str | None:
    """The name of the person whose input `response` (a run's output) waits for, or None."""
    if not response or not is_pending_input(response[-1]):
        return None
    last = response[-1]
    return (last.get("extra") or {}).get(PENDING_KEY) or last.get("name") or ""


class UserAgent(Agent):
    """A human participant: its turn yields a pending-input marker instead of calling a model.

    Args:
        name: the person's name, as the other participants address them (`@name`).
        description: who they are, for the group chat host that picks speakers.
    """

    is_human = True

    def __init__(self, name: str = "user", description: str | None = None, **kwargs: Any) -> None:
        super().__init__(name=name, description=description or "a human participant", **kwargs)

    async_safe = True
    fragment_native = True

    def _run(self, messages: list[Message], lang: str = "en", **kwargs: Any) -> Iterator[list[Message]]:
        yield [fragment(pending_marker(self.name or "user"), 0)]

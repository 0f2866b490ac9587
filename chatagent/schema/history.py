"""New conversations from old: the system text added, unanswered function calls dropped; the language of one."""

from __future__ import annotations

from collections.abc import Iterable

from chatagent.schema.message import Message
from chatagent.schema.parts import ASSISTANT, FUNCTION, SYSTEM, USER, ContentItem, content_text
from chatagent.utils.lang import detect_lang


def with_system_text(messages: list[Message], text: str, *, first: bool = False) -> list[Message]:
    """`messages` with `text` added to the system message: after its text (before it with `first=True`), a blank
    line between; a new system message when there is none. A new list: `messages` and its messages are unchanged."""
    if not messages or messages[0].role != SYSTEM:
        return [Message.unchecked(SYSTEM, text), *messages]
    system = messages[0]
    sep = "\n\n" if content_text(system.content).strip() else ""
    content: str | list[ContentItem]
    if isinstance(system.content, str):
        if not sep:  # a blank system message is replaced
            content = text
        else:
            content = text + sep + system.content if first else system.content + sep + text
    elif first:
        content = [ContentItem(text=text + sep), *system.content]
    else:
        content = [*system.content, ContentItem(text=sep + text)]
    return [system.copy(content=content), *messages[1:]]


def drop_unanswered_calls(messages: list[Message]) -> list[Message]:
    """The messages without function calls that have no result (after a stopped or failed turn).

    A call is answered by a function message with the same `extra['function_id']`; calls without ids are
    matched to results by count. Keeps a history valid for APIs that reject a call without its result.
    """
    answered = {(m.extra or {}).get("function_id") for m in messages if m.role == FUNCTION}
    n_results = sum(1 for m in messages if m.role == FUNCTION)
    n_calls = 0
    out: list[Message] = []
    for m in messages:
        if m.role == ASSISTANT and m.function_call is not None:
            fid = (m.extra or {}).get("function_id")
            n_calls += 1
            if fid is not None and fid not in answered:
                continue
            if fid is None and n_calls > n_results:
                continue
        out.append(m)
    return out


def conversation_lang(messages: Iterable[Message]) -> str:
    """The language of the latest user message ('en' when there is none)."""
    for m in reversed(list(messages)):
        if m.role == USER:
            return detect_lang(content_text(m.content))
    return "en"

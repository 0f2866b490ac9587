"""Tool calls the model was given: what a request already holds in the text of its messages (tool results,
documents' excerpts, a remote agent's answer, earlier messages), so that a call a model merely quotes from it is
never taken for a call of its own (`chatagent.llm.recovered_calls`).

    quoted = QuotedCalls(request.messages, schemas)
    quoted.holds(block_text, name, arguments)   # True: the request's text already has this call

A call counts as quoted when its text, whitespace aside, appears in a message, or when a message holds a call of
the same tool with the same arguments in any of the shapes recovery reads (`<tool_call>`, `<function=...>`,
`[TOOL_CALLS]`, `<|python_tag|>`, a JSON object naming a tool), however it is spaced or ordered. The messages are
read only when a reply held a call to recover, once per request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from chatagent.llm.fncall.calls import parse_call_text
from chatagent.schema import Message, content_text

_BLOCKS = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)|(<function=.*?(?:</function>|$))", re.S)
_JSON_START = re.compile(r"\{\s*\"(?:name|function|tool|tool_name|function_name)\"\s*:")
_DECODER = json.JSONDecoder()


def _squeezed(text: str) -> str:
    return "".join(text.split())


def _canonical(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), sort_keys=True, ensure_ascii=False)
    except ValueError:
        return _squeezed(arguments)


class QuotedCalls:
    """The calls written in the text of `messages` (see the module docstring), read on first use."""

    __slots__ = ("_messages", "_schemas", "_text", "_calls")

    def __init__(self, messages: Iterable[Message], schemas: dict[str, dict[str, Any]] | None = None) -> None:
        self._messages = list(messages)
        self._schemas = schemas or {}
        self._text: str | None = None
        self._calls: set[tuple[str, str]] = set()

    def holds(self, text: str, name: str, arguments: str) -> bool:
        """Whether the messages already hold this call: its `text` (as the model wrote it) or the same tool with
        the same arguments."""
        if self._text is None:
            self._read()
        assert self._text is not None
        body = _squeezed(text)
        if len(body) >= 8 and body in self._text:
            return True
        return (name, _canonical(arguments)) in self._calls

    def _read(self) -> None:
        texts = [t for m in self._messages for t in _texts(m)]
        self._text = "\x00".join(_squeezed(t) for t in texts)
        for t in texts:
            for name, arguments in _calls_in(t, self._schemas):
                self._calls.add((name, _canonical(arguments)))


def _texts(message: Message) -> Iterator[str]:
    content = message.content
    text = content if isinstance(content, str) else content_text(content) if content else ""
    if text:
        yield text
    if message.reasoning_content:
        yield message.reasoning_content


def _calls_in(text: str, schemas: dict[str, dict[str, Any]]) -> Iterator[tuple[str, str]]:
    """Every call written in `text`, in any shape recovery reads."""
    if "<tool_call>" in text or "<function=" in text:
        for m in _BLOCKS.finditer(text):
            found = parse_call_text(m.group(1) if m.group(1) is not None else m.group(2), schemas)
            if found is not None and found[0]:
                yield found
    for m in _JSON_START.finditer(text):  # JSON objects naming a tool, alone or in a list, anywhere in the text
        try:
            value, _ = _DECODER.raw_decode(text, m.start())
        except ValueError:
            continue
        found = parse_call_text(json.dumps(value, ensure_ascii=False), schemas)
        if found is not None and found[0]:
            yield found


__all__ = ["QuotedCalls"]

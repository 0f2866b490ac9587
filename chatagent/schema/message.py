"""Message, and messages from dicts: ours, or OpenAI's (role `tool` and `developer`, `tool_calls`)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from chatagent.schema.parts import (
    ASSISTANT,
    FUNCTION,
    ROLES,
    SYSTEM,
    ContentItem,
    DictLike,
    FunctionCall,
    MessageError,
    content_text,
    is_dict,
    is_list,
    parse_content,
    parse_function_call,
    require,
    type_name,
)


class Message(DictLike):
    """One message of a conversation.

    `content` is a string or a list of ContentItems. An assistant message carries at most one
    `function_call`; a function message is a tool's result, with `name` the tool's name and
    `extra['function_id']` tying it to its call. `reasoning_content` holds a thinking model's thoughts.
    """

    __slots__ = ("role", "content", "name", "function_call", "reasoning_content", "extra")
    _fields: tuple[str, ...] = __slots__
    role: str
    content: str | list[ContentItem]
    name: str | None
    function_call: FunctionCall | None
    reasoning_content: str | None
    extra: dict[str, Any] | None

    def __init__(
        self,
        role: str,
        content: str | list[ContentItem] | list[dict[str, Any]] | None = "",
        reasoning_content: str | None = None,
        name: str | None = None,
        function_call: FunctionCall | dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        if role not in ROLES:
            raise MessageError(f"role must be one of {', '.join(ROLES)}, got {role!r}")
        self.role = role
        self.content = parse_content(content)
        if name is not None:
            require(name, str, "name must be a string")
        self.name = name
        if isinstance(function_call, dict):
            function_call = parse_function_call(function_call, "function_call")
        elif function_call is not None:
            require(function_call, FunctionCall, "function_call must be a dict or FunctionCall")
        self.function_call = function_call
        if reasoning_content is not None:
            require(reasoning_content, str, "reasoning_content must be a string")
        self.reasoning_content = reasoning_content
        if extra is not None:
            require(extra, dict, "extra must be a dict")
        self.extra = extra

    @classmethod
    def unchecked(
        cls,
        role: str,
        content: str | list[ContentItem],
        name: str | None = None,
        function_call: FunctionCall | None = None,
        reasoning_content: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> Message:
        """Build without validation, for the framework's own already-valid values (the per-chunk path)."""
        m = object.__new__(cls)
        m.role, m.content, m.name, m.function_call = role, content, name, function_call
        m.reasoning_content, m.extra = reasoning_content, extra
        return m

    def copy(self, **changes: Any) -> Message:
        """A copy sharing immutable parts; content lists and extra are copied shallowly."""
        m = Message.unchecked(
            self.role,
            list(self.content) if isinstance(self.content, list) else self.content,
            self.name,
            self.function_call,
            self.reasoning_content,
            dict(self.extra) if self.extra is not None else None,
        )
        for k, v in changes.items():
            setattr(m, k, v)
        return m

    @property
    def text(self) -> str:
        """The message's text: the string content, or its text items joined by newlines."""
        return content_text(self.content)

    def model_dump(self) -> dict[str, Any]:
        """The message as a plain dict, leaving out fields that are None."""
        d: dict[str, Any] = {"role": self.role}
        c = self.content
        d["content"] = c if isinstance(c, str) else [item.model_dump() for item in c]
        if self.name is not None:
            d["name"] = self.name
        if self.function_call is not None:
            d["function_call"] = self.function_call.model_dump()
        if self.reasoning_content is not None:
            d["reasoning_content"] = self.reasoning_content
        if self.extra is not None:
            d["extra"] = dict(self.extra)
        return d

    def model_dump_json(self) -> str:
        return json.dumps(self.model_dump(), ensure_ascii=False)

    @classmethod
    def model_validate(cls, data: dict[str, Any] | Message) -> Message:
        return to_message(data)


def not_a_message_list(value: object) -> bool:
    """Whether `value` cannot be a list of messages: not iterable, or a string, a dict or one Message."""
    return isinstance(value, (str, bytes, dict, Message)) or not isinstance(value, Iterable)


def to_message(data: dict[str, Any] | Message, where: str = "message") -> Message:
    """One message from a Message or a dict (our format; OpenAI's role `tool` and `developer` too).

    An OpenAI assistant message with several `tool_calls` becomes several messages: use `to_messages`.
    """
    if not isinstance(data, dict):
        require(data, Message, f"{where} must be a dict or Message")
        return data
    msgs = _from_dict(data, where)
    if len(msgs) != 1:
        raise MessageError(f"{where} holds several tool calls: convert it with to_messages")
    return msgs[0]


def to_messages(data: Iterable[dict[str, Any] | Message]) -> list[Message]:
    """Messages from a list of dicts or Messages; copies, so the caller's objects are never shared."""
    if not_a_message_list(data):
        raise MessageError(f"messages must be a list of messages, got {type_name(data)}")
    out: list[Message] = []
    for i, m in enumerate(data):
        where = f"messages[{i}]"
        if isinstance(m, Message):
            out.append(Message.copy(m))  # a plain Message, also from a Fragment
        else:
            require(m, dict, f"{where} must be a dict or Message")
            out.extend(_from_dict(m, where))
    return out


def _from_dict(d: dict[str, Any], where: str) -> list[Message]:
    role = d.get("role")
    if role is None:
        raise MessageError(f"{where}.role is missing")
    if role == "developer":
        role = SYSTEM
    given_extra = d.get("extra")
    if given_extra is not None and not is_dict(given_extra):
        raise MessageError(f"{where}.extra must be a dict, got {type(given_extra).__name__}")
    extra = dict(given_extra) if given_extra else None
    try:
        content = parse_content(d.get("content"), f"{where}.content")
    except MessageError:
        raise
    if role == "tool":
        extra = extra or {}
        if d.get("tool_call_id") is not None:
            extra["function_id"] = d["tool_call_id"]
        return [_build(where, FUNCTION, content, None, d.get("name"), None, extra)]
    if role not in ROLES:
        raise MessageError(f"{where}.role must be one of {', '.join(ROLES)} (or tool), got {role!r}")
    fc = d.get("function_call")
    fc = parse_function_call(fc, f"{where}.function_call") if is_dict(fc) else fc
    reasoning = d.get("reasoning_content")
    tool_calls = d.get("tool_calls")
    if not tool_calls:
        return [_build(where, role, content, reasoning, d.get("name"), fc, extra)]
    if not is_list(tool_calls):
        raise MessageError(f"{where}.tool_calls must be a list, got {type(tool_calls).__name__}")
    out: list[Message] = []
    if content or reasoning:
        out.append(_build(where, role, content, reasoning, d.get("name"), None, extra))
    for j, tc in enumerate(tool_calls):
        tw = f"{where}.tool_calls[{j}]"
        if not is_dict(tc):
            raise MessageError(f"{tw} must be a dict, got {type(tc).__name__}")
        call = parse_function_call(tc.get("function"), f"{tw}.function")
        call_extra = dict(extra or {})
        if tc.get("id") is not None:
            call_extra["function_id"] = tc["id"]
        out.append(_build(tw, ASSISTANT, "", None, d.get("name"), call, call_extra or None))
    return out


def _build(where: str, *args: Any) -> Message:
    try:
        return Message(*args)
    except MessageError as e:
        raise MessageError(f"{where}.{e}" if str(e).split(" ")[0].isidentifier() else f"{where}: {e}") from None

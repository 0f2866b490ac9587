"""Messages: the data every agent, model and tool exchanges.

`Message`, `ContentItem` and `FunctionCall` are small slotted classes (not pydantic models) because a
streaming answer creates one message fragment per chunk; they read like dicts (`msg['role']`,
`msg.get('name')`) so code written for Qwen-Agent ports unchanged. `to_message` accepts dicts in our
format or the OpenAI chat format; `to_openai` converts back.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing import TypeGuard

SYSTEM, USER, ASSISTANT, FUNCTION = "system", "user", "assistant", "function"
ROLES = (SYSTEM, USER, ASSISTANT, FUNCTION)
TEXT, IMAGE, FILE, AUDIO, VIDEO = "text", "image", "file", "audio", "video"
CONTENT_KINDS = (TEXT, IMAGE, FILE, AUDIO, VIDEO)
# field names, as Qwen-Agent spells them (msg[ROLE], msg[CONTENT], ...)
ROLE, CONTENT, NAME, REASONING_CONTENT = "role", "content", "name", "reasoning_content"
DEFAULT_SYSTEM_MESSAGE = ""  # Qwen-Agent's default system message: none


class MessageError(ValueError):
    """A message, content item or function call of the wrong shape; the text names the bad field."""


class _DictLike:
    """Dict-style access over the fields of a small class (`_fields`: its slots, and a subclass's added ones)."""

    __slots__: tuple[str, ...] = ()
    _fields: tuple[str, ...] = ()

    def __getitem__(self, key: str) -> Any:
        if key not in self._fields:
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        if key not in self._fields:
            raise KeyError(key)
        setattr(self, key, value)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in self._fields and getattr(self, key) is not None

    def get(self, key: str, default: Any = None) -> Any:
        value = getattr(self, key, None) if key in self._fields else None
        return default if value is None else value

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self._fields)

    __hash__ = None  # pyright: ignore[reportAssignmentType] -- unhashable on purpose: mutable, compared by value

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self._fields if getattr(self, k) is not None)
        return f"{type(self).__name__}({fields})"

    def __str__(self) -> str:
        return str(self.model_dump())

    def model_dump(self) -> dict[str, Any]:
        """The object as a plain dict (each subclass says how)."""
        raise NotImplementedError


class ContentItem(_DictLike):
    """One part of a multimodal message: exactly one of text, image, file, audio, video."""

    __slots__ = CONTENT_KINDS
    _fields = CONTENT_KINDS
    text: str | None
    image: str | None
    file: str | None
    audio: str | None
    video: str | None

    def __init__(
        self,
        text: str | None = None,
        image: str | None = None,
        file: str | None = None,
        audio: str | None = None,
        video: str | None = None,
    ) -> None:
        self.text, self.image, self.file, self.audio, self.video = text, image, file, audio, video
        given = [k for k in CONTENT_KINDS if getattr(self, k) is not None]
        if len(given) != 1:
            got = " and ".join(given) if given else "none"
            raise MessageError(f"content item: exactly one of {', '.join(CONTENT_KINDS)} must be set, got {got}")
        if not isinstance(getattr(self, given[0]), str):
            raise MessageError(
                f"content item: {given[0]} must be a string, got {type(getattr(self, given[0])).__name__}"
            )

    @property
    def kind(self) -> str:
        """Which of text, image, file, audio or video this item holds."""
        for k in CONTENT_KINDS:
            if getattr(self, k) is not None:
                return k
        raise AssertionError("unreachable: validated in __init__")

    type = kind  # Qwen-Agent's name

    @property
    def value(self) -> str:
        return getattr(self, self.kind)

    def get_type_and_value(self) -> tuple[str, str]:
        """(kind, value), e.g. ('image', 'cat.png')."""
        kind = self.kind
        return kind, getattr(self, kind)

    def model_dump(self) -> dict[str, str]:
        return {self.kind: self.value}


class FunctionCall(_DictLike):
    """A call the model asks for: the tool's name and its arguments as a JSON string."""

    __slots__ = ("name", "arguments")
    _fields = __slots__
    name: str
    arguments: str

    def __init__(self, name: str, arguments: str | dict[str, Any] | None = "") -> None:
        _require(name, str, "function_call.name must be a string")
        if arguments is None:
            arguments = ""
        elif isinstance(arguments, dict):
            arguments = json.dumps(arguments, ensure_ascii=False)
        else:
            _require(arguments, str, "function_call.arguments must be a JSON string")
        self.name, self.arguments = name, arguments

    def model_dump(self) -> dict[str, str]:
        return {"name": self.name, "arguments": self.arguments}


class Message(_DictLike):
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
        self.content = _content(content)
        if name is not None:
            _require(name, str, "name must be a string")
        self.name = name
        if isinstance(function_call, dict):
            function_call = _function_call(function_call, "function_call")
        elif function_call is not None:
            _require(function_call, FunctionCall, "function_call must be a dict or FunctionCall")
        self.function_call = function_call
        if reasoning_content is not None:
            _require(reasoning_content, str, "reasoning_content must be a string")
        self.reasoning_content = reasoning_content
        if extra is not None:
            _require(extra, dict, "extra must be a dict")
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


def content_text(content: str | list[ContentItem] | None) -> str:
    """The text of a message content: a string as is, a list's text items joined by newlines."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(item.text for item in content if item.text is not None)


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


def _require(value: object, kind: type[Any] | tuple[type[Any], ...], what: str) -> None:
    """Raise MessageError("`what`, got <type>") unless `value` is a `kind`: the check for callers without type hints."""
    if not isinstance(value, kind):
        raise MessageError(f"{what}, got {_type_name(value)}")


def _type_name(value: object) -> str:
    return type(value).__name__


def not_a_message_list(value: object) -> bool:
    """Whether `value` cannot be a list of messages: not iterable, or a string, a dict or one Message."""
    return isinstance(value, (str, bytes, dict, Message)) or not isinstance(value, Iterable)


def _is_dict(value: object) -> TypeGuard[dict[str, Any]]:
    """Whether `value` is a dict (a JSON object from outside: values of any type)."""
    return isinstance(value, dict)


def _is_list(value: object) -> TypeGuard[list[Any]]:
    """Whether `value` is a list (a JSON array from outside: items of any type)."""
    return isinstance(value, list)


def _is_sequence(value: object) -> TypeGuard[list[Any] | tuple[Any, ...]]:
    """Whether `value` is a list or tuple (a JSON array from outside: items of any type)."""
    return isinstance(value, (list, tuple))


def _content(content: object, where: str = "content") -> str | list[ContentItem]:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if _is_sequence(content):
        items: list[ContentItem] = []
        for i, item in enumerate(content):
            if isinstance(item, ContentItem):
                items.append(item)
            elif _is_dict(item):
                items.append(_content_item(item, f"{where}[{i}]"))
            elif isinstance(item, str):
                items.append(ContentItem(text=item))
            else:
                raise MessageError(f"{where}[{i}] must be a dict or ContentItem, got {type(item).__name__}")
        return items
    raise MessageError(f"{where} must be a string or a list of content items, got {type(content).__name__}")


def _content_item(d: dict[str, Any], where: str) -> ContentItem:
    """A content item from our form ({'text': ...}) or the OpenAI form ({'type': 'image_url', ...})."""
    kind = d.get("type")
    if kind is not None:
        if kind == "text":
            d = {"text": d.get("text")}
        elif kind == "image_url":
            url = d.get("image_url")
            d = {"image": url.get("url") if _is_dict(url) else url}
        elif kind in ("input_audio", "audio"):
            audio = d.get("input_audio") or d.get("audio")
            d = {"audio": audio.get("data") if _is_dict(audio) else audio}
        elif kind in CONTENT_KINDS:
            d = {kind: d.get(kind)}
        else:
            raise MessageError(f"{where}.type {kind!r} is not supported (text, image_url, input_audio)")
    unknown = set(d) - set(CONTENT_KINDS)
    if unknown:
        raise MessageError(f"{where}: unknown key {sorted(unknown)[0]!r}; expected one of {', '.join(CONTENT_KINDS)}")
    try:
        return ContentItem(**d)
    except MessageError as e:
        raise MessageError(f"{where}: {str(e).removeprefix('content item: ')}") from None


def _function_call(d: object, where: str) -> FunctionCall:
    if not _is_dict(d):
        raise MessageError(f"{where} must be a dict with name and arguments, got {type(d).__name__}")
    if "name" not in d:
        raise MessageError(f"{where}.name is missing")
    try:
        return FunctionCall(d["name"], d.get("arguments", ""))
    except MessageError as e:
        raise MessageError(f"{where}: {e}") from None


def to_message(data: dict[str, Any] | Message, where: str = "message") -> Message:
    """One message from a Message or a dict (our format; OpenAI's role `tool` and `developer` too).

    An OpenAI assistant message with several `tool_calls` becomes several messages: use `to_messages`.
    """
    if not isinstance(data, dict):
        _require(data, Message, f"{where} must be a dict or Message")
        return data
    msgs = _from_dict(data, where)
    if len(msgs) != 1:
        raise MessageError(f"{where} holds several tool calls: convert it with to_messages")
    return msgs[0]


def to_messages(data: Iterable[dict[str, Any] | Message]) -> list[Message]:
    """Messages from a list of dicts or Messages; copies, so the caller's objects are never shared."""
    if not_a_message_list(data):
        raise MessageError(f"messages must be a list of messages, got {_type_name(data)}")
    out: list[Message] = []
    for i, m in enumerate(data):
        where = f"messages[{i}]"
        if isinstance(m, Message):
            out.append(Message.copy(m))  # a plain Message, also from a Fragment
        else:
            _require(m, dict, f"{where} must be a dict or Message")
            out.extend(_from_dict(m, where))
    return out


def _from_dict(d: dict[str, Any], where: str) -> list[Message]:
    role = d.get("role")
    if role is None:
        raise MessageError(f"{where}.role is missing")
    if role == "developer":
        role = SYSTEM
    given_extra = d.get("extra")
    if given_extra is not None and not _is_dict(given_extra):
        raise MessageError(f"{where}.extra must be a dict, got {type(given_extra).__name__}")
    extra = dict(given_extra) if given_extra else None
    try:
        content = _content(d.get("content"), f"{where}.content")
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
    fc = _function_call(fc, f"{where}.function_call") if _is_dict(fc) else fc
    reasoning = d.get("reasoning_content")
    tool_calls = d.get("tool_calls")
    if not tool_calls:
        return [_build(where, role, content, reasoning, d.get("name"), fc, extra)]
    if not _is_list(tool_calls):
        raise MessageError(f"{where}.tool_calls must be a list, got {type(tool_calls).__name__}")
    out: list[Message] = []
    if content or reasoning:
        out.append(_build(where, role, content, reasoning, d.get("name"), None, extra))
    for j, tc in enumerate(tool_calls):
        tw = f"{where}.tool_calls[{j}]"
        if not _is_dict(tc):
            raise MessageError(f"{tw} must be a dict, got {type(tc).__name__}")
        call = _function_call(tc.get("function"), f"{tw}.function")
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


def to_openai(
    messages: Iterable[Message],
    image_url: Callable[[str], str] = lambda s: s,
    placeholder_kinds: Iterable[str] = ("file", "audio", "video"),
) -> list[dict[str, Any]]:
    """Messages in the OpenAI chat format: consecutive assistant messages merge into one with `tool_calls`.

    `image_url` turns an image item's value into a URL (the backend uses it to inline local files);
    items of a kind in `placeholder_kinds` become a short text such as ``[file: notes.pdf]``.
    """
    out: list[dict[str, Any]] = []
    placeholders = set(placeholder_kinds)
    open_calls: list[tuple[str, str]] = []  # (id, name) of calls not yet answered
    for n, m in enumerate(messages):
        content = _openai_content(m.content, image_url, placeholders)
        if m.role == FUNCTION:
            fid = (m.extra or {}).get("function_id")
            if fid is None:  # answer the oldest unanswered call of that name
                match = next((c for c in open_calls if c[1] == m.name), open_calls[0] if open_calls else None)
                fid = match[0] if match else f"call_{n}"
            open_calls = [c for c in open_calls if c[0] != fid]
            text = content if isinstance(content, str) else content_text(m.content)
            out.append({"role": "tool", "tool_call_id": fid, "content": text})
            continue
        if m.role == ASSISTANT:
            prev: dict[str, Any] | None = out[-1] if out and out[-1]["role"] == "assistant" else None
            if m.function_call is not None:
                fid = (m.extra or {}).get("function_id") or f"call_{n}"
                open_calls.append((fid, m.function_call.name))
                call = {"id": fid, "type": "function", "function": m.function_call.model_dump()}
                if prev is not None and not (isinstance(content, str) and not content):
                    prev = None  # text after a call: keep it in its own message
                if prev is None:
                    prev = {"role": "assistant", "content": content or None}
                    out.append(prev)
                prev.setdefault("tool_calls", []).append(call)
                continue
            if (
                prev is not None
                and "tool_calls" not in prev
                and isinstance(content, str)
                and isinstance(prev["content"], str)
            ):
                prev["content"] += content
                continue
        d: dict[str, Any] = {"role": m.role, "content": content}
        if m.name is not None and m.role in (USER, ASSISTANT):
            d["name"] = m.name
        out.append(d)
    return out


def _openai_content(
    content: str | list[ContentItem], image_url: Callable[[str], str], placeholders: set[str]
) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for item in content:
        kind = item.kind
        if kind == "text":
            parts.append({"type": "text", "text": item.text})
        elif kind == "image" and kind not in placeholders:
            parts.append({"type": "image_url", "image_url": {"url": image_url(item.value)}})
        else:
            parts.append({"type": "text", "text": f"[{kind}: {item.value}]"})
    if all(p["type"] == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


def from_openai(messages: Iterable[dict[str, Any]]) -> list[Message]:
    """Messages from the OpenAI chat format (same as `to_messages`, named for symmetry)."""
    return to_messages(messages)


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

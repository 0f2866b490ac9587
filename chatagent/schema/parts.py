"""The parts of a message: the role and content-kind names, ContentItem, FunctionCall, and reading them from dicts
(our form or OpenAI's); `MessageError` names the bad field."""

from __future__ import annotations

import json
import mimetypes
import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from chatagent.errors import ChatAgentError

if TYPE_CHECKING:
    from typing import TypeGuard

SYSTEM, USER, ASSISTANT, FUNCTION = "system", "user", "assistant", "function"
ROLES = (SYSTEM, USER, ASSISTANT, FUNCTION)
TEXT, IMAGE, FILE, AUDIO, VIDEO = "text", "image", "file", "audio", "video"
CONTENT_KINDS = (TEXT, IMAGE, FILE, AUDIO, VIDEO)
# field names, as Qwen-Agent spells them (msg[ROLE], msg[CONTENT], ...)
ROLE, CONTENT, NAME, REASONING_CONTENT = "role", "content", "name", "reasoning_content"
DEFAULT_SYSTEM_MESSAGE = ""  # Qwen-Agent's default system message: none


class MessageError(ChatAgentError, ValueError):
    """A message, content item or function call of the wrong shape; the text names the bad field."""


class DictLike:
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


class ContentItem(DictLike):
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


class FunctionCall(DictLike):
    """A call the model asks for: the tool's name and its arguments as a JSON string."""

    __slots__ = ("name", "arguments")
    _fields = __slots__
    name: str
    arguments: str

    def __init__(self, name: str, arguments: str | dict[str, Any] | None = "") -> None:
        require(name, str, "function_call.name must be a string")
        if arguments is None:
            arguments = ""
        elif isinstance(arguments, dict):
            arguments = json.dumps(arguments, ensure_ascii=False)
        else:
            require(arguments, str, "function_call.arguments must be a JSON string")
        self.name, self.arguments = name, arguments

    def model_dump(self) -> dict[str, str]:
        return {"name": self.name, "arguments": self.arguments}


def unique_call_id(given: str | None, taken: set[str]) -> str:
    """The id of a call among the calls of one reply: `given`, or a new one when it is missing or another call of
    the reply has it already (a decision or a result is matched to its call by id: two calls must not share one).
    Adds it to `taken`."""
    cid = given if given and given not in taken else f"call_{uuid.uuid4().hex[:24]}"
    taken.add(cid)
    return cid


def content_text(content: str | list[ContentItem] | None) -> str:
    """The text of a message content: a string as is, a list's text items joined by newlines."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(item.text for item in content if item.text is not None)


def require(value: object, kind: type[Any] | tuple[type[Any], ...], what: str) -> None:
    """Raise MessageError("`what`, got <type>") unless `value` is a `kind`: the check for callers without type hints."""
    if not isinstance(value, kind):
        raise MessageError(f"{what}, got {type_name(value)}")


def type_name(value: object) -> str:
    return type(value).__name__


def is_dict(value: object) -> TypeGuard[dict[str, Any]]:
    """Whether `value` is a dict (a JSON object from outside: values of any type)."""
    return isinstance(value, dict)


def is_list(value: object) -> TypeGuard[list[Any]]:
    """Whether `value` is a list (a JSON array from outside: items of any type)."""
    return isinstance(value, list)


def _is_sequence(value: object) -> TypeGuard[list[Any] | tuple[Any, ...]]:
    """Whether `value` is a list or tuple (a JSON array from outside: items of any type)."""
    return isinstance(value, (list, tuple))


def parse_content(content: object, where: str = "content") -> str | list[ContentItem]:
    """A message's content from a string or a list of ContentItems, dicts (ours or OpenAI's) and strings."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if _is_sequence(content):
        items: list[ContentItem] = []
        for i, item in enumerate(content):
            if isinstance(item, ContentItem):
                items.append(item)
            elif is_dict(item):
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
            d = {"image": url.get("url") if is_dict(url) else url}
        elif kind in ("input_audio", "audio"):
            audio = d.get("input_audio") or d.get("audio")
            d = {"audio": audio.get("data") if is_dict(audio) else audio}
        elif kind == "video_url":
            video = d.get("video_url")
            d = {"video": video.get("url") if is_dict(video) else video}
        elif kind == FILE and is_dict(d.get(FILE)):  # OpenAI's {'type': 'file', 'file': {'file_data': ...}}
            d = {FILE: _openai_file(d[FILE], f"{where}.file")}
        elif kind in CONTENT_KINDS:
            d = {kind: d.get(kind)}
        else:
            raise MessageError(
                f"{where}.type {kind!r} is not supported (text, image_url, input_audio, video_url, file)"
            )
    unknown = set(d) - set(CONTENT_KINDS)
    if unknown:
        raise MessageError(f"{where}: unknown key {sorted(unknown)[0]!r}; expected one of {', '.join(CONTENT_KINDS)}")
    try:
        return ContentItem(**d)
    except MessageError as e:
        raise MessageError(f"{where}: {str(e).removeprefix('content item: ')}") from None


def _openai_file(part: dict[str, Any], where: str) -> str:
    """OpenAI's file part (`file_data`: a data: URL or bare base64; `filename`) as one data: URL, the file name
    kept as its `name` parameter (`chatagent.rag.urls.read_data_url` names the document by it)."""
    unknown = set(part) - {"filename", "file_data", "file_id"}
    if unknown:
        raise MessageError(f"{where}: unknown key {sorted(unknown)[0]!r}; expected file_data and filename")
    data, name = part.get("file_data"), part.get("filename")
    if data is None and "file_id" in part:
        raise MessageError(f"{where}.file_id: uploaded files are not kept here; send the content as file_data")
    if not isinstance(data, str) or not data:
        raise MessageError(f"{where}.file_data must be a data: URL or base64 text, got {type_name(data)}")
    if name is not None and not isinstance(name, str):
        raise MessageError(f"{where}.filename must be a string, got {type_name(name)}")
    if data[:5].lower() != "data:":  # bare base64, as OpenAI's reference shows it
        media = mimetypes.guess_type(name or "")[0] or "application/octet-stream"
        data = f"data:{media};base64,{data}"
    if name:
        head, comma, body = data.partition(",")
        media, *params = head[5:].split(";")
        if not any(p.lower().startswith("name=") for p in params):
            data = "data:" + ";".join([media, "name=" + quote(name, safe=""), *params]) + comma + body
    return data


def parse_function_call(d: object, where: str) -> FunctionCall:
    """A FunctionCall from a dict with `name` and `arguments`; errors name `where`."""
    if not is_dict(d):
        raise MessageError(f"{where} must be a dict with name and arguments, got {type(d).__name__}")
    if "name" not in d:
        raise MessageError(f"{where}.name is missing")
    try:
        return FunctionCall(d["name"], d.get("arguments", ""))
    except MessageError as e:
        raise MessageError(f"{where}: {e}") from None

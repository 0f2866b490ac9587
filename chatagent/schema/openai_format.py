"""Messages to and from the OpenAI chat format."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from chatagent.schema.message import to_messages
from chatagent.schema.parts import ASSISTANT, FUNCTION, USER, ContentItem, content_text

if TYPE_CHECKING:
    from chatagent.schema.message import Message


def to_openai(
    messages: Iterable[Message],
    image_url: Callable[[str], str] = lambda s: s,
    placeholder_kinds: Iterable[str] = ("file", "audio", "video"),
    tool_media: str = "tool",
) -> list[dict[str, Any]]:
    """Messages in the OpenAI chat format: consecutive assistant messages merge into one with `tool_calls`.

    `image_url` turns a media item's value (image, audio, video) into a URL (the backend uses it to inline local
    files); items of a kind in `placeholder_kinds` become a short text such as ``[file: notes.pdf]``. Media items go
    as Qwen-Agent's `qwenvl_oai` sends them: `image_url`, `input_audio` (`data`, and `format` when the name tells
    it), `video_url`. A tool's result with media (a chart, a zoomed image) keeps them in its tool message
    (`tool_media='tool'`, as Qwen-Agent sends them), or, for servers that take only text there (OpenAI's own API),
    gives them in a user message after the turn's tool results (`tool_media='user'`).
    """
    if tool_media not in ("tool", "user"):
        raise ValueError(f"tool_media must be 'tool' or 'user', got {tool_media!r}")
    out: list[dict[str, Any]] = []
    placeholders = set(placeholder_kinds)
    held: list[dict[str, Any]] = []  # media of tool results, for the user message after them (tool_media='user')
    open_calls: dict[str, str] = {}  # id -> name of the calls not yet answered, oldest first
    # (each message costs the loop's own steps and no call: the conversation so far is sent again at every call)
    for n, m in enumerate(messages):
        content = m.content
        if type(content) is not str:
            content = _openai_content(content, image_url, placeholders)
        role, extra = m.role, m.extra
        if held and role != FUNCTION:
            out.append(_tool_media_message(held))
            held = []
        if role == FUNCTION:
            fid = extra.get("function_id") if extra else None
            if fid is None:  # answer the oldest unanswered call of that name
                fid = next((c for c, name in open_calls.items() if name == m.name), next(iter(open_calls), None))
                fid = f"call_{n}" if fid is None else fid
            open_calls.pop(fid, None)
            if not isinstance(content, str) and (tool_media == "user" or all(p["type"] == "text" for p in content)):
                held += [p for p in content if p["type"] != "text"]
                content = content_text(m.content)
            out.append({"role": "tool", "tool_call_id": fid, "content": content})
            continue
        if role == ASSISTANT:
            prev: dict[str, Any] | None = out[-1] if out and out[-1]["role"] == "assistant" else None
            fc = m.function_call
            if fc is not None:
                fid = (extra.get("function_id") if extra else None) or f"call_{n}"
                open_calls[fid] = fc.name
                call = {"id": fid, "type": "function", "function": {"name": fc.name, "arguments": fc.arguments}}
                if prev is not None and not (isinstance(content, str) and not content):
                    prev = None  # text after a call: keep it in its own message
                if prev is None:
                    prev = {"role": "assistant", "content": content or None, "tool_calls": [call]}
                    out.append(prev)
                elif "tool_calls" in prev:
                    prev["tool_calls"].append(call)
                else:
                    prev["tool_calls"] = [call]
                continue
            if prev is not None and isinstance(content, str):
                if "tool_calls" not in prev and isinstance(prev["content"], str):
                    prev["content"] += content
                    continue
                if "tool_calls" in prev and not prev["content"] and m.name is None:
                    prev["content"] = content or None  # text a server sent after a call: the turn's text
                    continue
        d: dict[str, Any] = {"role": role, "content": content}
        if m.name is not None and role in (USER, ASSISTANT):
            d["name"] = m.name
        out.append(d)
    if held:
        out.append(_tool_media_message(held))
    return out


def _tool_media_message(parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {"role": USER, "content": [{"type": "text", "text": "(the media the tool calls above returned)"}, *parts]}


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
        elif kind == "audio" and kind not in placeholders:
            audio = {"data": image_url(item.value)}
            audio_format = _audio_format(item.value)
            if audio_format:
                audio["format"] = audio_format
            parts.append({"type": "input_audio", "input_audio": audio})
        elif kind == "video" and kind not in placeholders:
            parts.append({"type": "video_url", "video_url": {"url": image_url(item.value)}})
        else:
            parts.append({"type": "text", "text": f"[{kind}: {item.value}]"})
    if all(p["type"] == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


_AUDIO_FORMATS = {"wav": "wav", "x-wav": "wav", "wave": "wav", "mp3": "mp3", "mpeg": "mp3"}


def _audio_format(value: str) -> str | None:
    """'wav' or 'mp3' from an audio item's file name or data URL, else None."""
    if value.startswith("data:audio/"):
        return _AUDIO_FORMATS.get(value[11:].split(";", 1)[0].lower())
    name = value.split("?", 1)[0].rsplit("/", 1)[-1]
    return _AUDIO_FORMATS.get(name.rsplit(".", 1)[-1].lower()) if "." in name else None


def from_openai(messages: Iterable[dict[str, Any]]) -> list[Message]:
    """Messages from the OpenAI chat format (same as `to_messages`, named for symmetry)."""
    return to_messages(messages)

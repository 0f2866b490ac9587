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
    open_calls: list[tuple[str, str]] = []  # (id, name) of calls not yet answered
    for n, m in enumerate(messages):
        content = _openai_content(m.content, image_url, placeholders)
        if held and m.role != FUNCTION:
            out.append(_tool_media_message(held))
            held = []
        if m.role == FUNCTION:
            fid = (m.extra or {}).get("function_id")
            if fid is None:  # answer the oldest unanswered call of that name
                match = next((c for c in open_calls if c[1] == m.name), open_calls[0] if open_calls else None)
                fid = match[0] if match else f"call_{n}"
            open_calls = [c for c in open_calls if c[0] != fid]
            if not isinstance(content, str) and (tool_media == "user" or all(p["type"] == "text" for p in content)):
                held += [p for p in content if p["type"] != "text"]
                content = content_text(m.content)
            out.append({"role": "tool", "tool_call_id": fid, "content": content})
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
            if prev is not None and isinstance(content, str):
                if "tool_calls" not in prev and isinstance(prev["content"], str):
                    prev["content"] += content
                    continue
                if "tool_calls" in prev and not prev["content"] and m.name is None:
                    prev["content"] = content or None  # text a server sent after a call: the turn's text
                    continue
        d: dict[str, Any] = {"role": m.role, "content": content}
        if m.name is not None and m.role in (USER, ASSISTANT):
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

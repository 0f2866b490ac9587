"""A conversation as the native protocols see it (Anthropic, Gemini, Bedrock, the Responses API): the system text
apart, then turns that alternate between the user's side (text, media, tool results) and the model's (its text,
its calls, its reasoning), each call tied to its result by id.

Every native backend builds its request from these turns, so that how chatagent's messages group into a
provider's turns (consecutive assistant messages are one turn; a function message answers the oldest open call of
its name when it has no id) is decided once. Media are read here too: `media_data` gives a local file, a `file://`
or a `data:` URL as (mime type, base64), an http(s) URL as itself.
"""

from __future__ import annotations

import base64
import mimetypes
import os
from dataclasses import dataclass, field
from typing import Any, cast

from chatagent.schema import ASSISTANT, FUNCTION, SYSTEM, ContentItem, Message, content_text
from chatagent.utils.jsonlenient import loads_lenient

#: the key of an assistant message's `extra` that carries what a provider needs back next turn (Anthropic's signed
#: thinking blocks, the Responses API's reasoning items, Gemini's thought signatures): {'provider': ..., ...}
REASONING_STATE = "reasoning_state"


@dataclass(slots=True)
class Call:
    """A call the model made: its id, the function's name, its arguments as JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(slots=True)
class Result:
    """A tool's result: the id and name of its call, its content (text or media items)."""

    call_id: str
    name: str
    content: str | list[ContentItem]


@dataclass(slots=True)
class Turn:
    """One side's turn. `role` 'user': `content` (and `results`, the tool results it answers with, first);
    'assistant': `parts` in order (text as str, calls as `Call`), `reasoning` (the thoughts shown), and `state`
    (the provider's own reasoning state, `REASONING_STATE`, from the turn's first message)."""

    role: str
    content: list[ContentItem] = field(default_factory=list[ContentItem])
    results: list[Result] = field(default_factory=list[Result])
    parts: list[str | Call] = field(default_factory=list[str | Call])
    reasoning: str = ""
    state: dict[str, Any] | None = None


def system_text(messages: list[Message]) -> str:
    """The text of the conversation's system messages, joined."""
    return "\n\n".join(t for m in messages if m.role == SYSTEM and (t := content_text(m.content)))


def conversation_turns(messages: list[Message]) -> list[Turn]:
    """The non-system messages as alternating turns (see the module docstring). Consecutive user-side messages merge
    into one turn, as do consecutive assistant messages; an empty turn is left out."""
    turns: list[Turn] = []
    open_calls: list[tuple[str, str]] = []  # (id, name) of calls not answered yet
    for n, m in enumerate(messages):
        if m.role == SYSTEM:
            continue
        if m.role == ASSISTANT:
            turn = turns[-1] if turns and turns[-1].role == ASSISTANT else None
            if turn is None:
                turn = Turn(ASSISTANT, state=_state(m))
                turns.append(turn)
            elif turn.state is None:
                turn.state = _state(m)
            if m.reasoning_content:
                turn.reasoning += m.reasoning_content
            text = content_text(m.content)
            if text:
                if turn.parts and isinstance(turn.parts[-1], str):
                    turn.parts[-1] += text
                else:
                    turn.parts.append(text)
            if m.function_call is not None:
                fid = (m.extra or {}).get("function_id") or f"call_{n}"
                open_calls.append((fid, m.function_call.name))
                turn.parts.append(Call(str(fid), m.function_call.name, m.function_call.arguments or "{}"))
            continue
        turn = turns[-1] if turns and turns[-1].role != ASSISTANT else None
        if turn is None:
            turn = Turn("user")
            turns.append(turn)
        if m.role == FUNCTION:
            fid = (m.extra or {}).get("function_id")
            if fid is None:  # answer the oldest open call of that name
                match = next((c for c in open_calls if c[1] == m.name), open_calls[0] if open_calls else None)
                fid = match[0] if match else f"call_{n}"
            name = m.name or next((c[1] for c in open_calls if c[0] == fid), "")
            open_calls = [c for c in open_calls if c[0] != fid]
            turn.results.append(Result(str(fid), name, m.content))
            continue
        turn.content += [ContentItem(text=m.content)] if isinstance(m.content, str) else m.content
    return [t for t in turns if t.parts or t.content or t.results or t.reasoning]


def _state(m: Message) -> dict[str, Any] | None:
    state = (m.extra or {}).get(REASONING_STATE)
    return state if isinstance(state, dict) else None  # pyright: ignore[reportUnknownVariableType]


def media_data(value: str) -> tuple[str, str] | str:
    """A media item's value as (mime type, base64 data) when it is a local file, a file:// or a data: URL; an
    http(s) URL as itself (for providers that fetch URLs). FileNotFoundError for a missing file."""
    if value.startswith(("http://", "https://")):
        return value
    if value.startswith("data:"):
        head, _, data = value[5:].partition(",")
        mime, _, encoding = head.partition(";")
        if encoding != "base64":
            data = base64.b64encode(data.encode()).decode("ascii")
        return mime or "application/octet-stream", data
    path = os.path.expanduser(value[len("file://") :] if value.startswith("file://") else value)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"media file not found: {value!r} (give a local file path, a file:// or an http(s) URL)"
        )
    mime = mimetypes.guess_type(path)[0] or "application/octet-stream"
    with open(path, "rb") as f:
        return mime, base64.b64encode(f.read()).decode("ascii")


def call_input(arguments: str) -> dict[str, Any]:
    """A call's arguments (JSON text, as the model wrote it) as the object native protocols send back: read
    leniently; anything that is not an object goes as {'arguments': text}, so that the turn still stands."""
    value: Any = None
    try:
        value = loads_lenient(arguments) if arguments.strip() else {}
    except ValueError:
        pass
    if isinstance(value, dict):
        return cast("dict[str, Any]", value)
    return {"arguments": arguments}


def placeholder(item: ContentItem) -> str:
    """The text that stands for a media item a provider cannot take."""
    return f"[{item.kind}: {os.path.basename(item.value)}]"


__all__ = [
    "REASONING_STATE",
    "Call",
    "Result",
    "Turn",
    "call_input",
    "conversation_turns",
    "media_data",
    "placeholder",
    "system_text",
]

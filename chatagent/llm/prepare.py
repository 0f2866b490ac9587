"""What every model call does to its input first: function schemas in one shape, text that encodes as UTF-8
(lone surrogates replaced), a placeholder for each media item a text-only model cannot take, and tool results
marked as untrusted data (`as_data`).

Text from tools and documents may hold instructions written by anyone (a web page, a file, an e-mail): a model
that obeys them runs what an attacker wrote. Such text reaches the model between `<untrusted-data ...>` markers
that name where it came from, with the markers' name taken out of the text itself so it cannot close them early:
also when it is disguised (`_MARKER`: any case, fullwidth or Cyrillic look-alike letters, invisible characters
between them, any dash or none), as a reader would still take it for the marker.
"""

from __future__ import annotations

import logging
import operator
import os
import re
from collections.abc import Iterable, Sequence
from typing import Any, cast

from chatagent.schema import FUNCTION, ContentItem, FunctionCall, Message, to_message

logger = logging.getLogger("chatagent.llm")


def normalize_functions(functions: Iterable[Any] | None) -> list[dict[str, Any]] | None:
    """Function schemas as `{'name', 'description', 'parameters'}` dicts (OpenAI tool dicts accepted)."""
    if not functions:
        return None
    out: list[dict[str, Any]] = []
    for given in functions:
        f = json_object(given)
        if f is None:
            f = json_object(getattr(given, "function", None))  # a BaseTool's schema
            if f is None:
                raise TypeError(f"a function must be a schema dict or a tool, got {type(given).__name__}")
        inner = json_object(f.get("function"))
        if inner is not None and f.get("type") == "function":
            f = inner
        if not isinstance(f.get("name"), str):
            raise ValueError(f"function schema without a name: {f!r:.200}")
        out.append(
            {
                "name": f["name"],
                "description": f.get("description", ""),
                "parameters": f.get("parameters") or {"type": "object", "properties": {}},
            }
        )
    return out


def json_object(value: object) -> dict[str, Any] | None:
    """`value` if it is a JSON object (a dict, from JSON or a config: its keys are strings), else None."""
    return cast("dict[str, Any]", value) if isinstance(value, dict) else None


_SURROGATE = re.compile("[\ud800-\udfff]")


def fix_surrogates(text: str) -> str:
    """`text` with surrogate pairs joined and lone surrogates replaced by U+FFFD."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def valid_unicode(m: Message) -> Message:
    """`m` encodable as UTF-8: lone surrogates (from broken decoding upstream) in its text become U+FFFD.

    Without this, one such character makes the request's JSON encoding fail before anything is sent.
    Non-text content items (paths, URLs) are left as they are: they must still name their files.
    """
    fc = m.function_call
    texts = [m.content if isinstance(m.content, str) else "", m.name or "", m.reasoning_content or ""]
    if fc is not None:
        texts += [fc.name, fc.arguments]
    if not isinstance(m.content, str):
        texts += [item.text for item in m.content if item.text is not None]
    if not any(_SURROGATE.search(t) for t in texts):
        return m
    logger.warning("invalid Unicode (lone surrogates) in a %s message replaced with U+FFFD", m.role)
    if isinstance(m.content, str):
        content: str | list[ContentItem] = fix_surrogates(m.content)
    else:
        content = [ContentItem(text=fix_surrogates(i.text)) if i.text is not None else i for i in m.content]
    return m.copy(
        content=content,
        name=fix_surrogates(m.name) if m.name else m.name,
        reasoning_content=fix_surrogates(m.reasoning_content) if m.reasoning_content else m.reasoning_content,
        function_call=FunctionCall(fix_surrogates(fc.name), fix_surrogates(fc.arguments)) if fc else None,
    )


def without_media(m: Message) -> Message:
    """A text-only model gets a readable placeholder for each image, audio or video item."""
    if isinstance(m.content, str) or all(item.kind in ("text", "file") for item in m.content):
        return m
    items = [
        item if item.kind in ("text", "file") else ContentItem(text=f"[{item.kind}: {os.path.basename(item.value)}]")
        for item in m.content
    ]
    return m.copy(content=items)


# What a model may read as the markers' name: each letter in any case, fullwidth or as a Cyrillic/Greek look-alike,
# invisible characters (soft hyphen, zero-width and bidi marks, joiners, variation selectors, tags) anywhere in it,
# any dash (or an underscore, a space, nothing) between its two words.
_LOOKS = {
    "u": "uｕυս", "n": "nｎո", "t": "tｔтτ", "r": "rｒг", "s": "sｓѕ", "e": "eｅеє", "d": "dｄԁ", "a": "aａаα",
}  # fmt: skip
_INVISIBLE = "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufe00-\ufe0f\ufeff\U000e0000-\U000e007f]*"
_DASHES = "[-_ \u2010-\u2015\u2212\u2e3a\u2e3b\ufe58\ufe63\uff0d\uff3f]?"


def _spelled(word: str) -> str:
    return _INVISIBLE.join(f"[{_LOOKS[c]}]" for c in word)


_MARKER = re.compile(_spelled("untrusted") + _INVISIBLE + _DASHES + _INVISIBLE + _spelled("data"), re.IGNORECASE)


def untrusted(text: str, source: str) -> str:
    """`text` between markers that say it is data from `source` (a tool, files), not instructions."""
    source = _MARKER.sub("untrusted_data", source).replace('"', "'")
    return f'<untrusted-data source="{source}">\n{_MARKER.sub("untrusted_data", text)}\n</untrusted-data>'


_MARKED = re.compile(r'\A<untrusted-data source="[^"]*">\n(.*)\n</untrusted-data>\Z', re.DOTALL)


def unmarked(text: str) -> str:
    """The data inside `untrusted`'s markers (a test model that answers from a tool's result reads it so); any
    other text as it is."""
    found = _MARKED.match(text)
    return found.group(1) if found else text


_OPENING = re.compile(r'<untrusted-data source="([^"]*)">\n')


def marked_sources(text: str) -> list[str]:
    """The sources named by the `untrusted` markers in `text` (a marker's name cannot occur inside marked text)."""
    return _OPENING.findall(text)


def as_data(m: Message | dict[str, Any]) -> Message | dict[str, Any]:
    """A tool's result (a function message, or its dict) with its text marked as untrusted data (`untrusted`); any
    other message as it is."""
    if isinstance(m, dict):
        if m.get("role") != FUNCTION:
            return m
        m = to_message(m)
    elif m.role != FUNCTION:
        return m
    source = f"tool {m.name}" if m.name else "a tool"
    content = m.content
    if isinstance(content, str):
        return m.copy(content=untrusted(content, source))
    texts = [i for i, item in enumerate(content) if item.kind == "text"]
    if not texts:
        return m
    items = list(content)
    first, last = texts[0], texts[-1]
    items[first] = ContentItem(
        text=f'<untrusted-data source="{source}">\n' + _MARKER.sub("untrusted_data", items[first].value)
    )
    for i in texts[1:]:
        items[i] = ContentItem(text=_MARKER.sub("untrusted_data", items[i].value))
    items[last] = ContentItem(text=items[last].value + "\n</untrusted-data>")
    return m.copy(content=items)


#: a run's tool results as marked (`marked_data`): id of the message -> (it, its fields, its marked copy, the copy's)
Marked = dict[int, tuple[Message, tuple[Any, ...], Message, tuple[Any, ...]]]


def marked_data(messages: Sequence[Message | dict[str, Any]], memo: Marked) -> list[Message | dict[str, Any]]:
    """`as_data` of each of `messages`, a tool's result with text content marked once per `memo` (a run's): its
    marked copy is given again as long as neither it nor the copy changed (a model call's input is its own)."""
    out: list[Message | dict[str, Any]] = []
    for m in messages:
        if type(m) is not Message or type(m.content) is not str:
            out.append(as_data(m))
            continue
        if m.role != FUNCTION:
            out.append(m)
            continue
        known = memo.get(id(m))  # (the memo holds the message: its id is not reused while it is there)
        if known is None or LIVE_FIELDS(m) != known[1] or LIVE_FIELDS(known[2]) != known[3]:
            data = cast("Message", as_data(m))
            known = memo[id(m)] = (m, fields(m), data, fields(data))
        out.append(known[2])
    return out


#: a message's fields as they are now, in the order `fields` keeps them: compared with what `fields` kept, they tell
#: a change (one comparison, no call, for each message a model call is given again)
LIVE_FIELDS = operator.attrgetter("role", "content", "name", "function_call", "reasoning_content", "extra")


def fields(m: Message) -> tuple[Any, ...]:
    """What a message is, kept to tell whether it changed: its fields, its content list and its extra copied (they
    may change in place)."""
    content, extra = m.content, m.extra
    return (m.role, content if type(content) is str else list(content), m.name, m.function_call,
            m.reasoning_content, dict(extra) if extra is not None else None)  # fmt: skip

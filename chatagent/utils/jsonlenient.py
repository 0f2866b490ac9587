"""Lenient JSON: any JSON value from what a model wrote, and the repair behind it.

    parse_json('{"city": "Paris",}')                 # -> {'city': 'Paris'}
    repair_json("{'a': True}")                       # -> '{"a": true}'

`parse_json` tries strict JSON (orjson), then json5, then `repair_json`, which fixes what models really
emit: code fences, text around the object, single quotes, trailing commas, Python literals
(`True`, `None`), unquoted keys and words, unescaped newlines and quotes in strings, a JSON string
inside a string, and an object cut off at the end of a stream.

A bottom-layer module: the model layer (prompt-based function calls), the tools and the agents all read
model JSON through it. Failures raise ToolArgumentError, whose text is short enough to send back to the model.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import orjson

from chatagent.errors import ChatAgentError

logger = logging.getLogger("chatagent.tools")  # the name the warnings had before this module was split out

MAX_REPAIR_CHARS = 200_000  # longer text is not repaired (it is not a tool call a model wrote by mistake)
MAX_JSON5_CHARS = 20_000  # json5 is pure Python (about 5 us a character): longer text goes straight to repair


class ToolArgumentError(ChatAgentError, ValueError):
    """Arguments the model gave cannot be used; the message says which field and what was expected.
    A ValueError too, as Qwen-Agent's `_verify_json_format_args` raises."""


_MISSING = object()


def parse_json(text: str, _depth: int = 0) -> Any:
    """Any JSON value from model output, leniently (see the module docstring). '' gives None."""
    if not text.strip():
        return None
    value = _strict(text)
    if value is _MISSING:
        value = _json5(text)
        if value is not _MISSING:
            logger.warning("read lenient JSON (json5) from the model: %.200r", text)
    if value is _MISSING:
        value = _strict(repair_json(text)) if len(text) <= MAX_REPAIR_CHARS else _MISSING
        if value is _MISSING:
            raise ToolArgumentError(f"arguments are not valid JSON: {_json_problem(text)}")
        logger.warning("repaired malformed JSON from the model: %.200r", text)
    if isinstance(value, str) and _depth < 2:
        inner = value.strip()
        if inner[:1] in ("{", "[") or inner.startswith("```"):  # a JSON string inside a string
            try:
                return parse_json(inner, _depth + 1)
            except ToolArgumentError:
                return value
    return value


_LONG_NUMBER = re.compile(r"\d{19}")


def _strict(text: str) -> Any:
    try:
        if _LONG_NUMBER.search(text):  # orjson reads integers beyond 64 bits as floats: keep them exact
            import json

            return json.loads(text)
        return orjson.loads(text)
    except (ValueError, RecursionError):  # orjson.JSONDecodeError and json's are ValueErrors
        return _MISSING


_ODD_ESCAPE = re.compile(r"""\\[^"\\/bfnrtu'\n]""")


def _json5(text: str) -> Any:
    # json5 reads "\U" as "U" (JavaScript rules); leave backslashes like those in Windows paths to repair_json
    if len(text) > MAX_JSON5_CHARS or _ODD_ESCAPE.search(text):
        return _MISSING
    import json5

    try:
        return json5.loads(text)
    except Exception:  # json5 raises ValueError, and RecursionError or others on odd input
        return _MISSING


def _json_problem(text: str) -> str:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError as e:
        return str(e).split(":", 1)[0][:120]
    except (ValueError, RecursionError):
        return "unreadable"
    return "unreadable"


def json_kind(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    return {list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__
    )


_FENCE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\n?(.*?)(?:```|\Z)", re.S)
_WORD = re.compile(r"[^\W\d][\w$-]*|\$[\w$-]*")
_NUMBER = re.compile(r"[-+]?(?:\d[\d_]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_LITERALS = {
    "true": "true",
    "True": "true",
    "TRUE": "true",
    "false": "false",
    "False": "false",
    "FALSE": "false",
    "null": "null",
    "None": "null",
    "none": "null",
    "NULL": "null",
    "nil": "null",
    "undefined": "null",
    "NaN": "null",
    "Infinity": "null",
}
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}
_CLOSERS = {"{": "}", "[": "]"}


def repair_json(text: str) -> str:
    """Best-effort strict JSON from what a model wrote (linear time; the result may still be invalid)."""
    fence = _FENCE.search(text)
    if fence and ("{" in fence.group(1) or "[" in fence.group(1)):
        text = fence.group(1)
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        return text.strip()
    i = min(starts)
    n = len(text)
    out: list[str] = []
    stack: list[str] = []
    while i < n:
        c = text[i]
        if c == '"' or c == "'":
            i = _string(text, i, out)
        elif c in "{[":
            stack.append(c)
            out.append(c)
            i += 1
        elif c in "}]":
            _drop_trailing_comma(out)
            if out and out[-1] == ":":
                out.append("null")
            if stack:
                out.append(_CLOSERS[stack.pop()])
            i += 1
            if not stack:
                break
        elif c == "," or c == ":":
            if c == "," and out and out[-1] in (",", "[", "{"):
                i += 1  # a doubled or leading comma
                continue
            out.append(c)
            i += 1
        elif c in " \t\r\n":
            i += 1
        elif c == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif c == "/" and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
        else:
            m = _NUMBER.match(text, i)
            if m and m.end() > i:
                _separate(out)
                out.append(_number(m.group()))
                i = m.end()
                continue
            m = _WORD.match(text, i)
            if m:
                _separate(out)
                word = m.group()
                i = m.end()
                j = i
                while j < n and text[j] in " \t":
                    j += 1
                if j < n and text[j] == ":":
                    out.append(_quote(word))  # an unquoted key
                elif word in _LITERALS:
                    out.append(_LITERALS[word])
                else:
                    out.append(_quote(word))  # a bare word as a value
                continue
            i += 1  # a stray character
    _drop_trailing_comma(out)
    if out and out[-1] == ":":
        out.append("null")
    while stack:
        out.append(_CLOSERS[stack.pop()])
    return "".join(out)


def _separate(out: list[str]) -> None:
    """Insert a missing comma between two values (`[1 2]`, `{"a": 1 "b": 2}`)."""
    if out and out[-1] not in ("{", "[", ",", ":"):
        out.append(",")


def _drop_trailing_comma(out: list[str]) -> None:
    while out and out[-1] == ",":
        out.pop()


def _number(token: str) -> str:
    token = token.replace("_", "").lstrip("+")
    neg = token.startswith("-")
    body = token[1:] if neg else token
    mantissa, e, exp = body.partition("e") if "e" in body else body.partition("E")
    if mantissa.startswith("."):
        mantissa = "0" + mantissa
    if mantissa.endswith("."):
        mantissa = mantissa[:-1]
    if len(mantissa) > 1 and mantissa[0] == "0" and mantissa[1] != ".":
        mantissa = mantissa.lstrip("0") or "0"
        if mantissa.startswith("."):
            mantissa = "0" + mantissa
    result = ("-" if neg else "") + mantissa + (e + exp if exp else "")
    try:
        float(result)
    except ValueError:
        return _quote(token)
    return result


def _quote(s: str) -> str:
    return '"' + "".join(_ESCAPES.get(ch, ch) if ch in _ESCAPES or ch < " " else ch for ch in s) + '"'


def _string(text: str, i: int, out: list[str]) -> int:
    """Copy the string starting at text[i] as a double-quoted JSON string; return the index after it.

    A quote that does not end the string (the next non-space character is not , : } ] or the end) is
    taken as part of it, which repairs unescaped quotes such as `"say "hi" now"` and `'it's'`.
    """
    quote = text[i]
    n = len(text)
    _separate(out)
    buf = ['"']
    i += 1
    while i < n:
        c = text[i]
        if c == "\\":
            nxt = text[i + 1] if i + 1 < n else ""
            if nxt in ('"', "\\", "/", "b", "f", "n", "r", "t"):
                buf.append("\\" + nxt)
                i += 2
            elif nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2 : i + 6] or ""):
                buf.append(text[i : i + 6])
                i += 6
            elif nxt == "'":
                buf.append("'")
                i += 2
            elif nxt == "":
                i += 1
            else:
                buf.append("\\\\")  # a lone backslash, as in a Windows path
                i += 1
        elif c == quote:
            j = i + 1
            while j < n and text[j] in " \t\r\n":
                j += 1
            if j >= n or text[j] in ",:}]":
                i += 1
                break
            buf.append(_ESCAPES.get(c, c))
            i += 1
        elif c in _ESCAPES or c < " ":
            buf.append(_ESCAPES.get(c) or f"\\u{ord(c):04x}")
            i += 1
        else:
            buf.append(c)
            i += 1
    buf.append('"')
    out.append("".join(buf))
    return i


def json_copy(value: Any) -> Any:
    """A copy of a JSON value's dicts and lists, the rest shared (strings, numbers: immutable); several times
    faster than copy.deepcopy, which took most of making a tool's schema of its own, or checking one unchanged."""
    if type(value) is dict:
        return {k: json_copy(v) if type(v) in _CONTAINERS else v for k, v in value.items()}
    if type(value) is list:
        return [json_copy(v) if type(v) in _CONTAINERS else v for v in value]
    return value


_CONTAINERS = (dict, list)


def loads_lenient(text: str) -> Any:
    """JSON as models write it, via `parse_json` (JSON, json5, then repair).

    A stream cut off inside a member's key (`{"a": 1, "b`) is one more case here: the unfinished
    member is dropped. Raises ValueError if nothing works.
    """
    try:
        return parse_json(text)
    except ToolArgumentError as e:
        error = e
    cut = _cut_unfinished_member(text)
    if cut is not None:
        try:
            return parse_json(cut)
        except ToolArgumentError:
            pass
    raise ValueError(str(error))


def parse_partial(text: str) -> Any:
    """The value parsed so far from JSON that is still streaming (it may stop anywhere: in a string, a number, a
    key): strict JSON, then repaired, then with an unfinished member dropped; None when nothing parses yet. Quiet:
    a stream cut short is not a model's mistake, so nothing is logged."""
    if not text.strip() or len(text) > MAX_REPAIR_CHARS:
        return None
    value = _strict(text)
    if value is _MISSING:
        value = _strict(repair_json(text))
    if value is _MISSING:
        cut = _cut_unfinished_member(text)
        value = _strict(repair_json(cut)) if cut is not None else _MISSING
    return None if value is _MISSING else value


def _cut_unfinished_member(text: str) -> str | None:
    """`text` up to its last comma outside strings, if it ends inside an open object or list."""
    depth = 0
    quote = ""
    escaped = False
    last_comma = -1
    for i, c in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
        elif c == "," and depth > 0:
            last_comma = i
    return text[:last_comma] if depth > 0 and last_comma > 0 else None


__all__ = [
    "json_copy",
    "MAX_JSON5_CHARS",
    "MAX_REPAIR_CHARS",
    "ToolArgumentError",
    "json_kind",
    "loads_lenient",
    "parse_json",
    "parse_partial",
    "repair_json",
]

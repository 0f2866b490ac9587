"""Tool arguments from the model: lenient parsing, validation against the schema, readable errors.

    parse_arguments('{"city": "Paris",}')            # -> {'city': 'Paris'}
    validate_arguments({'n': '3'}, schema)           # -> {'n': 3} when schema says integer

Parsing tries strict JSON (orjson), then json5, then `repair_json`, which fixes what models really
emit: code fences, text around the object, single quotes, trailing commas, Python literals
(`True`, `None`), unquoted keys and words, unescaped newlines and quotes in strings, a JSON string
inside a string, and an object cut off at the end of a stream. Validation covers the JSON-Schema
subset tools use (type, properties, required, enum, const, items, additionalProperties, anyOf/oneOf/
allOf, $ref to $defs, min/max, lengths, pattern, default) and coerces where it is safe ("3" -> 3 for
an integer, "true" -> True, 5 -> "5" for a string, a JSON string for an array or object).

Every failure raises ToolArgumentError, whose text is short enough to send back to the model.
"""

from __future__ import annotations

import copy
import logging
import math
import re
from collections.abc import Iterable
from typing import Any

import orjson

from chatagent.errors import ChatAgentError

logger = logging.getLogger("chatagent.tools")

MAX_REPAIR_CHARS = 200_000  # longer text is not repaired (it is not a tool call a model wrote by mistake)
MAX_JSON5_CHARS = 20_000  # json5 is pure Python (about 5 us a character): longer text goes straight to repair
_MAX_ERRORS = 3


class ToolArgumentError(ChatAgentError, ValueError):
    """Arguments the model gave cannot be used; the message says which field and what was expected.
    A ValueError too, as Qwen-Agent's `_verify_json_format_args` raises."""


# ---- parsing ------------------------------------------------------------------------------------------------

_MISSING = object()


def parse_arguments(text: str | dict | None) -> dict:
    """The arguments as a dict: strict JSON, then json5, then repair. Raises ToolArgumentError."""
    if text is None:
        return {}
    if isinstance(text, dict):
        return text
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", "replace")
    if not isinstance(text, str):
        raise ToolArgumentError(f"arguments must be a JSON object, got {type(text).__name__}")
    value = parse_json(text)
    if value is None and not text.strip():
        return {}
    if not isinstance(value, dict):
        raise ToolArgumentError(f"arguments must be a JSON object, got {_json_kind(value)}")
    return value


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


def _json_kind(value: Any) -> str:
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


# ---- validation ---------------------------------------------------------------------------------------------

_INT_STR = re.compile(r"\s*[-+]?\d+\s*")
_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean (true or false)",
    "array": "a list",
    "object": "an object",
    "null": "null",
}


def validate_arguments(args: dict, schema: dict | None) -> dict:
    """`args` checked against the JSON Schema `schema`: a new dict with safe coercions and defaults applied.

    Raises ToolArgumentError naming the fields that are wrong and what was expected.
    """
    if not isinstance(args, dict):
        raise ToolArgumentError(f"arguments must be a JSON object, got {_json_kind(args)}")
    if not schema:
        return dict(args)
    errors: list[str] = []
    try:
        value = _Validator(schema, errors).check(args, schema, "")
    except RecursionError:
        raise ToolArgumentError("arguments are nested too deeply") from None
    if errors:
        shown = errors[:_MAX_ERRORS]
        more = f" (and {len(errors) - _MAX_ERRORS} more)" if len(errors) > _MAX_ERRORS else ""
        raise ToolArgumentError("; ".join(shown) + more)
    return value


class _Invalid(Exception):
    """One value does not fit; the message is complete."""


class _Validator:
    __slots__ = ("root", "errors")

    def __init__(self, root: dict, errors: list[str]) -> None:
        self.root = root
        self.errors = errors

    def check(self, value: Any, schema: Any, path: str) -> Any:
        """`value` validated (coerced); errors are appended, and the value returned as is where wrong."""
        try:
            return self._check(value, schema, path)
        except _Invalid as e:
            self.errors.append(str(e))
            return value

    def _check(self, value: Any, schema: Any, path: str) -> Any:
        if not isinstance(schema, dict) or not schema:
            return value
        ref = schema.get("$ref")
        if isinstance(ref, str):
            target = self._resolve(ref)
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            value = self._check(value, target, path)
            schema = rest
            if not schema:
                return value
        for sub in schema.get("allOf") or ():
            value = self._check(value, sub, path)
        branches = schema.get("anyOf") or schema.get("oneOf")
        if branches:
            value = self._branches(value, branches, path)
        types = schema.get("type")
        if types is not None:
            value = self._type(value, types, path)
        if "const" in schema and value != schema["const"]:
            raise _Invalid(f"{_name(path)} must be {_short(schema['const'])}, got {_short(value)}")
        enum = schema.get("enum")
        if enum is not None and value not in enum:
            value = self._enum(value, enum, path)
        if isinstance(value, dict):
            return self._object(value, schema, path)
        if isinstance(value, list):
            return self._array(value, schema, path)
        if isinstance(value, str):
            self._string(value, schema, path)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            self._number(value, schema, path)
        return value

    def _resolve(self, ref: str) -> Any:
        if not ref.startswith("#"):
            return {}
        node: Any = self.root
        for part in ref[1:].strip("/").split("/"):
            if not part:
                continue
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or part not in node:
                return {}
            node = node[part]
        return node

    def _branches(self, value: Any, branches: list, path: str) -> Any:
        for sub in branches:
            errors: list[str] = []
            trial = _Validator(self.root, errors)
            try:
                result = trial._check(value, sub, path)
            except _Invalid:
                continue
            if not errors:
                return result
        kinds = [_describe(self._resolve(b["$ref"]) if isinstance(b, dict) and "$ref" in b else b) for b in branches]
        raise _Invalid(f"{_name(path)} must be {' or '.join(dict.fromkeys(kinds))}, got {_short(value)}")

    def _type(self, value: Any, types: Any, path: str) -> Any:
        options = types if isinstance(types, list) else [types]
        for t in options:
            if _is_type(value, t):
                return value
        for t in options:
            coerced = _coerce(value, t)
            if coerced is not _MISSING:
                return coerced
        expected = " or ".join(_TYPE_NAMES.get(t, str(t)) for t in options)
        raise _Invalid(f"{_name(path)} must be {expected}, got {_short(value)}")

    def _enum(self, value: Any, enum: list, path: str) -> Any:
        for option in enum:  # "3" for 3, 3 for "3", a different case of a string
            if isinstance(value, str) and not isinstance(option, str):
                if _coerce(value, _json_type(option)) == option:
                    return option
            elif isinstance(option, str) and _num(value) and str(value) == option:
                return option
        if isinstance(value, str):
            folded = [o for o in enum if isinstance(o, str) and o.casefold() == value.strip().casefold()]
            if len(folded) == 1:
                return folded[0]
        options = ", ".join(_short(o) for o in enum[:12]) + (", ..." if len(enum) > 12 else "")
        raise _Invalid(f"{_name(path)} must be one of {options}, got {_short(value)}")

    def _object(self, value: dict, schema: dict, path: str) -> dict:
        props = schema.get("properties")
        props = props if isinstance(props, dict) else {}
        required = schema.get("required")
        required = [r for r in required if isinstance(r, str)] if isinstance(required, list) else []
        out = {}
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            sub = props.get(key)
            if sub is None:
                if extra is False:
                    accepted = ", ".join(props) or "none"
                    self.errors.append(f"{_name(_join(path, key))} is not an accepted argument (accepted: {accepted})")
                    continue
                out[key] = self.check(item, extra, _join(path, key)) if isinstance(extra, dict) else item
                continue
            if item is None and key not in required and not _allows_null(sub, self):
                continue  # null for an optional argument: as if left out
            out[key] = self.check(item, sub, _join(path, key))
        for key in required:
            if key not in out:
                self.errors.append(f"{_name(_join(path, key))} is required")
        for key, sub in props.items():
            if key not in out and isinstance(sub, dict) and "default" in sub:
                out[key] = copy.deepcopy(sub["default"])
        _bounds(len(out), schema, "minProperties", "maxProperties", path, "properties")
        return out

    def _array(self, value: list, schema: dict, path: str) -> list:
        _bounds(len(value), schema, "minItems", "maxItems", path, "items")
        items = schema.get("items")
        prefix = schema.get("prefixItems")
        if not isinstance(items, dict) and not isinstance(prefix, list):
            return value
        out = []
        for i, item in enumerate(value):
            sub = prefix[i] if isinstance(prefix, list) and i < len(prefix) else items
            out.append(self.check(item, sub, f"{path}[{i}]") if isinstance(sub, dict) else item)
        return out

    def _string(self, value: str, schema: dict, path: str) -> None:
        _bounds(len(value), schema, "minLength", "maxLength", path, "characters")
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            try:
                ok = re.search(pattern, value) is not None
            except re.error:
                ok = True
            if not ok:
                raise _Invalid(f"{_name(path)} must match the pattern {pattern!r}, got {_short(value)}")

    def _number(self, value: float, schema: dict, path: str) -> None:
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if _num(lo) and value < lo:
            raise _Invalid(f"{_name(path)} must be >= {lo}, got {_short(value)}")
        if _num(hi) and value > hi:
            raise _Invalid(f"{_name(path)} must be <= {hi}, got {_short(value)}")
        xlo, xhi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
        if _num(xlo) and value <= xlo:
            raise _Invalid(f"{_name(path)} must be > {xlo}, got {_short(value)}")
        if _num(xhi) and value >= xhi:
            raise _Invalid(f"{_name(path)} must be < {xhi}, got {_short(value)}")


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _bounds(size: int, schema: dict, lo_key: str, hi_key: str, path: str, unit: str) -> None:
    lo, hi = schema.get(lo_key), schema.get(hi_key)
    if _num(lo) and size < lo:
        raise _Invalid(f"{_name(path)} must have at least {lo} {unit}, got {size}")
    if _num(hi) and size > hi:
        raise _Invalid(f"{_name(path)} must have at most {hi} {unit}, got {size}")


def _allows_null(schema: Any, v: _Validator) -> bool:
    if not isinstance(schema, dict):
        return True
    if "$ref" in schema:
        return _allows_null(v._resolve(schema["$ref"]), v)
    t = schema.get("type")
    if t is not None:
        return t == "null" or (isinstance(t, list) and "null" in t)
    branches = schema.get("anyOf") or schema.get("oneOf")
    if branches:
        return any(_allows_null(b, v) for b in branches)
    if "enum" in schema:
        return None in schema["enum"]
    return "const" not in schema or schema["const"] is None


def _is_type(value: Any, t: str) -> bool:
    if t == "string":
        return isinstance(value, str)
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if t == "boolean":
        return isinstance(value, bool)
    if t == "object":
        return isinstance(value, dict)
    if t == "array":
        return isinstance(value, list)
    if t == "null":
        return value is None
    return True  # an unknown type name: not ours to reject


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if value is None:
        return "null"
    return "string"


def _coerce(value: Any, t: str) -> Any:
    """`value` converted to JSON type `t` where that is safe and unambiguous, else _MISSING."""
    if t == "integer":
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            if _INT_STR.fullmatch(value):
                return int(value)
            f = _float(value)
            if f is not None and f.is_integer():
                return int(f)
    elif t == "number":
        if isinstance(value, str):
            if _INT_STR.fullmatch(value):
                return int(value)
            f = _float(value)
            if f is not None:
                return f
    elif t == "string":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
    elif t == "boolean":
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
    elif t in ("array", "object") and isinstance(value, str) and value.strip()[:1] in ("[", "{"):
        try:
            parsed = parse_json(value)
        except ToolArgumentError:
            return _MISSING
        if _is_type(parsed, t):
            return parsed
    elif t == "null" and isinstance(value, str) and value.strip() in ("null", "None"):
        return None
    return _MISSING


def _float(s: str) -> float | None:
    try:
        f = float(s.strip())
    except ValueError:
        return None
    return f if math.isfinite(f) else None


def _describe(schema: Any) -> str:
    if not isinstance(schema, dict):
        return "a value"
    if "enum" in schema:
        return "one of " + ", ".join(_short(o) for o in schema["enum"][:6])
    if "const" in schema:
        return _short(schema["const"])
    t = schema.get("type")
    if isinstance(t, list):
        return " or ".join(_TYPE_NAMES.get(x, str(x)) for x in t)
    if isinstance(t, str):
        return _TYPE_NAMES.get(t, t)
    return "a value of another shape"


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _name(path: str) -> str:
    return f"'{path}'" if path else "the arguments"


def _short(value: Any, limit: int = 40) -> str:
    if isinstance(value, str):
        text = repr(value) if len(value) <= limit else repr(value[:limit]) + "..."
        return text
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


# ---- names --------------------------------------------------------------------------------------------------


def unknown_tool_message(name: str, available: Iterable[str]) -> str:
    """What the model is told when it calls a tool that does not exist: the closest name and all names."""
    import difflib

    names = sorted(available)
    if not names:
        return f"Error: there is no tool named {name!r}; no tools are available. Answer without tools."
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.5)
    if not close:
        folded = {n.casefold(): n for n in names}
        close = [folded[name.casefold()]] if name.casefold() in folded else []
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return f"Error: there is no tool named {name!r}.{hint} Available tools: {', '.join(names)}."


__all__ = [
    "ToolArgumentError",
    "parse_arguments",
    "parse_json",
    "repair_json",
    "validate_arguments",
    "unknown_tool_message",
]

"""Tool arguments checked against the tool's JSON Schema, with safe coercions and readable errors.

    validate_arguments({'n': '3'}, schema)           # -> {'n': 3} when schema says integer

Covers the JSON-Schema subset tools use (type, properties, required, enum, const, items, additionalProperties,
anyOf/oneOf/allOf, $ref to $defs, min/max, lengths, pattern, default) and coerces where it is safe ("3" -> 3 for
an integer, "true" -> True, 5 -> "5" for a string, a JSON string for an array or object).
Every failure raises ToolArgumentError naming the fields that are wrong and what was expected. A number that is not
finite (NaN, Infinity: lenient JSON reads them) is refused wherever it is, whatever the schema says: a rule such as
`args['amount'] > 100` is false for NaN, so an approval predicate would let it through.
"""

from __future__ import annotations

import copy
import math
import re
from typing import TYPE_CHECKING, Any, TypeGuard

from chatagent.utils.jsonlenient import ToolArgumentError, json_kind, parse_json

if TYPE_CHECKING:
    from typing_extensions import TypeIs

# JSON from outside (a model's arguments, a tool's JSON Schema) is untyped data: values are `Any` at this boundary.
JSONObject = dict[str, Any]
JSONArray = list[Any]


def is_json_object(value: object) -> TypeIs[JSONObject]:
    """Whether `value` is a JSON object (a dict: JSON's keys are strings)."""
    return isinstance(value, dict)


def is_json_array(value: object) -> TypeIs[JSONArray]:
    """Whether `value` is a JSON array (a list)."""
    return isinstance(value, list)


_MAX_ERRORS = 3
_IMMUTABLE = frozenset((str, int, float, bool, type(None)))
_MISSING = object()

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


def validate_arguments(args: object, schema: JSONObject | None) -> JSONObject:
    """`args` checked against the JSON Schema `schema`: a new dict with safe coercions and defaults applied.

    Raises ToolArgumentError naming the fields that are wrong and what was expected (`args` not an object, too).
    """
    if not is_json_object(args):
        raise ToolArgumentError(f"arguments must be a JSON object, got {json_kind(args)}")
    check_finite(args)
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


def check_finite(value: object, path: str = "") -> None:
    """Raise ToolArgumentError when `value` (a JSON value) holds a number that is not finite (NaN, Infinity)."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ToolArgumentError(f"{_name(path)} must be a finite number, got {value}")
    elif is_json_object(value):
        for k, v in value.items():
            check_finite(v, _join(path, k))
    elif is_json_array(value):
        for i, v in enumerate(value):
            check_finite(v, f"{path}[{i}]")


class _Invalid(Exception):
    """One value does not fit; the message is complete."""


class _Validator:
    __slots__ = ("root", "errors")

    def __init__(self, root: JSONObject, errors: list[str]) -> None:
        self.root = root
        self.errors = errors

    def check(self, value: Any, schema: object, path: str) -> Any:
        """`value` validated (coerced); errors are appended, and the value returned as is where wrong."""
        try:
            return self._check(value, schema, path)
        except _Invalid as e:
            self.errors.append(str(e))
            return value

    def _check(self, value: Any, schema: object, path: str) -> Any:
        if not is_json_object(schema) or not schema:
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
        if isinstance(value, str):  # the common kinds first
            self._string(value, schema, path)
        elif isinstance(value, (int, float)):
            if not isinstance(value, bool):
                self._number(value, schema, path)
        elif is_json_object(value):
            return self._object(value, schema, path)
        elif is_json_array(value):
            return self._array(value, schema, path)
        return value

    def _resolve(self, ref: str) -> Any:
        if not ref.startswith("#"):
            return {}
        node: Any = self.root
        for part in ref[1:].strip("/").split("/"):
            if not part:
                continue
            part = part.replace("~1", "/").replace("~0", "~")
            if not is_json_object(node) or part not in node:
                return {}
            node = node[part]
        return node

    def _branches(self, value: Any, branches: JSONArray, path: str) -> Any:
        for sub in branches:
            errors: list[str] = []
            trial = _Validator(self.root, errors)
            try:
                result = trial._check(value, sub, path)
            except _Invalid:
                continue
            if not errors:
                return result
        kinds = [_describe(self._resolve(b["$ref"]) if is_json_object(b) and "$ref" in b else b) for b in branches]
        raise _Invalid(f"{_name(path)} must be {' or '.join(dict.fromkeys(kinds))}, got {_short(value)}")

    def _type(self, value: Any, types: Any, path: str) -> Any:
        options: JSONArray = [types] if isinstance(types, str) or not is_json_array(types) else types
        for t in options:
            if _is_type(value, t):
                return value
        for t in options:
            coerced = _coerce(value, t)
            if coerced is not _MISSING:
                return coerced
        expected = " or ".join(_TYPE_NAMES.get(t, str(t)) for t in options)
        raise _Invalid(f"{_name(path)} must be {expected}, got {_short(value)}")

    def _enum(self, value: Any, enum: JSONArray, path: str) -> Any:
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

    def _object(self, value: JSONObject, schema: JSONObject, path: str) -> JSONObject:
        given_props = schema.get("properties")
        props: JSONObject = given_props if is_json_object(given_props) else {}
        given_required = schema.get("required")
        required = [r for r in given_required if isinstance(r, str)] if is_json_array(given_required) else []
        out: JSONObject = {}
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            sub = props.get(key)
            if sub is None:
                if extra is False:
                    accepted = ", ".join(props) or "none"
                    self.errors.append(f"{_name(_join(path, key))} is not an accepted argument (accepted: {accepted})")
                    continue
                out[key] = self.check(item, extra, _join(path, key)) if is_json_object(extra) else item
                continue
            if item is None and key not in required and not self._allows_null(sub):
                continue  # null for an optional argument: as if left out
            out[key] = self.check(item, sub, _join(path, key))
        for key in required:
            if key not in out:
                self.errors.append(f"{_name(_join(path, key))} is required")
        for key, sub in props.items():
            if key not in out and is_json_object(sub) and "default" in sub:
                default = sub["default"]  # a copy, unless it cannot change (the usual kinds of default)
                out[key] = default if type(default) in _IMMUTABLE else copy.deepcopy(default)
        _bounds(len(out), schema, "minProperties", "maxProperties", path, "properties")
        return out

    def _array(self, value: JSONArray, schema: JSONObject, path: str) -> JSONArray:
        _bounds(len(value), schema, "minItems", "maxItems", path, "items")
        items = schema.get("items")
        given_prefix = schema.get("prefixItems")
        if not is_json_object(items) and not is_json_array(given_prefix):
            return value
        prefix: JSONArray = given_prefix if is_json_array(given_prefix) else []
        out: JSONArray = []
        for i, item in enumerate(value):
            sub = prefix[i] if i < len(prefix) else items
            out.append(self.check(item, sub, f"{path}[{i}]") if is_json_object(sub) else item)
        return out

    def _string(self, value: str, schema: JSONObject, path: str) -> None:
        _bounds(len(value), schema, "minLength", "maxLength", path, "characters")
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            try:
                ok = re.search(pattern, value) is not None
            except re.error:
                ok = True
            if not ok:
                raise _Invalid(f"{_name(path)} must match the pattern {pattern!r}, got {_short(value)}")

    def _number(self, value: float, schema: JSONObject, path: str) -> None:
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

    def _allows_null(self, schema: object) -> bool:
        if not is_json_object(schema):
            return True
        if "$ref" in schema:
            return self._allows_null(self._resolve(schema["$ref"]))
        t = schema.get("type")
        if t is not None:
            return t == "null" or (is_json_array(t) and "null" in t)
        branches = schema.get("anyOf") or schema.get("oneOf")
        if branches:
            return any(self._allows_null(b) for b in branches)
        if "enum" in schema:
            return None in schema["enum"]
        return "const" not in schema or schema["const"] is None


def _num(x: object) -> TypeGuard[int | float]:
    """A JSON number: an int or a float, not a bool."""
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _bounds(size: int, schema: JSONObject, lo_key: str, hi_key: str, path: str, unit: str) -> None:
    lo, hi = schema.get(lo_key), schema.get(hi_key)
    if _num(lo) and size < lo:
        raise _Invalid(f"{_name(path)} must have at least {lo} {unit}, got {size}")
    if _num(hi) and size > hi:
        raise _Invalid(f"{_name(path)} must have at most {hi} {unit}, got {size}")


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


def _describe(schema: object) -> str:
    if not is_json_object(schema):
        return "a value"
    if "enum" in schema:
        return "one of " + ", ".join(_short(o) for o in schema["enum"][:6])
    if "const" in schema:
        return _short(schema["const"])
    t = schema.get("type")
    if is_json_array(t):
        return " or ".join(_TYPE_NAMES.get(x, str(x)) for x in t)
    if isinstance(t, str):
        return _TYPE_NAMES.get(t, t)
    return "a value of another shape"


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _name(path: str) -> str:
    return f"'{path}'" if path else "the arguments"


def _short(value: object, limit: int = 40) -> str:
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


__all__ = ["JSONArray", "JSONObject", "is_json_array", "is_json_object", "validate_arguments"]

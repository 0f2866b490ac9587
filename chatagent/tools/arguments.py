"""Tool arguments from the model: parsed into a dict, validated against the schema, readable errors.

    parse_arguments('{"city": "Paris",}')            # -> {'city': 'Paris'}
    validate_arguments({'n': '3'}, schema)           # -> {'n': 3} when schema says integer

Parsing is lenient JSON (`chatagent.utils.jsonlenient`); validation is `chatagent.tools.validation`. Both are
re-exported here, where they always were. Every failure raises ToolArgumentError, whose text is short enough
to send back to the model.
"""

from __future__ import annotations

from collections.abc import Iterable

from chatagent.tools.validation import (
    JSONArray,
    JSONObject,
    check_finite,
    is_json_array,
    is_json_object,
    validate_arguments,
)
from chatagent.utils.jsonlenient import (
    MAX_JSON5_CHARS,
    MAX_REPAIR_CHARS,
    ToolArgumentError,
    json_kind,
    parse_json,
    repair_json,
)


def parse_arguments(text: object) -> JSONObject:
    """The arguments as a dict: from a JSON string (strict JSON, then json5, then repair), bytes, a dict (as is)
    or None (no arguments). Raises ToolArgumentError for anything else."""
    if not isinstance(text, str):  # a string is the common case
        if text is None:
            return {}
        if is_json_object(text):
            return text
        if not isinstance(text, (bytes, bytearray)):
            raise ToolArgumentError(f"arguments must be a JSON object, got {type(text).__name__}")
        text = bytes(text).decode("utf-8", "replace")
    value = parse_json(text)
    if value is None and not text.strip():
        return {}
    if not is_json_object(value):
        raise ToolArgumentError(f"arguments must be a JSON object, got {json_kind(value)}")
    return value


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
    "JSONArray",
    "JSONObject",
    "MAX_JSON5_CHARS",
    "MAX_REPAIR_CHARS",
    "ToolArgumentError",
    "is_json_array",
    "is_json_object",
    "parse_arguments",
    "parse_json",
    "repair_json",
    "check_finite",
    "validate_arguments",
    "unknown_tool_message",
]

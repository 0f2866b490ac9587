"""A grammar for one tool's arguments, for a model too small to copy them out of a question reliably.

`argument_grammar(function, question)` is a llama.cpp GBNF grammar for the JSON object of the tool's required
arguments, keys in the schema's order, laid out as the model writes JSON (a key per line, two spaces in: the layout
fixed, so no token goes to choosing it; SmolLM2-135M closes a string in it more often than in compact JSON):

- a string that names something (a city, an item, a person) is one of the question's spans of up to five words
  (each word trimmed of punctuation), so the model quotes rather than invents; spans that hold the request's verb
  (a word of the tool's name), a number, or begin or end with a function word ("to", "the") are left out when others
  remain: offered "Pay Bob 500", `pay(to=...)` wrote the whole request; a string the tool's model composes (an
  expression, a query, a message: its name or description says so, see `COMPOSED`) is free text of at most
  `MAX_CHARS` characters;
- a number or integer is one of the numbers written in the question, when it has any;
- a boolean, an enum or a const is one of its values.

A schema this does not cover (nested objects, arrays, no required argument) gets None: the caller uses the JSON
schema instead.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_SPAN_WORDS = 5
MAX_CHARS = 200
COMPOSED = re.compile(
    r"expr|formula|equation|code|query|search|text|message|body|content|subject|prompt|sql|script|command|"
    r"instruction|description|summary|note|title|question|url|path|pattern",
    re.IGNORECASE,
)
_WORD = re.compile(r"\S+")
_NUMBER = re.compile(r"(?<![\d.])-?\d+(?:\.\d+)?")
_TRIM = "\"'`.,;:!?()[]{}<>«»“”‘’"
_FREE_STRING = r'"\"" ([^"\\\x7F\x00-\x1F] | "\\" ["\\/bfnrt]){0,' + str(MAX_CHARS) + r'} "\""'
_FREE_NUMBER = '"-"? [0-9]{1,15} ("." [0-9]{1,10})?'
_FREE_INTEGER = '"-"? [0-9]{1,15}'


def spans(question: str) -> list[str]:
    """The question's runs of one to `MAX_SPAN_WORDS` words (each trimmed of punctuation), each once, in order."""
    words = [w for w in (w.strip(_TRIM) for w in _WORD.findall(question)) if w]
    found: dict[str, None] = {}
    for i in range(len(words)):
        for j in range(i + 1, min(len(words), i + MAX_SPAN_WORDS) + 1):
            found.setdefault(" ".join(words[i:j]))
    return list(found)


_FUNCTION_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "to",
        "of",
        "for",
        "from",
        "in",
        "on",
        "at",
        "by",
        "with",
        "and",
        "or",
        "my",
        "our",
        "your",
        "his",
        "her",
        "their",
        "this",
        "that",
        "these",
        "those",
        "me",
        "us",
        "him",
        "them",
        "please",
    ]
)


def naming_spans(question: str, tool: str = "") -> list[str]:
    """The spans (`spans`) that may name something: none holding a word of the tool's name (the request's verb:
    "pay" in "Pay Bob 500"), a number, or beginning or ending with a function word; all of them when that
    leaves none."""
    verbs = {w for w in re.split(r"[^a-z0-9]+", tool.lower()) if w}
    kept: list[str] = []
    for span in spans(question):
        words = span.lower().split()
        if words[0] in _FUNCTION_WORDS or words[-1] in _FUNCTION_WORDS:
            continue
        if any(w in verbs or _NUMBER.fullmatch(w) for w in words):
            continue
        kept.append(span)
    return kept or spans(question)


def numbers(question: str) -> list[int | float]:
    """The numbers written in the question (digits, a sign, a decimal point), each once."""
    return list(dict.fromkeys(float(n) if "." in n else int(n) for n in _NUMBER.findall(question)))


def _literal(value: Any) -> str:
    """A GBNF literal matching exactly the JSON of `value`."""
    text = json.dumps(value, ensure_ascii=False)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _choice(values: list[Any]) -> str:
    return "(" + " | ".join(_literal(v) for v in values) + ")"


def _value(name: str, schema: dict[str, Any], question: str, tool: str = "") -> str | None:
    """The GBNF of one argument's value, or None when its schema is not a plain scalar."""
    if "const" in schema:
        return _literal(schema["const"])
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return _choice(list(schema["enum"]))  # pyright: ignore[reportUnknownArgumentType]
    kind = schema.get("type")
    if kind == "boolean":
        return '("true" | "false")'
    if kind in ("number", "integer"):
        found = [n for n in numbers(question) if kind == "number" or isinstance(n, int)]
        if found:
            return _choice(found)
        return _FREE_NUMBER if kind == "number" else _FREE_INTEGER
    if kind == "string" and not ({"pattern", "format"} & schema.keys()):
        composed = COMPOSED.search(name) or COMPOSED.search(str(schema.get("description") or ""))
        found = [] if composed else naming_spans(question, tool)
        return _choice(found) if found else _FREE_STRING
    return None


def argument_grammar(function: dict[str, Any], question: str) -> str | None:
    """A GBNF grammar of the tool's required arguments as JSON (see the module docstring), or None."""
    params: dict[str, Any] = function.get("parameters") or {}
    props: dict[str, Any] = params.get("properties") or {}
    required = [k for k in props if k in (params.get("required") or ())]
    if params.get("type", "object") != "object" or not required:
        return None
    parts: list[str] = []
    for key in required:
        value = _value(
            key, props[key] if isinstance(props[key], dict) else {}, question, str(function.get("name") or "")
        )
        if value is None:
            return None
        parts.append(_literal(key)[:-1] + ': " ' + value)  # "\"key\": " then the value
    return 'root ::= "{\\n  " ' + ' ",\\n  " '.join(parts) + ' "\\n}"'


__all__ = ["COMPOSED", "argument_grammar", "naming_spans", "numbers", "spans"]

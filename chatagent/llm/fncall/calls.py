"""Reading one function call out of the text a model wrote: JSON (leniently), Python-style `name(k=v)`,
and Qwen3-Coder's `<function=name><parameter=k>v</parameter>`."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from chatagent.llm.prepare import json_object
from chatagent.utils.jsonlenient import loads_lenient

_NAME_KEYS = ("name", "function", "tool", "tool_name", "function_name")
_ARGS_KEYS = ("arguments", "parameters", "args", "input", "params")
_NAME_RE = re.compile(r"""["']?(?:name|function|tool_name)["']?\s*:\s*["']([^"'\n]+)["']""")
_ARGS_RE = re.compile(r"""["']?(?:arguments|parameters|args)["']?\s*:\s*""")
_XML_FUNCTION = re.compile(r"<function=([^>\s]+)\s*>")
_XML_PARAM = re.compile(r"<parameter=([^>\s]+)\s*>\n?(.*?)(?:\n?</parameter>|$)", re.DOTALL)
_FENCE = re.compile(r"^```[\w+-]*[ \t]*\n?(.*?)(?:\n?```\s*)?$", re.DOTALL)


def parse_call_text(text: str, schemas: dict[str, dict[str, Any]] | None = None) -> tuple[str, str] | None:
    """(name, arguments as JSON) from the text inside one `<tool_call>`, or None if no name is found.

    Lenient about what models really write: code fences, decoration before the JSON, Python dicts,
    single quotes, trailing commas, truncated JSON, `parameters` for `arguments`, arguments given as
    a JSON string, `name(key=value)` calls, and Qwen3-Coder's `<function=name><parameter=k>v</parameter>`.
    """
    text = text.strip()
    if "<function=" in text:
        return _parse_xml_call(text, schemas or {})
    start = text.find("{")
    if start != -1:
        try:
            obj = json_object(loads_lenient(text[start:]))
        except ValueError:
            obj = None
        if obj is not None:
            found = _name_and_args(obj)
            if found is not None:
                return found
        m = _NAME_RE.search(text, start)
        if m:
            a = _ARGS_RE.search(text, m.end()) or _ARGS_RE.search(text, start)
            raw = text[a.end() :].strip() if a else "{}"
            if raw.endswith("}") and raw.count("{") < raw.count("}"):
                raw = raw[:-1]  # the closing brace of the outer object
            return m.group(1).strip(), _arguments_json(raw)
    return _parse_python_call(_strip_fence(text))


def parse_qwen_args(text: str) -> str:
    """The text after `✿ARGS✿` as JSON arguments (kept as written if it is no JSON object, e.g. code)."""
    text = text.strip().lstrip(":：").strip()
    if not text:
        return "{}"
    if text.startswith("{"):
        end = text.rfind("}")
        if end > 0:
            text = text[: end + 1]  # drop comments after the object
    return _arguments_json(text)


def _name_and_args(obj: dict[str, Any]) -> tuple[str, str] | None:
    inner = json_object(obj.get("function"))
    if inner is not None:  # {"type": "function", "function": {...}}
        return _name_and_args(inner)
    name_key = next((k for k in _NAME_KEYS if isinstance(obj.get(k), str) and obj[k].strip()), None)
    if name_key is None:
        return None
    args_key = next((k for k in _ARGS_KEYS if k in obj), None)
    args: Any
    if args_key is not None:
        args = obj[args_key]
    else:  # the arguments written beside the name
        args = {k: v for k, v in obj.items() if k != name_key and k != "type"}
    return obj[name_key].strip(), _arguments_json(args)


def _arguments_json(args: Any) -> str:
    """Arguments as a JSON string: objects dumped, strings parsed leniently first, else kept as they are."""
    if isinstance(args, str):
        text = args.strip()
        if not text:
            return "{}"
        try:
            args = loads_lenient(text)
        except ValueError:
            return args
        if isinstance(args, str):  # a JSON string holding the JSON
            try:
                inner = loads_lenient(args)
            except ValueError:
                return text
            obj = json_object(inner)
            if obj is not None:
                args = obj
        if not isinstance(args, dict):
            return text
    if args is None:
        return "{}"
    return json.dumps(args, ensure_ascii=False)


def _parse_xml_call(text: str, schemas: dict[str, dict[str, Any]]) -> tuple[str, str] | None:
    m = _XML_FUNCTION.search(text)
    if m is None:
        return None
    name = m.group(1).strip()
    props = json_object((schemas.get(name) or {}).get("properties")) or {}
    args: dict[str, Any] = {}
    for p in _XML_PARAM.finditer(text, m.end()):
        key, value = p.group(1).strip(), p.group(2)
        value = value.split("</function>")[0].strip("\n")
        kind = (json_object(props.get(key)) or {}).get("type")
        if kind != "string":
            try:
                value = loads_lenient(value)
            except ValueError:
                pass
        args[key] = value
    return name, json.dumps(args, ensure_ascii=False)


def _parse_python_call(text: str) -> tuple[str, str] | None:
    """`name(key=value, ...)` or `name({...})`, as some small models write calls."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return None
    if not isinstance(node, ast.Call) or not isinstance(node.func, (ast.Name, ast.Attribute)):
        return None
    name = ast.unparse(node.func)
    try:
        args = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
        if len(node.args) == 1 and not node.keywords:
            value = ast.literal_eval(node.args[0])
            obj = json_object(value)
            args = obj if obj is not None else {"input": value}
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return None
    return name, json.dumps(args, ensure_ascii=False)


def _strip_fence(text: str) -> str:
    if text.startswith("```"):
        m = _FENCE.match(text)
        if m:
            return m.group(1).strip()
    return text

"""A finished trace (`chatagent.run.traces.Trace`) as the JSON the store keeps and the viewer shows.

    {"id", "owner", "kind", "name", "title", "started", "duration", "status": "ok" | "error", "error",
     "usage": {"input_tokens", "output_tokens", "cost", "calls"},
     "messages": [message dicts],     # each message once: a model call's "input" and "output" are their indexes
     "functions": [tool schema lists], # likewise: a model call's "functions" is an index (None: no tools)
     "steps": [{"id", "parent", "kind", "name", "start", "duration", "error", ...}, ...]}

A model step also has "model_type", "cfg" (its generation settings), "usage" ({"input_tokens", "output_tokens",
"cost"}); a tool step "call_id", "arguments", "result", "error_kind", "cached"; a step of a crew, a flow or an
evaluation, or a handoff, retrieval or memory event, its "data". A text longer than MAX_TEXT characters is cut
there with a note saying how much was left out.

`encode` writes it with orjson, which serializes the messages and the rest in C (a message object through
`_default`): the recorder's cost is paid once per trace, and mostly not in Python.
"""

from __future__ import annotations

import operator
from typing import Any, cast

import orjson

from chatagent.schema import ContentItem, FunctionCall, Message

MAX_TEXT = 1_000_000  # characters of one text in a trace; the rest is left out, saying so


def trace_body(trace: Any, duration: float | None, error: str | None) -> dict[str, Any]:
    """The trace (a `chatagent.run.traces.Trace`, which this takes apart: its steps become the body's) that took
    `duration` seconds and failed with `error` (None: it did not), as a dict for `encode`."""
    messages: list[Any] = []
    seen: dict[int, int] = {}  # id(message) -> its index (the trace's steps keep the messages alive)
    functions: list[Any] = []
    seen_functions: dict[int, int] = {}
    last: dict[Any, tuple[Any, list[int]]] = {}  # each run's last model call: its input, their indexes
    tokens_in = tokens_out = calls = 0
    cost: float | None = None
    failed = error
    for step in trace.steps:
        kind = step["kind"]
        if kind == "model":
            given = step["input"] or ()
            parent = step["parent"]
            before = last.get(parent)
            # a tool loop's next call gets the same messages again, and more: only the new ones are looked up
            if before is not None and len(given) >= len(before[0]) and all(map(operator.is_, before[0], given)):
                at = before[1][:]
                new = given[len(before[0]) :]
            else:
                at, new = [], given
            for m in new:
                found = seen.get(id(m))
                if found is None:
                    found = seen[id(m)] = len(messages)
                    messages.append(m)
                at.append(found)
            last[parent] = (given, at)
            step["input"] = at
            out: list[int] = []
            for m in step["output"] or ():
                found = seen.get(id(m))
                if found is None:
                    found = seen[id(m)] = len(messages)
                    messages.append(m)
                out.append(found)
            step["output"] = out
            fns = step["functions"]
            if fns is not None:
                found = seen_functions.get(id(fns))
                if found is None:
                    found = seen_functions[id(fns)] = len(functions)
                    functions.append(fns)
                step["functions"] = found
            pt, ct, c = step["usage"]
            step["usage"] = {"input_tokens": pt, "output_tokens": ct, "cost": c}
            tokens_in += pt or 0
            tokens_out += ct or 0
            calls += 1
            if c is not None:
                cost = (cost or 0.0) + c
        elif kind == "tool":
            arguments, result = step["arguments"], step["result"]
            if arguments is not None and len(arguments) > MAX_TEXT:
                step["arguments"] = _text(arguments)
            if type(result) is str and len(result) > MAX_TEXT:
                step["result"] = _text(result)
        else:
            step.pop("previous", None)
            usage = step.get("usage")
            if usage is not None:
                pt, ct, c = usage
                step["usage"] = {"input_tokens": pt, "output_tokens": ct, "cost": c}
            if kind == "run" and failed is None and step.get("error"):
                failed = step["error"]
        error_text = step.get("error")
        if error_text is not None and len(error_text) > MAX_TEXT:
            step["error"] = _text(error_text)
    return {
        "version": 1, "id": trace.id, "owner": trace.owner, "kind": trace.kind, "name": trace.name,
        "title": trace.title, "started": trace.started, "duration": duration,
        "status": "error" if failed else "ok", "error": _text(failed) if failed else None,
        "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out, "cost": cost, "calls": calls},
        "messages": messages, "functions": functions, "steps": trace.steps,
    }  # fmt: skip


def encode(body: dict[str, Any]) -> bytes:
    """`body` (from `trace_body`) as JSON bytes."""
    return orjson.dumps(body, default=_default, option=orjson.OPT_NON_STR_KEYS)


def _default(value: Any) -> Any:
    """What orjson cannot write itself: a message as its dict (its text cut at MAX_TEXT; its parts written by orjson
    in turn), a function call, a pydantic model as its dump, sets and tuples as lists, the rest as its text."""
    if type(value) is Message:
        d: dict[str, Any] = {"role": value.role, "content": value.content}
        content = value.content
        if type(content) is str and len(content) > MAX_TEXT:
            d["content"] = _text(content)
        if value.name is not None:
            d["name"] = value.name
        if value.function_call is not None:
            d["function_call"] = value.function_call
        if value.reasoning_content is not None:
            d["reasoning_content"] = value.reasoning_content
        if value.extra is not None:
            d["extra"] = value.extra
        return d
    if isinstance(value, (FunctionCall, ContentItem)):
        return value.model_dump()
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        try:
            return dump(mode="json")
        except TypeError:  # a model_dump of another kind
            return dump()
    if isinstance(value, (set, frozenset)):
        return list(cast("set[Any]", value))
    return _text(str(value))


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else "" if value is None else str(value)
    if len(text) > MAX_TEXT:
        return text[:MAX_TEXT] + f"\n[… {len(text) - MAX_TEXT} more characters not recorded]"
    return text


__all__ = ["MAX_TEXT", "encode", "trace_body"]

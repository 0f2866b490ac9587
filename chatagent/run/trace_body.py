"""A finished trace (`chatagent.run.traces.Trace`) as the JSON the store keeps (version 2, compact: the
per-call steps of a tool loop are arrays, what repeats is kept once), which `chatagent.sessions.traces.expanded`
turns into the shape the viewer shows (version 1's, which old rows have already).

    {"version": 2, "id", "owner", "kind", "name", "title", "started", "duration", "status": "ok" | "error", "error",
     "usage": {"input_tokens", "output_tokens", "cost", "calls"},
     "messages": [[role, content, name, call name, call arguments, reasoning, extra]],  # each message once
     "functions": [tool schema lists], "cfgs": [generation settings],  # each once; a model call holds indexes
     "refs": [message indexes],       # the messages each model call added to an earlier call's input
     "steps": [step, ...]}            # a step's id is its place, from 1

A model call is an array ["model", parent, start, duration, name, model_type, base, first, count, out, outs,
input_tokens, output_tokens, cost, functions, cfg, error]: its input is step `base`'s input (null: none) and
refs[first:first + count], its reply messages[out:out + outs]; a tool call ["tool", parent, start, duration, name,
call_id, arguments, result, cached, error, error_kind]; their start (from the trace's) and duration in whole
microseconds. Any other step (the run, a crew's task, a flow's step, an evaluation's case, a handoff, retrieval,
memory or interrupt event) is a dict {"id", "parent", "kind", "name", "start", "duration", "error", "data", ...}
as in version 1. A text longer than MAX_TEXT characters is cut there with a note saying how much was left out.

`encode` writes it with orjson, which serializes the steps and the rest in C (a message object through
`_default`): the recorder's cost is paid once per trace, and mostly not in Python.
"""

from __future__ import annotations

from typing import Any, cast

import orjson

from chatagent.schema import ContentItem, FunctionCall, Message

MAX_TEXT = 1_000_000  # characters of one text in a trace; the rest is left out, saying so


def trace_body(trace: Any, duration: float | None, error: str | None) -> dict[str, Any]:
    """The trace (a `chatagent.run.traces.Trace`, whose steps are already in their final form) that took `duration`
    seconds and failed with `error` (None: it did not), as a dict for `encode`."""
    tokens_in = tokens_out = calls = 0
    cost: float | None = None
    failed = error
    steps = trace.steps
    step: Any
    for at, step in enumerate(steps):
        if step.__class__ is tuple:  # a model or tool call (see the module's docstring)
            if step[0] == "model":  # the trace's totals: its model calls'
                tokens_in += step[11]
                tokens_out += step[12]
                calls += 1
                if step[13] is not None:
                    cost = (cost or 0.0) + step[13]
                if step[16] is not None and len(step[16]) > MAX_TEXT:
                    steps[at] = (*step[:16], _text(step[16]))
            else:  # what a tool gave may be huge (a model's texts are cut when encoded)
                arguments, result, problem = step[6], step[7], step[9]
                if (arguments is not None and len(arguments) > MAX_TEXT) or (type(result) is str and len(result) > MAX_TEXT
                        ) or (problem is not None and len(problem) > MAX_TEXT):  # fmt: skip
                    cut = _text(result) if type(result) is str else result
                    steps[at] = (*step[:6], _text(arguments) if arguments is not None else None, cut, step[8],
                                 _text(problem) if problem is not None else None, step[10])  # fmt: skip
            continue
        if failed is None and step["kind"] == "run" and step.get("error"):
            failed = step["error"]
        problem = step.get("error")
        if problem is not None and len(problem) > MAX_TEXT:
            step["error"] = _text(problem)
    return {
        "version": 2, "id": trace.id, "owner": trace.owner, "kind": trace.kind, "name": trace.name,
        "title": trace.title, "started": trace.started, "duration": duration,
        "status": "error" if failed else "ok", "error": _text(failed) if failed else None,
        "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out, "cost": cost, "calls": calls},
        "messages": trace.messages, "functions": trace.functions, "cfgs": trace.cfgs, "refs": trace.refs,
        "steps": steps,
    }  # fmt: skip


def encode(body: dict[str, Any]) -> bytes:
    """`body` (from `trace_body`) as JSON bytes."""
    try:
        return orjson.dumps(body, default=_default)
    except TypeError:  # a dict key that is not a text (in a message's extra, say): orjson's slower way takes it
        return orjson.dumps(body, default=_default, option=orjson.OPT_NON_STR_KEYS)


def _default(value: Any) -> Any:
    """What orjson cannot write itself: a message as its array (its text cut at MAX_TEXT; its parts written by
    orjson in turn), a function call, a pydantic model as its dump, sets and tuples as lists, the rest as its text."""
    if type(value) is Message:  # [role, content, name, call name, call arguments, reasoning, extra]
        content, call = value.content, value.function_call
        if type(content) is str and len(content) > MAX_TEXT:
            content = _text(content)
        if call is None:
            return (value.role, content, value.name, None, None, value.reasoning_content, value.extra)
        return (value.role, content, value.name, call.name, call.arguments, value.reasoning_content, value.extra)
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


def walk(body: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    """A stored trace's steps in tree order (each after its parent, children in the order they started), each with
    its depth (0 for the root)."""
    children: dict[Any, list[dict[str, Any]]] = {}
    for step in body.get("steps") or ():
        children.setdefault(step.get("parent"), []).append(step)
    out: list[tuple[int, dict[str, Any]]] = []
    todo = [(0, s) for s in reversed(children.get(None, []))]
    while todo:
        depth, step = todo.pop()
        out.append((depth, step))
        todo += [(depth + 1, s) for s in reversed(children.get(step["id"], []))]
    return out


def summary(step: dict[str, Any], body: dict[str, Any], limit: int = 120) -> str:
    """One line about a step: a model call's model and tokens, a tool call's arguments and result, a task's agent,
    a retrieval's first sources, ... (texts cut at `limit`)."""
    kind = step.get("kind")
    if kind == "model":
        usage: dict[str, Any] = step.get("usage") or {}
        cost = usage.get("cost")
        money = f", ${cost:.4f}" if cost is not None else ""
        return f"{usage.get('input_tokens', 0)} in, {usage.get('output_tokens', 0)} out{money}"
    if kind == "tool":
        result = step.get("result")
        shown = result if isinstance(result, str) else orjson.dumps(result).decode()
        return f"{_cut(step.get('arguments') or '', limit // 2)} -> {_cut(shown, limit // 2)}"
    data: dict[str, Any] = step.get("data") or {}
    if kind == "task":
        return f"{data.get('agent')}: {_cut(str(data.get('description') or ''), limit)}"
    if kind == "retrieval":
        found: list[dict[str, Any]] = data.get("sources") or []
        pages = "; ".join(f"{s.get('file', '?')} p.{','.join(map(str, s.get('pages') or []))}" for s in found[:3])
        return f"{_cut(str(data.get('query') or ''), limit // 2)}: {len(found)} sources ({pages})"
    if kind == "memory":
        return _cut(str(data.get("text") or data.get("records") or ""), limit)
    if kind == "handoff":
        return f"to {data.get('to')}"
    if kind == "interrupt":
        questions: list[dict[str, Any]] = data.get("questions") or []
        waiting: list[dict[str, Any]] = data.get("approval") or []
        asked = [str(q.get("question") or "") for q in questions] + [f"approval of {a.get('name')}" for a in waiting]
        return _cut("; ".join(asked), limit)
    if kind == "run" and step.get("parent") is None:
        return _cut(str(body.get("title") or ""), limit)
    return ""


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


__all__ = ["MAX_TEXT", "encode", "summary", "trace_body", "walk"]

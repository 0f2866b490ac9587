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
"""

from __future__ import annotations

from typing import Any, cast

from chatagent.schema import Message

MAX_TEXT = 1_000_000  # characters of one text in a trace; the rest is left out, saying so
_DROPPED = ("previous",)  # recording bookkeeping, not part of the trace


def trace_body(trace: Any, duration: float | None, error: str | None) -> dict[str, Any]:
    """The JSON dict of `trace` (a `chatagent.run.traces.Trace`), which took `duration` seconds and failed with
    `error` (None: it did not)."""
    messages: list[dict[str, Any]] = []
    seen: dict[int, int] = {}
    keep: list[Any] = []  # the objects whose ids are in `seen` stay alive while this runs
    functions: list[Any] = []
    seen_functions: dict[int, int] = {}
    steps: list[dict[str, Any]] = []
    tokens_in = tokens_out = calls = 0
    cost: float | None = None

    def index(m: Any) -> int:
        found = seen.get(id(m))
        if found is None:
            keep.append(m)
            found = seen[id(m)] = len(messages)
            messages.append(_message(m))
        return found

    for raw in trace.steps:
        step = {k: v for k, v in raw.items() if k not in _DROPPED}
        if step["kind"] == "model":
            step["input"] = [index(m) for m in step.get("input") or ()]
            step["output"] = [index(m) for m in step.get("output") or ()]
            fns = step.get("functions")
            if fns is not None:
                at = seen_functions.get(id(fns))
                if at is None:
                    keep.append(fns)
                    at = seen_functions[id(fns)] = len(functions)
                    functions.append(_jsonable(fns))
                step["functions"] = at
            step["cfg"] = _jsonable(step.get("cfg") or {})
            usage = step.get("usage")
            if usage is not None:
                pt, ct, c = usage
                step["usage"] = {"input_tokens": pt, "output_tokens": ct, "cost": c}
                tokens_in, tokens_out, calls = tokens_in + (pt or 0), tokens_out + (ct or 0), calls + 1
                if c is not None:
                    cost = (cost or 0.0) + c
        elif step["kind"] == "tool":
            step["arguments"] = _text(step.get("arguments"))
            result = step.get("result")
            step["result"] = _text(result) if isinstance(result, str) else _jsonable(result)
        elif step["kind"] == "run":
            usage = step.get("usage")
            if usage is not None:
                pt, ct, c = usage
                step["usage"] = {"input_tokens": pt, "output_tokens": ct, "cost": c}
        if "data" in step:
            step["data"] = _jsonable(step["data"])
        if "error" in step:
            step["error"] = _text(step["error"])
        steps.append(step)
    failed = error or next((s["error"] for s in steps if s["kind"] == "run" and s.get("error")), None)
    return {
        "version": 1, "id": trace.id, "owner": trace.owner, "kind": trace.kind, "name": trace.name,
        "title": trace.title, "started": trace.started, "duration": duration,
        "status": "error" if failed else "ok", "error": _text(failed) if failed else None,
        "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out, "cost": cost, "calls": calls},
        "messages": messages, "functions": functions, "steps": steps,
    }  # fmt: skip


def _message(m: Any) -> Any:
    """A message as a JSON dict (its texts cut at MAX_TEXT)."""
    return _jsonable(m.model_dump() if isinstance(m, Message) else m)


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else "" if value is None else str(value)
    if len(text) > MAX_TEXT:
        return text[:MAX_TEXT] + f"\n[… {len(text) - MAX_TEXT} more characters not recorded]"
    return text


def _jsonable(value: Any, depth: int = 0) -> Any:
    """`value` as JSON types: dicts, lists, text, numbers, booleans, None (models as their dump, the rest as text)."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return _text(value)
    if depth > 20:
        return _text(repr(value))
    if isinstance(value, dict):
        items = cast("dict[Any, Any]", value)
        return {str(k): _jsonable(v, depth + 1) for k, v in items.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v, depth + 1) for v in cast("list[Any]", value)]
    if isinstance(value, Message):
        return _jsonable(value.model_dump(), depth + 1)
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        try:
            return _jsonable(dump(mode="json"), depth + 1)
        except TypeError:
            return _jsonable(dump(), depth + 1)
    return _text(str(value))


__all__ = ["MAX_TEXT", "trace_body"]

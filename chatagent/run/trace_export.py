"""A stored trace (`chatagent.run.trace_body`) made fit to leave the machine: as JSON, or as OpenTelemetry spans.

    exported(body)   # the trace, every text with the keys this process knows and `Bearer` tokens masked, and every
                     # absolute path of this machine cut to its last name ('/srv/app/docs/manual.pdf' -> 'manual.pdf')
    otlp(body)       # the same as OTLP/JSON (`resourceSpans`), one span per step, for a collector or a viewer

What a run said (messages, tool arguments and results) stays: it is the content of the trace's owner, who alone can
read it (`chatagent.sessions.traces`); what the process knows of its machine (where its files and stores are, the
keys it holds) does not go with it. `chatagent traces --show ID --json|--otlp` and `chatagent serve --traces`
(`GET /v1/traces/{id}`) give these, never the stored body itself.
"""

from __future__ import annotations

import re
from typing import Any, cast

import orjson

from chatagent.run.trace_body import walk
from chatagent.utils.keys import mask_secrets

#: an absolute path (POSIX, `~/`, or a Windows drive): its folders are left out, its last name kept
_PATH = re.compile(r"(?<![\w.:/\\-])(?:/|~/|[A-Za-z]:[\\/])(?:[^\s/\\'\"<>|:]+[/\\])+(?=[^\s/\\'\"<>|:])")
#: a file's URL (a SQLite store's, say): its folders likewise; a URL's password
_FILE_URL = re.compile(r"\b(sqlite|file):/*(?:[^\s/'\"<>]+/)+(?=[^\s/'\"<>])")
_PASSWORD = re.compile(r"\b([a-z][\w+.-]*://[^/\s:@]+:)[^@\s/]+@")
_SCOPE = {"name": "chatagent.traces", "version": "1"}


def scrub(text: str) -> str:
    """`text` without the keys this process knows, `Bearer` tokens and URLs' passwords, and the folders of absolute
    paths and files' URLs."""
    if not text:
        return text
    text = _PASSWORD.sub(r"\1***@", _FILE_URL.sub(r"\1:///", mask_secrets(text)))
    return _PATH.sub("", text)


#: what a trace's body holds (chatagent.run.trace_body makes it so)
Json = dict[str, "Json"] | list["Json"] | str | int | float | bool | None


def exported(body: dict[str, Any]) -> dict[str, Any]:
    """A copy of the trace `body` with every text (values and keys, at any depth) scrubbed (see `scrub`)."""
    return _scrubbed_object(body)


def _scrubbed_object(value: dict[str, Json]) -> dict[str, Json]:
    return {scrub(str(k)): _scrubbed(v) for k, v in value.items()}


def _scrubbed(value: Json) -> Json:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return _scrubbed_object(value)
    if isinstance(value, (list, tuple)):  # (a tuple, where a caller's data held one)
        return [_scrubbed(v) for v in value]
    return value


def otlp(body: dict[str, Any]) -> dict[str, Any]:
    """The trace `body` (scrubbed, see `exported`) as OTLP/JSON: one span per step (the trace's id its traceId, a
    step's parent its parent span), with the attributes of OpenTelemetry's GenAI conventions where they apply."""
    body = exported(body)
    trace_id = str(body.get("id") or "").rjust(32, "0")[-32:]
    messages: list[Any] = body.get("messages") or []
    spans = [_span(trace_id, step, messages) for _, step in walk(body)]
    resource = {"attributes": [_attr("service.name", "chatagent"), _attr("chatagent.trace.owner", body.get("owner"))]}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": _SCOPE, "spans": spans}]}]}


def _span(trace_id: str, step: dict[str, Any], messages: list[Any]) -> dict[str, Any]:
    start = float(step.get("start") or 0.0)
    end = start + float(step.get("duration") or 0.0)
    kind = step.get("kind")
    attrs: dict[str, Any] = {"chatagent.step.kind": kind, "chatagent.step.name": step.get("name")}
    if kind == "model":
        usage: dict[str, Any] = step.get("usage") or {}
        attrs.update({"gen_ai.request.model": step.get("name"), "gen_ai.usage.input_tokens": usage.get("input_tokens"),
                      "gen_ai.usage.output_tokens": usage.get("output_tokens"), "chatagent.cost_usd": usage.get("cost"),
                      "gen_ai.input.messages": _messages(step.get("input"), messages),
                      "gen_ai.output.messages": _messages(step.get("output"), messages)})  # fmt: skip
    elif kind == "tool":
        attrs.update({"gen_ai.tool.name": step.get("name"), "gen_ai.tool.call.id": step.get("call_id"),
                      "gen_ai.tool.call.arguments": step.get("arguments"),
                      "gen_ai.tool.call.result": _text(step.get("result"))})  # fmt: skip
    elif step.get("data"):
        attrs["chatagent.step.data"] = _text(step["data"])
    span: dict[str, Any] = {
        "traceId": trace_id, "spanId": _span_id(step.get("id")), "name": f"{kind} {step.get('name')}",
        "kind": 3 if kind == "model" else 1,  # CLIENT for a model call, INTERNAL for the rest
        "startTimeUnixNano": str(int(start * 1e9)), "endTimeUnixNano": str(int(end * 1e9)),
        "attributes": [_attr(k, v) for k, v in attrs.items() if v is not None],
        "status": {"code": 2, "message": str(step["error"])} if step.get("error") else {"code": 1},
    }  # fmt: skip
    if step.get("parent") is not None:
        span["parentSpanId"] = _span_id(step["parent"])
    return span


def _span_id(step_id: Any) -> str:
    return f"{int(step_id or 0):016x}"


def _messages(indexes: Any, messages: list[Any]) -> str | None:
    if not isinstance(indexes, list):
        return None
    picked = [messages[i] for i in cast("list[Any]", indexes) if isinstance(i, int) and 0 <= i < len(messages)]
    return _text(picked)


def _text(value: Any) -> str | None:
    """A value as the text of an attribute (JSON for what is not a text)."""
    if value is None or isinstance(value, str):
        return value
    return orjson.dumps(value, default=str).decode()


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    return {"key": key, "value": {"stringValue": str(value)}}


__all__ = ["exported", "otlp", "scrub"]

"""A Responses API reply read into fragments: the streamed events (`response.output_text.delta`,
`response.function_call_arguments.delta`, `response.reasoning_summary_text.delta`, `response.output_item.added` /
`.done`, `response.completed` / `.incomplete` / `.failed`, `error`) one by one, or a whole response object.

The reply's `reasoning` items (with their `encrypted_content`) and its id are kept in its first message's
`extra['reasoning_state']` (`{'provider': 'openai-responses', 'response_id', 'items'}`), to go back next turn.
"""

from __future__ import annotations

from typing import Any, cast

import orjson

from chatagent.errors import ModelErrorCode, ModelServiceError
from chatagent.llm.cut_off import cut_call_error
from chatagent.llm.http_backend import Prompt, as_object, loads
from chatagent.llm.reply_parts import NATIVE_MARK, ReplyParts
from chatagent.llm.request import Usage
from chatagent.llm.sse import SSESplitter
from chatagent.schema import ASSISTANT, FunctionCall, Message
from chatagent.schema.fragment import Fragment
from chatagent.schema.parts import unique_call_id

PROVIDER = "openai-responses"
_RETRYABLE = {"server_error", "rate_limit_exceeded", "vector_store_timeout"}
_REASONING_KEYS = ("type", "id", "summary", "encrypted_content", "content")


class ResponsesReader:
    """The events of one streamed reply (`feed`: bytes in, fragment lists out; `finish`: the end)."""

    __slots__ = ("server", "prompt", "sse", "parts", "response_id", "items", "usage", "done", "cut")

    def __init__(self, server: Any, prompt: Prompt, native_schema: bool = False) -> None:
        self.server = server
        self.prompt = prompt
        self.sse = SSESplitter()
        self.parts = ReplyParts()
        self.parts.native_schema = native_schema
        self.response_id: str | None = None
        self.items: list[dict[str, Any]] = []  # reasoning items, to send back
        self.usage: dict[str, Any] = {}
        self.done = self.cut = False

    def feed(self, chunk: bytes) -> list[list[Fragment]]:
        out: list[list[Fragment]] = []
        for data in self.sse.feed(chunk):
            fragments = self.event(data)
            if fragments:
                out.append(fragments)
        return out

    def event(self, data: bytes) -> list[Fragment] | None:
        obj = as_object(loads(data, self.server.endpoint()))
        kind = obj.get("type")
        if kind == "response.output_text.delta":
            return self.parts.text(obj["delta"]) if obj.get("delta") else None
        if kind == "response.function_call_arguments.delta":
            if obj.get("delta"):
                self.parts.call_arguments(obj.get("output_index"), obj["delta"])
            return None
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            return self.parts.reasoning(obj["delta"]) if obj.get("delta") else None
        if kind == "response.output_item.added":
            item = as_object(obj.get("item"))
            if item.get("type") == "function_call":
                self.parts.start_call(obj.get("output_index"), item.get("call_id"), item.get("name") or "")
            return None
        if kind == "response.output_item.done":
            item = as_object(obj.get("item"))
            if item.get("type") == "reasoning":
                self.items.append({k: item[k] for k in _REASONING_KEYS if k in item})
            elif item.get("type") == "function_call":
                entry = self.parts.calls.get(obj.get("output_index"))
                if entry is not None and not entry[2] and item.get("arguments"):  # arguments sent only whole
                    self.parts.call_arguments(obj.get("output_index"), item["arguments"])
            return None
        if kind == "response.created":
            self.response_id = as_object(obj.get("response")).get("id") or self.response_id
            return None
        if kind in ("response.completed", "response.incomplete"):
            response = as_object(obj.get("response"))
            self.done = True
            self.usage = as_object(response.get("usage"))
            self.response_id = response.get("id") or self.response_id
            reason = as_object(response.get("incomplete_details")).get("reason")
            self.cut = kind == "response.incomplete" and reason == "max_output_tokens"
            return None
        if kind == "response.failed":
            raise failure(self.server, as_object(as_object(obj.get("response")).get("error")))
        if kind == "error":
            raise failure(self.server, obj)
        return None  # created/in_progress, content parts, the .done of deltas, and types added later

    def finish(self, usage: Usage | None) -> list[list[Fragment]]:
        for data in self.sse.end():
            self.event(data)
        if not self.done:
            raise ModelServiceError(
                ModelErrorCode.STREAM_INCOMPLETE,
                f"the stream from {self.server.endpoint()} ended before the answer did",
                retryable=True,
            )
        if self.response_id or self.items:
            self.parts.keep_state({"provider": PROVIDER, "response_id": self.response_id, "items": self.items})
        if usage is not None:
            add_usage(usage, self.usage, self.parts, self.prompt)
        return self.parts.finish(self.cut)


def whole_response(
    server: Any, body: bytes, usage: Usage | None, prompt: Prompt, native_schema: bool = False
) -> list[Message]:
    """The messages of a whole (non-streamed) response object; its usage added to `usage`."""
    obj = as_object(loads(body, server.endpoint()))
    if obj.get("error"):
        raise failure(server, as_object(obj["error"]))
    output = cast("list[dict[str, Any]]", obj.get("output") or [])
    text = "".join(_texts(i.get("content"), "output_text") for i in output if i.get("type") == "message")
    reasoning = "".join(_texts(i.get("summary"), "summary_text") for i in output if i.get("type") == "reasoning")
    items = [{k: i[k] for k in _REASONING_KEYS if k in i} for i in output if i.get("type") == "reasoning"]
    state = {"reasoning_state": {"provider": PROVIDER, "response_id": obj.get("id"), "items": items}}
    cut = obj.get("status") == "incomplete" and as_object(obj.get("incomplete_details")).get("reason") == (
        "max_output_tokens"
    )
    out: list[Message] = []
    if text or reasoning:
        mark = NATIVE_MARK if native_schema else {}
        out.append(Message.unchecked(ASSISTANT, text, None, None, reasoning or None, {**state, **mark}))
    ids: set[str] = set()
    parts = ReplyParts()
    for i in output:
        if i.get("type") == "function_call":
            if cut:
                raise cut_call_error()
            call = FunctionCall(i.get("name") or "", i.get("arguments") or "{}")
            extra: dict[str, Any] = {"function_id": unique_call_id(i.get("call_id"), ids)}
            if not out:
                extra.update(state)
            out.append(Message.unchecked(ASSISTANT, "", None, call, None, extra))
            parts.said.append(call.arguments)
    if not out:
        out.append(Message.unchecked(ASSISTANT, "", None, None, None, dict(state)))
    if cut:
        out[0].extra = {**(out[0].extra or {}), "stop_reason": "length"}
    if usage is not None:
        parts.said += [text, reasoning]
        add_usage(usage, as_object(obj.get("usage")), parts, prompt)
    return out


def _texts(parts: Any, kind: str) -> str:
    """The text of an item's parts of `kind` (an output message's `output_text`, a reasoning item's summaries)."""
    listed = cast("list[Any]", parts) if isinstance(parts, list) else []
    return "".join(str(p.get("text") or "") for p in map(as_object, listed) if p.get("type") == kind)


def add_usage(usage: Usage, reported: dict[str, Any], parts: ReplyParts, prompt: Prompt) -> None:
    """The response's usage (input_tokens counts the cached ones too) added to `usage`; an estimate without one."""
    given = reported.get("input_tokens")
    if isinstance(given, int) and given:
        cached = as_object(reported.get("input_tokens_details")).get("cached_tokens")
        output = reported.get("output_tokens")
        read = cached if isinstance(cached, int) else 0
        usage.add(given, output if isinstance(output, int) else 0, cache_read_tokens=read)
        return
    messages, functions = prompt
    parts.estimate(usage, "".join(m.text for m in messages) + (orjson.dumps(functions).decode() if functions else ""))


def failure(server: Any, error: dict[str, Any]) -> ModelServiceError:
    """A failed response's `error` (or an `error` event) as a ModelServiceError."""
    code = str(error.get("code") or error.get("type") or ModelErrorCode.STREAM_ERROR)
    status = 429 if code == "rate_limit_exceeded" else 500 if code in _RETRYABLE else 400
    body = orjson.dumps({"error": {"message": error.get("message") or code, "code": code}})
    return server.status_error(status, {}, body, False)


__all__ = ["PROVIDER", "ResponsesReader", "add_usage", "failure", "whole_response"]

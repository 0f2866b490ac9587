"""A Messages API reply read into fragments: the streamed events (`message_start`, `content_block_start`,
`content_block_delta` with `text_delta`, `input_json_delta`, `thinking_delta`, `signature_delta`,
`content_block_stop`, `message_delta`, `message_stop`, `error`) one by one, or a whole message; the usage with
the prompt cache's reads and writes.

Thinking blocks become `reasoning_content` as they stream, and the blocks themselves (with their signatures, and
redacted ones) are kept in the first message's `extra['reasoning_state']`, to go back as the API requires. The
forced response tool of a structured answer (see `chatagent.llm.anthropic.request`) is not a call: its input is
the answer's text.
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

PROVIDER = "anthropic"
# an error event's type -> the HTTP status the API gives the same error
ERROR_STATUS = {
    "invalid_request_error": 400, "authentication_error": 401, "permission_error": 403, "not_found_error": 404,
    "request_too_large": 413, "rate_limit_error": 429, "api_error": 500, "overloaded_error": 529,
}  # fmt: skip


class AnthropicReader:
    """The events of one streamed reply (`feed`: bytes in, fragment lists out; `finish`: the end)."""

    __slots__ = ("server", "prompt", "response_tool", "sse", "parts", "blocks", "usage", "stop", "done")

    def __init__(self, server: Any, prompt: Prompt, response_tool: str | None) -> None:
        self.server = server
        self.prompt = prompt
        self.response_tool = response_tool
        self.sse = SSESplitter()
        self.parts = ReplyParts()
        self.blocks: dict[int, dict[str, Any]] = {}  # block index -> the block (thinking ones, to keep)
        self.usage: dict[str, Any] = {}
        self.stop: str | None = None
        self.done = False

    def feed(self, chunk: bytes) -> list[list[Fragment]]:
        out: list[list[Fragment]] = []
        for data in self.sse.feed(chunk):
            fragments = self.event(data)
            if fragments:
                out.append(fragments)
        return out

    def event(self, data: bytes) -> list[Fragment] | None:
        obj = loads(data, self.server.endpoint())
        kind = obj.get("type")
        if kind == "content_block_delta":
            delta = obj["delta"]
            dtype = delta.get("type")
            if dtype == "text_delta":
                return self.parts.text(delta["text"]) if delta.get("text") else None
            if dtype == "input_json_delta":
                piece = delta.get("partial_json") or ""
                block = self.blocks.get(obj["index"])
                if block is not None and block.get("answer"):  # the response tool's input is the answer
                    return self.parts.text(piece) if piece else None
                if piece:
                    self.parts.call_arguments(obj["index"], piece)
                return None
            if dtype == "thinking_delta":
                self.blocks[obj["index"]]["thinking"] += delta.get("thinking") or ""
                return self.parts.reasoning(delta["thinking"]) if delta.get("thinking") else None
            if dtype == "signature_delta":
                self.blocks[obj["index"]]["signature"] = delta.get("signature") or ""
            return None
        if kind == "content_block_start":
            block = obj["content_block"]
            btype = block.get("type")
            if btype == "tool_use":
                if block.get("name") == self.response_tool:
                    self.blocks[obj["index"]] = {"answer": True}
                    self.parts.native_schema = True
                else:
                    self.parts.start_call(obj["index"], block.get("id"), block.get("name") or "")
            elif btype == "thinking":
                self.blocks[obj["index"]] = {
                    "type": "thinking",
                    "thinking": block.get("thinking") or "",
                    "signature": "",
                }
            elif btype == "redacted_thinking":
                self.blocks[obj["index"]] = {"type": "redacted_thinking", "data": block.get("data") or ""}
            elif btype == "text" and block.get("text"):
                return self.parts.text(block["text"])
            return None
        if kind == "content_block_stop":
            block = self.blocks.get(obj["index"])
            if block is not None and block.get("type") in ("thinking", "redacted_thinking"):
                kept = [b for b in self.blocks.values() if b.get("type") in ("thinking", "redacted_thinking")]
                return self.parts.reasoning_state({"provider": PROVIDER, "blocks": kept})
            return None
        if kind == "message_delta":
            self.stop = as_object(obj.get("delta")).get("stop_reason") or self.stop
            self.usage.update({k: v for k, v in as_object(obj.get("usage")).items() if v is not None})
            return None
        if kind == "message_start":
            self.usage.update(
                {k: v for k, v in as_object(as_object(obj.get("message")).get("usage")).items() if v is not None}
            )
            return None
        if kind == "message_stop":
            self.done = True
            return None
        if kind == "error":
            raise stream_error(self.server, obj, bool(self.prompt[1]))
        return None  # ping, and event types added later

    def finish(self, usage: Usage | None) -> list[list[Fragment]]:
        for data in self.sse.end():
            self.event(data)
        if not self.done:
            raise ModelServiceError(
                ModelErrorCode.STREAM_INCOMPLETE,
                f"the stream from {self.server.endpoint()} ended before the answer did",
                retryable=True,
            )
        if usage is not None:
            add_usage(usage, self.usage, self.parts, self.prompt)
        return self.parts.finish(self.stop == "max_tokens")


def whole_message(
    server: Any, body: bytes, usage: Usage | None, prompt: Prompt, response_tool: str | None
) -> list[Message]:
    """The messages of a whole (non-streamed) reply; its usage added to `usage`."""
    obj = as_object(loads(body, server.endpoint()))
    if not obj or obj.get("type") == "error":
        raise stream_error(server, obj, bool(prompt[1]))
    blocks = cast("list[dict[str, Any]]", obj.get("content") or [])
    text = "".join(b.get("text") or "" for b in blocks if b.get("type") == "text")
    for b in blocks:
        if b.get("type") == "tool_use" and b.get("name") == response_tool:
            text += orjson.dumps(b.get("input") or {}).decode()
    reasoning = "".join(b.get("thinking") or "" for b in blocks if b.get("type") == "thinking")
    kept = [
        {k: v for k, v in b.items() if k in ("type", "thinking", "signature", "data")}
        for b in blocks
        if b.get("type") in ("thinking", "redacted_thinking")
    ]
    out: list[Message] = []
    answered = any(b.get("type") == "tool_use" and b.get("name") == response_tool for b in blocks)
    if text or reasoning or kept:
        extra = {"reasoning_state": {"provider": PROVIDER, "blocks": kept}} if kept else None
        if answered:
            extra = {**(extra or {}), **NATIVE_MARK}
        out.append(Message.unchecked(ASSISTANT, text, None, None, reasoning or None, extra))
    cut = obj.get("stop_reason") == "max_tokens"
    ids: set[str] = set()
    parts = ReplyParts()
    for b in blocks:
        if b.get("type") == "tool_use" and b.get("name") != response_tool:
            if cut:
                raise cut_call_error()
            call = FunctionCall(b.get("name") or "", orjson.dumps(b.get("input") or {}).decode())
            out.append(
                Message.unchecked(ASSISTANT, "", None, call, None, {"function_id": unique_call_id(b.get("id"), ids)})
            )
            parts.said.append(call.arguments)
    if not out:
        out.append(Message.unchecked(ASSISTANT, "", None, None, None, None))
    if cut:
        out[0].extra = {**(out[0].extra or {}), "stop_reason": "length"}
    if usage is not None:
        parts.said += [text, reasoning]
        add_usage(usage, cast("dict[str, Any]", obj.get("usage") or {}), parts, prompt)
    return out


def add_usage(usage: Usage, reported: dict[str, Any], parts: ReplyParts, prompt: Prompt) -> None:
    """The API's usage (input_tokens is what the cache neither read nor wrote) added to `usage`; an estimate when
    the server reported none."""
    read = _int(reported.get("cache_read_input_tokens"))
    write = _int(reported.get("cache_creation_input_tokens"))
    plain = _int(reported.get("input_tokens"))
    output = _int(reported.get("output_tokens"))
    if plain or read or write or output:
        usage.add(plain + read + write, output, cache_read_tokens=read, cache_write_tokens=write)
        return
    messages, functions = prompt
    text = "".join(m.text for m in messages) + (orjson.dumps(functions).decode() if functions else "")
    parts.estimate(usage, text)


def stream_error(server: Any, obj: dict[str, Any], has_tools: bool) -> ModelServiceError:
    """An `error` event (or error body in a 200) as the error its HTTP status would give."""
    error = cast("dict[str, Any]", obj.get("error") or {})
    status = ERROR_STATUS.get(str(error.get("type")), 500)
    return server.status_error(status, {}, orjson.dumps(obj), has_tools)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


__all__ = ["AnthropicReader", "add_usage", "stream_error", "whole_message"]

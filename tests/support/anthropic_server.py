"""A loopback Anthropic Messages API for tests and benchmarks: `POST /v1/messages` on 127.0.0.1, whole JSON or SSE,
written from Anthropic's public API reference (messages, streaming, tool use, extended thinking, prompt caching).

    with AnthropicServer() as server:                      # or the `anthropic_server` fixture (tests/llm/conftest.py)
        server.add(Reply(text='Hello!'))                   # the scripted replies: tests/support/provider_reply.py
        llm = get_chat_model({'model_type': 'anthropic', 'model': 'claude-sonnet-4-5',
                              'model_server': server.base_url, 'api_key': server.api_key})

What a real server checks is checked, and answered as it answers (400 `invalid_request_error`, 401
`authentication_error`): the key (`x-api-key`, or `Authorization: Bearer` as the SDK sends it) and the `anthropic-version` header; `model`, `max_tokens` and `messages`;
unknown top-level fields; roles, block types, empty text blocks; every `tool_use` answered by a `tool_result` in
the very next message and no `tool_result` without its `tool_use`; at most 4 `cache_control` breakpoints; a thinking
budget of at least 1024 and below `max_tokens`; no `temperature` or forced `tool_choice` with thinking; thinking
blocks sent back unchanged (their signature is checked) and, with thinking on, an assistant turn that called tools
starting with its thinking.

The prompt cache is simulated as the API describes it: the prefix up to each `cache_control` breakpoint (tools, then
system, then messages) is written when first seen and read by a later request that begins with it; the usage says
`cache_creation_input_tokens`, `cache_read_input_tokens` and the `input_tokens` after the last breakpoint (tokens
counted as JSON characters / 4). Thinking blocks are signed with the server's own key.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

from tests.support.loopback import LoopbackHandler, LoopbackServer, Request
from tests.support.provider_reply import Reply, tokens

TOP_LEVEL = {
    "model", "messages", "max_tokens", "system", "tools", "tool_choice", "temperature", "top_p", "top_k",
    "stop_sequences", "stream", "metadata", "thinking", "service_tier", "container", "mcp_servers",
}  # fmt: skip
BLOCK_TYPES = {
    "user": {"text", "image", "document", "tool_result", "search_result"},
    "assistant": {"text", "tool_use", "thinking", "redacted_thinking"},
}
_SECRET = b"loopback-thinking-signer"


def signature(thinking: str) -> str:
    """The server's signature of a thinking block's text."""
    return base64.b64encode(hmac.new(_SECRET, thinking.encode(), hashlib.sha256).digest()).decode()


class BadRequest(Exception):
    """A request the API refuses: its status, error type and message."""

    def __init__(self, message: str, status: int = 400, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.kind = status, kind


def check(body: Any, headers: dict[str, str], api_key: str | None) -> None:
    """Raise BadRequest as the Messages API would for this request."""
    bearer = headers.get("authorization", "").removeprefix("Bearer ")
    if api_key is not None and api_key not in (headers.get("x-api-key"), bearer):
        raise BadRequest("invalid x-api-key", 401, "authentication_error")
    if not headers.get("anthropic-version"):
        raise BadRequest("anthropic-version: header is required")
    if not isinstance(body, dict):
        raise BadRequest("The request body is not valid JSON.")
    extra = sorted(set(body) - TOP_LEVEL)
    if extra:
        raise BadRequest(f"{extra[0]}: Extra inputs are not permitted")
    for key in ("model", "max_tokens", "messages"):
        if key not in body:
            raise BadRequest(f"{key}: Field required")
    if not isinstance(body["max_tokens"], int) or body["max_tokens"] < 1:
        raise BadRequest("max_tokens: Input should be a valid integer greater than 0")
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages: at least one message is required")
    thinking = body.get("thinking")
    if thinking is not None and thinking.get("type") == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            raise BadRequest("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
        if budget >= body["max_tokens"]:
            raise BadRequest("`max_tokens` must be greater than `thinking.budget_tokens`")
        if "temperature" in body and body["temperature"] != 1:
            raise BadRequest("`temperature` may only be set to 1 when thinking is enabled")
        if (body.get("tool_choice") or {}).get("type") in ("any", "tool"):
            raise BadRequest("Thinking may not be enabled when tool_choice forces tool use.")
    thinking_on = bool(thinking) and thinking.get("type") == "enabled"
    breakpoints = 0
    for tool in body.get("tools") or []:
        if not isinstance(tool.get("name"), str) or "input_schema" not in tool:
            raise BadRequest("tools: each tool needs a name and an input_schema")
        breakpoints += "cache_control" in tool
    system = body.get("system")
    if isinstance(system, list):
        for block in system:
            if block.get("type") != "text" or not block.get("text"):
                raise BadRequest("system: text content blocks must be non-empty")
            breakpoints += "cache_control" in block
    open_calls: set[str] = set()
    last_assistant = max((n for n, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    for n, msg in enumerate(messages):
        role = msg.get("role")
        if role not in BLOCK_TYPES:
            raise BadRequest(f"messages.{n}.role: Input should be 'user' or 'assistant'")
        content = msg.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list) or not blocks:
            raise BadRequest(f"messages.{n}: all messages must have non-empty content")
        answered = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
        if open_calls and answered != open_calls:
            missing = sorted(open_calls - answered)
            raise BadRequest(
                f"messages.{n}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                f"{', '.join(missing) or sorted(answered - open_calls)[0]}"
            )
        if answered and not open_calls:
            raise BadRequest(f"messages.{n}.content: unexpected `tool_use_id` found in `tool_result` blocks")
        open_calls = set()
        for i, block in enumerate(blocks):
            kind = block.get("type")
            if kind not in BLOCK_TYPES[role]:
                raise BadRequest(f"messages.{n}.content.{i}.type: {kind!r} is not allowed in a {role} message")
            if kind == "text" and not block.get("text"):
                raise BadRequest(f"messages.{n}.content.{i}: text content blocks must be non-empty")
            if kind == "tool_use":
                if not isinstance(block.get("input"), dict):
                    raise BadRequest(f"messages.{n}.content.{i}.tool_use.input: Input should be a valid dictionary")
                open_calls.add(block["id"])
            if kind == "thinking" and block.get("signature") != signature(block.get("thinking") or ""):
                raise BadRequest(f"messages.{n}.content.{i}: Invalid `signature` in `thinking` block")
            if kind == "image" and (block.get("source") or {}).get("type") not in ("base64", "url"):
                raise BadRequest(f"messages.{n}.content.{i}.image.source: unknown source type")
            breakpoints += "cache_control" in block
        if thinking_on and n == last_assistant and open_calls and blocks[0].get("type") not in (
            "thinking", "redacted_thinking",
        ):  # fmt: skip
            raise BadRequest(
                f"messages.{n}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
                f"`{blocks[0].get('type')}`. When `thinking` is enabled, a final `assistant` message must start "
                "with a thinking block"
            )
    if open_calls and messages[-1].get("role") != "assistant":
        raise BadRequest("`tool_use` ids were found without `tool_result` blocks immediately after")
    if breakpoints > 4:
        raise BadRequest(f"A maximum of 4 blocks with cache_control may be provided. Found {breakpoints}.")


def _segments(body: dict) -> list[tuple[Any, bool]]:
    """The cacheable prefix, block by block (tools, system, messages), each with whether it is a breakpoint."""
    out: list[tuple[Any, bool]] = []

    def add(block: Any, role: str = "") -> None:
        marked = isinstance(block, dict) and "cache_control" in block
        plain = {k: v for k, v in block.items() if k != "cache_control"} if isinstance(block, dict) else block
        out.append(((role, plain), marked))

    for tool in body.get("tools") or []:
        add(tool)
    system = body.get("system")
    for block in [{"type": "text", "text": system}] if isinstance(system, str) else system or []:
        add(block, "system")
    for msg in body["messages"]:
        content = msg["content"]
        for block in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            add(block, msg["role"])
    return out


class AnthropicServer(LoopbackServer):
    """The server; `start()` it (the fixture does), `add()` replies, read `requests` and `cache`."""

    reply_type = Reply
    thread_name = "anthropic-server"
    poll_interval = 0.05

    def __init__(self, api_key: str | None = "sk-ant-loopback-key") -> None:
        super().__init__()
        self.api_key = api_key
        self.cache: dict[str, int] = {}  # prefix hash -> its tokens
        self.min_cache_tokens = 0  # a breakpoint's prefix shorter than this is not cached (the API: 1024 and up)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def reset(self) -> None:
        super().reset()
        self.cache.clear()

    def _no_reply(self) -> Reply:
        return Reply(status=400, error="loopback server: no scripted reply left")

    def usage(self, body: dict, output: int) -> dict:
        """The usage of a request, its prompt read from and written to the cache as the API does it."""
        total = 0
        prefix = hashlib.sha256()
        marks: list[tuple[str, int]] = []  # (prefix hash, tokens up to it) at each breakpoint
        for segment, marked in _segments(body):
            total += tokens(segment)
            prefix.update(json.dumps(segment, sort_keys=True).encode())
            if marked:
                marks.append((prefix.hexdigest(), total))
        read = max((n for h, n in marks if h in self.cache), default=0)
        write = 0
        for h, n in marks:
            if n > read and h not in self.cache and n >= self.min_cache_tokens:
                self.cache[h] = n
                write = n - read
        return {
            "input_tokens": total - read - write, "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read, "output_tokens": output,
        }  # fmt: skip


class _Handler(LoopbackHandler):
    owner: AnthropicServer

    def handle(self) -> None:
        try:
            super().handle()
        except ConnectionError:
            pass

    def do_POST(self) -> None:
        raw, headers = self._read_body()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        req = Request(self.command, self.path, headers, body, self.client_address[:2])
        if self.path.split("?")[0].rstrip("/") != "/v1/messages":
            self._error(404, "not_found_error", f"no route {self.path}")
            return
        try:
            check(body, headers, self.owner.api_key)
        except BadRequest as e:
            self.owner.requests.append(req)
            self._error(e.status, e.kind, str(e))
            req.outcome = "refused"
            req.done.set()
            return
        reply = self.owner._next_reply(req, record=True)
        self._finish(req, lambda: self._answer(body, reply))

    def _error(self, status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> None:
        body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_loopback"}
        self._send_json(status, body, headers)

    def _answer(self, body: dict, reply: Reply) -> str:
        if reply.delay:
            time.sleep(reply.delay)
        if reply.status != 200:
            kind = reply.error_type or {
                429: "rate_limit_error",
                529: "overloaded_error",
                401: "authentication_error",
            }.get(reply.status, "api_error" if reply.status >= 500 else "invalid_request_error")
            self._error(reply.status, kind, reply.error or f"scripted error {reply.status}", reply.headers)
            return "complete"
        blocks = _blocks(reply)
        output = sum(tokens(b) for b in blocks)
        usage = reply.usage or self.owner.usage(body, output)
        stop = reply.stop or ("tool_use" if reply.tool_calls else "end_turn")
        if not body.get("stream"):
            message = _message(body["model"], blocks, None, usage)
            message["stop_reason"] = stop
            self._send_json(200, message, reply.headers)
            return "complete"
        sse = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}
        self._send_head(200, sse, {"Transfer-Encoding": "chunked"}, reply.headers)
        events = list(_events(body["model"], reply, usage, stop))
        faulty = reply.interval or reply.drop_after is not None or reply.end_after is not None
        if not faulty and reply.error_after is None:
            self._write_chunk(b"".join(events))
            self._write_chunk(b"")
            return "complete"
        for sent, event in enumerate(events):
            if sent and reply.interval:
                time.sleep(reply.interval)
            if reply.drop_after is not None and sent >= reply.drop_after:
                return self._drop()
            if reply.end_after is not None and sent >= reply.end_after:
                break
            if reply.error_after is not None and sent == reply.error_after:
                error = {"type": "error", "error": {"type": reply.error_type or "overloaded_error",
                                                    "message": reply.error or "Overloaded"}}  # fmt: skip
                self._write_chunk(_event("error", error))
                break
            self._write_chunk(event)
        self._write_chunk(b"")
        return "complete" if reply.end_after is None else "dropped"


AnthropicServer.handler = _Handler


def _blocks(reply: Reply) -> list[dict]:
    out: list[dict] = []
    if reply.thinking:
        out.append({"type": "thinking", "thinking": reply.thinking, "signature": signature(reply.thinking)})
    if reply.full_text():
        out.append({"type": "text", "text": reply.full_text()})
    for cid, name, args in reply.call_objects():
        out.append({"type": "tool_use", "id": cid.replace("call_", "toolu_"), "name": name, "input": args})
    return out


def _message(model: str, content: list, stop: str | None, usage: dict) -> dict:
    return {
        "id": "msg_loopback", "type": "message", "role": "assistant", "model": model, "content": content,
        "stop_reason": stop, "stop_sequence": None, "usage": usage,
    }  # fmt: skip


def _event(kind: str, obj: dict) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(obj, ensure_ascii=False)}\n\n".encode()


def _events(model: str, reply: Reply, usage: dict, stop: str):
    start_usage = {**usage, "output_tokens": 1}
    yield _event("message_start", {"type": "message_start", "message": _message(model, [], None, start_usage)})
    yield _event("ping", {"type": "ping"})
    index = 0

    def block(start: dict, deltas: list[dict]):
        nonlocal index
        yield _event("content_block_start", {"type": "content_block_start", "index": index, "content_block": start})
        for d in deltas:
            yield _event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
        yield _event("content_block_stop", {"type": "content_block_stop", "index": index})
        index += 1

    n = reply.chunk_size
    if reply.thinking:
        pieces = [reply.thinking[i : i + n] for i in range(0, len(reply.thinking), n)]
        deltas = [{"type": "thinking_delta", "thinking": p} for p in pieces]
        deltas.append({"type": "signature_delta", "signature": signature(reply.thinking)})
        yield from block({"type": "thinking", "thinking": "", "signature": ""}, deltas)
    if reply.full_text():
        yield from block({"type": "text", "text": ""}, [{"type": "text_delta", "text": p} for p in reply.text_chunks()])
    for cid, name, args in reply.calls():
        start = {"type": "tool_use", "id": cid.replace("call_", "toolu_"), "name": name, "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in reply.argument_chunks(args)]
        yield from block(start, deltas)
    yield _event(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        },
    )
    yield _event("message_stop", {"type": "message_stop"})

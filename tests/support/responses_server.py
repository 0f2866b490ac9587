"""A loopback OpenAI Responses API for tests and benchmarks: `POST /v1/responses` on 127.0.0.1, whole JSON or SSE,
written from OpenAI's public API reference (responses, streaming events, function calling, reasoning items,
conversation state).

    with ResponsesServer() as server:                      # or the `responses_server` fixture (tests/llm/conftest.py)
        server.add(Reply(text='Hello!'))                   # the scripted replies: tests/support/provider_reply.py
        llm = get_chat_model({'model_type': 'oai', 'api': 'responses', 'model': 'gpt-5-mini',
                              'model_server': server.base_url, 'api_key': server.api_key})

What the API checks is checked, and answered as it answers (400 with an OpenAI error object, 401
`invalid_api_key`): the key; `model` and `input`; unknown parameters; each input item's type; a
`function_call_output` for a call of this conversation and every `function_call` answered; a `reasoning` item
followed by the item it led to, known to the server (stored) or carrying its `encrypted_content` as the server
encrypted it; `previous_response_id` naming a stored response; a `json_schema` text format with a name and a
schema. `Reply(thinking=...)` is a reasoning item with a summary; responses are stored when `store` is not false,
so that a later request may continue from them.
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

PARAMETERS = {
    "model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls", "max_output_tokens",
    "temperature", "top_p", "reasoning", "text", "stream", "store", "previous_response_id", "include",
    "truncation", "metadata", "user", "service_tier", "background", "max_tool_calls", "prompt", "stream_options",
    "top_logprobs", "safety_identifier", "prompt_cache_key", "conversation",
}  # fmt: skip
ITEM_TYPES = {"message", "function_call", "function_call_output", "reasoning"}
_SECRET = b"loopback-reasoning-key"


def encrypted(item_id: str, summary: str) -> str:
    """The server's `encrypted_content` of a reasoning item."""
    return base64.b64encode(hmac.new(_SECRET, f"{item_id}:{summary}".encode(), hashlib.sha256).digest()).decode()


class BadRequest(Exception):
    def __init__(self, message: str, param: str | None = None, status: int = 400, code: str | None = None) -> None:
        super().__init__(message)
        self.param, self.status, self.code = param, status, code


class ResponsesServer(LoopbackServer):
    """The server; `start()` it (the fixture does), `add()` replies, read `requests` and `stored`."""

    reply_type = Reply
    thread_name = "responses-server"
    poll_interval = 0.05

    def __init__(self, api_key: str | None = "sk-loopback-responses") -> None:
        super().__init__()
        self.api_key = api_key
        self.stored: dict[str, dict] = {}  # response id -> {'input': items, 'output': items}
        self._n = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def reset(self) -> None:
        super().reset()
        self.stored.clear()
        self._n = 0

    def _no_reply(self) -> Reply:
        return Reply(status=400, error="loopback server: no scripted reply left")

    def next_id(self) -> int:
        with self._lock:
            self._n += 1
            return self._n

    def history(self, previous: str | None) -> list[dict]:
        """The items of the stored conversation a request continues."""
        out: list[dict] = []
        while previous is not None:
            entry = self.stored[previous]
            out[:0] = entry["input"] + entry["output"]
            previous = entry["previous"]
        return out

    def check(self, body: Any, headers: dict[str, str]) -> None:
        """Raise BadRequest as the Responses API would for this request."""
        if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
            raise BadRequest("Incorrect API key provided.", status=401, code="invalid_api_key")
        if not isinstance(body, dict):
            raise BadRequest("We could not parse the JSON body of your request.")
        for key in body:
            if key not in PARAMETERS:
                raise BadRequest(f"Unknown parameter: '{key}'.", key, code="unknown_parameter")
        if "model" not in body:
            raise BadRequest("Missing required parameter: 'model'.", "model", code="missing_required_parameter")
        previous = body.get("previous_response_id")
        if previous is not None and previous not in self.stored:
            raise BadRequest(f"Previous response with id '{previous}' not found.", "previous_response_id")
        items = body.get("input")
        if items is None:
            raise BadRequest("Missing required parameter: 'input'.", "input", code="missing_required_parameter")
        if isinstance(items, str):
            return
        known_reasoning = {i["id"] for e in self.stored.values() for i in e["output"] if i["type"] == "reasoning"}
        calls = {i["call_id"] for i in self.history(previous) if i.get("type") == "function_call"}
        answered = {i["call_id"] for i in self.history(previous) if i.get("type") == "function_call_output"}
        for n, item in enumerate(items):
            kind = item.get("type", "message" if "role" in item else None)
            if kind not in ITEM_TYPES:
                raise BadRequest(f"Invalid value: '{kind}'. Supported values are: {sorted(ITEM_TYPES)}", f"input[{n}]")
            if kind == "message":
                if item.get("role") not in ("user", "assistant", "system", "developer"):
                    raise BadRequest(f"Invalid value: '{item.get('role')}'.", f"input[{n}].role")
                content = item.get("content")
                if not isinstance(content, (str, list)):
                    raise BadRequest("Invalid type for content.", f"input[{n}].content")
            elif kind == "function_call":
                calls.add(item["call_id"])
            elif kind == "function_call_output":
                if item.get("call_id") not in calls:
                    raise BadRequest(f"No tool call found for function call output with call_id {item.get('call_id')}.",
                                     f"input[{n}]")  # fmt: skip
                answered.add(item["call_id"])
            elif kind == "reasoning":
                if n + 1 >= len(items):
                    raise BadRequest(f"Item '{item.get('id')}' of type 'reasoning' was provided without its required "
                                     "following item.", "input")  # fmt: skip
                summary = "".join(s.get("text", "") for s in item.get("summary") or [])
                stored = item.get("id") in known_reasoning and body.get("store", True) is not False
                if not stored and item.get("encrypted_content") != encrypted(item.get("id", ""), summary):
                    raise BadRequest(f"Item with id '{item.get('id')}' not found.", f"input[{n}]")
        missing = sorted(calls - answered)
        if missing:
            raise BadRequest(f"No tool output found for function call {missing[0]}.", "input")
        fmt = (body.get("text") or {}).get("format")
        if fmt and fmt.get("type") == "json_schema" and not (fmt.get("name") and isinstance(fmt.get("schema"), dict)):
            raise BadRequest("Missing required parameter: 'text.format.name' or 'text.format.schema'.", "text.format")
        for tool in body.get("tools") or []:
            if tool.get("type") == "function" and not tool.get("name"):
                raise BadRequest("Missing required parameter: 'tools[0].name'.", "tools")


class _Handler(LoopbackHandler):
    owner: ResponsesServer

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
            body = None
        req = Request(self.command, self.path, headers, body, self.client_address[:2])
        if self.path.split("?")[0].rstrip("/") != "/v1/responses":
            self._error(404, f"Invalid URL (POST {self.path})", None, "invalid_request_error")
            return
        try:
            self.owner.check(body, headers)
        except BadRequest as e:
            self.owner.requests.append(req)
            self._error(e.status, str(e), e.param, "invalid_request_error", e.code)
            req.outcome = "refused"
            req.done.set()
            return
        reply = self.owner._next_reply(req, record=True)
        self._finish(req, lambda: self._answer(body, reply))

    def _error(self, status: int, message: str, param: str | None, kind: str, code: str | None = None,
               headers: dict[str, str] | None = None) -> None:  # fmt: skip
        self._send_json(status, {"error": {"message": message, "type": kind, "param": param, "code": code}}, headers)

    def _answer(self, body: dict, reply: Reply) -> str:
        if reply.delay:
            time.sleep(reply.delay)
        if reply.status != 200:
            kind = "server_error" if reply.status >= 500 else "invalid_request_error"
            code = {429: "rate_limit_exceeded"}.get(reply.status)
            self._error(reply.status, reply.error or f"scripted error {reply.status}", None, kind, code, reply.headers)
            return "complete"
        n = self.owner.next_id()
        response = _response(body, reply, n)
        if body.get("store", True) is not False:
            given = body["input"] if isinstance(body["input"], list) else [{"role": "user", "content": body["input"]}]
            self.owner.stored[response["id"]] = {
                "input": given, "output": response["output"], "previous": body.get("previous_response_id"),
            }  # fmt: skip
        if not body.get("stream"):
            self._send_json(200, response, reply.headers)
            return "complete"
        self._send_head(200, {"Content-Type": "text/event-stream; charset=utf-8"}, {"Transfer-Encoding": "chunked"},
                        reply.headers)  # fmt: skip
        events = list(_events(response, reply))
        if not (
            reply.interval
            or reply.drop_after is not None
            or reply.end_after is not None
            or reply.error_after is not None
        ):
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
                self._write_chunk(_sse({"type": "error", "code": reply.error_type or "server_error",
                                        "message": reply.error or "The server had an error", "param": None,
                                        "sequence_number": sent}))  # fmt: skip
                break
            self._write_chunk(event)
        self._write_chunk(b"")
        return "complete"


ResponsesServer.handler = _Handler


def _response(body: dict, reply: Reply, n: int) -> dict:
    output: list[dict] = []
    include = "reasoning.encrypted_content" in (body.get("include") or [])
    if reply.thinking:
        item = {"type": "reasoning", "id": f"rs_{n}", "summary": [{"type": "summary_text", "text": reply.thinking}]}
        if include:
            item["encrypted_content"] = encrypted(item["id"], reply.thinking)
        output.append(item)
    if reply.full_text():
        output.append({
            "type": "message", "id": f"msg_{n}", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": reply.full_text(), "annotations": []}],
        })  # fmt: skip
    for cid, name, args in reply.calls():
        output.append({"type": "function_call", "id": f"fc_{n}_{cid}", "call_id": f"{cid}_{n}", "name": name,
                       "arguments": args, "status": "completed"})  # fmt: skip
    given = body["input"]
    prompt = tokens(given) + tokens(body.get("instructions") or "") + tokens(body.get("tools") or "")
    out_tokens = sum(tokens(i) for i in output)
    usage = reply.usage or {
        "input_tokens": prompt, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": out_tokens,
        "output_tokens_details": {"reasoning_tokens": tokens(reply.thinking) if reply.thinking else 0},
        "total_tokens": prompt + out_tokens,
    }  # fmt: skip
    incomplete = reply.stop == "max_output_tokens"
    return {
        "id": f"resp_{n}", "object": "response", "created_at": 0, "model": body["model"],
        "status": "incomplete" if incomplete else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None, "error": None,
        "output": output, "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "tool_choice": body.get("tool_choice", "auto"), "tools": body.get("tools") or [], "usage": usage,
        "previous_response_id": body.get("previous_response_id"), "store": body.get("store", True),
        "temperature": body.get("temperature", 1.0), "top_p": body.get("top_p", 1.0),
        "text": body.get("text") or {"format": {"type": "text"}}, "metadata": {}, "instructions": body.get("instructions"),
    }  # fmt: skip


def _sse(obj: dict) -> bytes:
    return f"event: {obj['type']}\ndata: {json.dumps(obj, ensure_ascii=False)}\n\n".encode()


def _events(response: dict, reply: Reply):
    seq = 0

    def event(kind: str, **fields: Any) -> bytes:
        nonlocal seq
        seq += 1
        return _sse({"type": kind, "sequence_number": seq - 1, **fields})

    start = {**response, "status": "in_progress", "output": [], "usage": None}
    yield event("response.created", response=start)
    yield event("response.in_progress", response=start)
    n = reply.chunk_size
    for index, item in enumerate(response["output"]):
        kind = item["type"]
        if kind == "reasoning":
            yield event("response.output_item.added", output_index=index, item={**item, "summary": []})
            text = item["summary"][0]["text"]
            yield event("response.reasoning_summary_part.added", item_id=item["id"], output_index=index,
                        summary_index=0, part={"type": "summary_text", "text": ""})  # fmt: skip
            for i in range(0, len(text), n):
                yield event("response.reasoning_summary_text.delta", item_id=item["id"], output_index=index,
                            summary_index=0, delta=text[i : i + n])  # fmt: skip
            yield event("response.reasoning_summary_text.done", item_id=item["id"], output_index=index,
                        summary_index=0, text=text)  # fmt: skip
        elif kind == "message":
            yield event("response.output_item.added", output_index=index,
                        item={**item, "status": "in_progress", "content": []})  # fmt: skip
            part = {"type": "output_text", "text": "", "annotations": []}
            yield event(
                "response.content_part.added", item_id=item["id"], output_index=index, content_index=0, part=part
            )
            for piece in reply.text_chunks():
                yield event("response.output_text.delta", item_id=item["id"], output_index=index, content_index=0,
                            delta=piece, logprobs=[])  # fmt: skip
            text = item["content"][0]["text"]
            yield event("response.output_text.done", item_id=item["id"], output_index=index, content_index=0,
                        text=text, logprobs=[])  # fmt: skip
            yield event("response.content_part.done", item_id=item["id"], output_index=index, content_index=0,
                        part={**part, "text": text})  # fmt: skip
        else:
            yield event("response.output_item.added", output_index=index,
                        item={**item, "arguments": "", "status": "in_progress"})  # fmt: skip
            for piece in reply.argument_chunks(item["arguments"]):
                yield event("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
                            delta=piece)  # fmt: skip
            yield event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                        arguments=item["arguments"])  # fmt: skip
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.incomplete" if response["status"] == "incomplete" else "response.completed",
                response=response)  # fmt: skip

"""A loopback OpenAI-compatible server for tests and benchmarks: real HTTP/1.1 and SSE on 127.0.0.1.

Use the `openai_server` fixture (tests/conftest.py): one server per session, emptied before each test.

    def test_hello(openai_server):
        openai_server.add('Hello there!')                              # a text reply, streamed 4 chars a chunk
        llm = get_chat_model({'model': 'm', 'model_server': openai_server.base_url, 'api_key': 'k'})
        assert llm.chat([{'role': 'user', 'content': 'hi'}], stream=False)[0]['content'] == 'Hello there!'
        assert openai_server.requests[0].json['messages'][0]['content'] == 'hi'

Replies are served in order, one per POST /v1/chat/completions (streamed when the request says
`stream: true`). `add()` takes a `Reply` or a str. A `Reply` says what to answer and how to misbehave:

    Reply(text='Hi', chunks=['H', 'i'])                     # explicit chunking (else `chunk_size`, default 4)
    Reply(tool_calls=[('get_weather', {'city': 'Paris'})])  # one or more calls (args: dict or JSON string)
    Reply(tool_calls=[...], object_arguments=True)          # arguments as a JSON object, whole (as Ollama sends)
    Reply(reasoning='thinking...', text='42')               # `reasoning_field='reasoning'` for the other name
    Reply(usage={'prompt_tokens': 7, 'completion_tokens': 3})   # sent when the request asks for it
    Reply(status=429, headers={'Retry-After': '0.2'})       # an HTTP error with an OpenAI error JSON body
    Reply(status=400, error={'message': 'bad', 'code': 'context_length_exceeded'})
    Reply(status=502, body='<html>Bad gateway</html>', content_type='text/html')   # any raw body
    Reply(delay=0.5)                                        # wait before the first byte (headers included)
    Reply(text=..., interval=0.01)                          # wait between chunks
    Reply(text=..., drop_after=3)                           # close the connection after 3 SSE events
    Reply(text=..., stall_after=3, stall=5)                 # send 3 events, then nothing for 5 s
    Reply(text=..., gate=event, gate_after=2)               # send 2 events, then wait for `event` (up to `stall` s)
    Reply(text=..., malformed_after=2)                      # after 2 events, a data line that is not JSON
    Reply(text=..., end_after=2)                            # end the body cleanly after 2 events, no [DONE]
    Reply(empty_choices=True)                               # every chunk (or the JSON body) has `choices: []`
    Reply(text='x', repeat=True)                            # served for every request from now on

`add()` also takes a callable `request -> Reply | str`, for replies computed from what was sent.

When the queue is empty the server answers 418 with an error saying so (not retryable, so a test that
asks for more than it scripted fails at once). What was received is in `server.requests`: one
`Request(method, path, headers, json, peer)` each, `headers` with lower-case names, `peer` the client's
(host, port) so that connection reuse can be checked; `request.outcome` becomes 'complete', 'dropped'
(by the script) or 'aborted' (the client went away) once the reply is over; `request.done` is an Event.

Events count from the first, which carries only `role` (so `drop_after=1` drops before any text).

`Reply(chunks=['x'] * 16000, repeat=True)` is the benchmark mode: with no interval or fault the
whole stream is encoded once, cached, and written in one go.

GET /v1/models lists `server.models`. POST /v1/embeddings answers `tests.support.embeddings.toy_vector` of each
input (in reverse order, with their indexes).

The rest of the API: `server.base_url` (ends in /v1), `server.pending` (replies not served yet),
`server.wait_done(i)` (wait for request i's outcome), `server.reset()`; outside pytest,
`with OpenAIServer() as server: ...` starts and stops one.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.support.embeddings import toy_vector
from tests.support.loopback import LoopbackHandler, LoopbackServer, Request, ScriptedText


@dataclass
class Reply(ScriptedText):
    """One scripted answer of the server (see the module docstring)."""

    text: str = ""
    chunks: list[str] | None = None
    chunk_size: int = 4
    tool_calls: list[tuple[str, dict | str]] = field(default_factory=list)
    reasoning: str = ""
    reasoning_field: str = "reasoning_content"
    object_arguments: bool = False
    usage: dict | None = None
    finish_reason: str | None = None
    model: str | None = None
    # faults
    status: int = 200
    error: dict | None = None
    body: str | bytes | None = None
    content_type: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    interval: float = 0.0
    drop_after: int | None = None
    stall_after: int | None = None
    stall: float = 30.0
    gate: threading.Event | None = None
    gate_after: int = 1
    malformed_after: int | None = None
    end_after: int | None = None
    empty_choices: bool = False
    role_chunk: bool = True  # the first event carries only the role (as OpenAI and vLLM send it)
    repeat: bool = False
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def usage_for(self, request: Request) -> dict:
        if self.usage is not None:
            return {**self.usage, "total_tokens": sum(v for v in self.usage.values() if isinstance(v, int))}
        msgs = (request.json or {}).get("messages") or []
        prompt = sum(len(json.dumps(m.get("content"), ensure_ascii=False)) for m in msgs) // 4 + 1
        completion = (len(self.full_text()) + len(self.reasoning)) // 4 + len(self.tool_calls)
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


class _Handler(LoopbackHandler):
    owner: OpenAIServer

    def handle(self) -> None:
        try:
            super().handle()
        except ConnectionError:  # the client went away between two requests
            pass

    def _record(self) -> Request:
        raw, headers = self._read_body()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        return Request(self.command, self.path, headers, body, self.client_address[:2])

    def do_GET(self) -> None:
        req = self._record()
        if self.path.rstrip("/").endswith("/models"):
            self.owner.requests.append(req)
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "loopback"} for m in self.owner.models]
            self._send_json(200, {"object": "list", "data": data})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
        req.outcome = "complete"
        req.done.set()

    def do_POST(self) -> None:
        req = self._record()
        if self.path.split("?")[0].rstrip("/").endswith("/embeddings"):
            self.owner.requests.append(req)
            self._finish(req, lambda: self._embeddings(req))
            return
        if not self.path.split("?")[0].rstrip("/").endswith("/chat/completions"):  # Azure adds ?api-version=
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        reply = self.owner._next_reply(req, record=True)
        self._finish(req, lambda: self._answer(req, reply))

    # ---- answers ---------------------------------------------------------------------------------------

    def _embeddings(self, req: Request) -> str:
        body = req.json if isinstance(req.json, dict) else {}
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            self._send_json(400, {"error": {"message": "input must be a string or a list of strings"}})
            return "complete"
        data = [{"object": "embedding", "index": i, "embedding": toy_vector(t)} for i, t in enumerate(texts)]
        data.reverse()  # a server may answer in any order: clients sort by index
        usage = {"prompt_tokens": sum(len(t) // 4 + 1 for t in texts), "total_tokens": 0}
        self._send_json(200, {"object": "list", "data": data, "model": body.get("model"), "usage": usage})
        return "complete"

    def _answer(self, req: Request, reply: Reply) -> str:
        if reply.delay:
            time.sleep(reply.delay)
        if reply.status != 200 or reply.body is not None:
            return self._send_raw(reply)
        body = req.json if isinstance(req.json, dict) else {}
        model = reply.model or body.get("model") or "test-model"
        if not body.get("stream"):
            self._send_json(200, _completion(reply, req, model), reply.headers)
            return "complete"
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        sse = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}
        self._send_head(200, sse, {"Transfer-Encoding": "chunked"}, reply.headers)
        faults = (reply.drop_after, reply.stall_after, reply.malformed_after, reply.end_after, reply.gate)
        faulty = any(f is not None for f in faults)
        if not (reply.interval or faulty):
            key = (model, include_usage, reply.usage is None and _usage_key(req))
            data = reply._cache.get(key) if reply.repeat else None
            if data is None:
                data = b"".join(_sse_events(reply, req, model, include_usage)) + b"data: [DONE]\n\n"
                if reply.repeat:
                    reply._cache[key] = data
            self._write_chunk(data)
            self._write_chunk(b"")
            return "complete"
        for sent, event in enumerate(_sse_events(reply, req, model, include_usage)):
            if sent and reply.interval:
                time.sleep(reply.interval)
            if reply.gate is not None and sent == reply.gate_after:
                reply.gate.wait(reply.stall)
            if reply.drop_after is not None and sent >= reply.drop_after:
                return self._drop()
            if reply.stall_after is not None and sent >= reply.stall_after:
                time.sleep(reply.stall)
                self.close_connection = True
                return "dropped"
            if reply.end_after is not None and sent >= reply.end_after:
                self._write_chunk(b"")
                return "dropped"
            if reply.malformed_after is not None and sent == reply.malformed_after:
                self._write_chunk(b'data: {"id": "broken", "choices": [\n\n')
            self._write_chunk(event)
        self._write_chunk(b"data: [DONE]\n\n")
        self._write_chunk(b"")
        return "complete"

    def _send_raw(self, reply: Reply) -> str:
        if reply.body is not None:
            body = reply.body.encode() if isinstance(reply.body, str) else reply.body
            ctype = reply.content_type or "text/plain; charset=utf-8"
        else:
            err = {"message": f"scripted error {reply.status}", "type": "error", "param": None, "code": None}
            err.update(reply.error or {})
            body = json.dumps({"error": err}).encode()
            ctype = reply.content_type or "application/json"
        self._send_body(reply.status, body, ctype, reply.headers)
        return "complete"


class OpenAIServer(LoopbackServer):
    """The server; `start()` it (the fixture does), `add()` replies, read `requests`."""

    handler = _Handler
    reply_type = Reply
    thread_name = "openai-server"
    poll_interval = 0.05

    def __init__(self) -> None:
        super().__init__()
        self.models = ["test-model"]

    @property
    def base_url(self) -> str:
        """The URL to give as `model_server` / `base_url` (ends in /v1)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def add(self, *replies: Reply | str | Callable[[Request], Reply | str]) -> OpenAIServer:
        """Queue replies, served one per chat request in order."""
        return super().add(*replies)

    @property
    def chat_requests(self) -> list[Request]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def _no_reply(self) -> Reply:
        return Reply(status=418, error={"message": "loopback server: no scripted reply left"})


def _usage_key(req: Request) -> int:
    msgs = (req.json or {}).get("messages") or []
    return len(json.dumps(msgs))


def _chunk(model: str, choices: list, usage: dict | None = None) -> dict:
    obj: dict[str, Any] = {
        "id": "chatcmpl-loopback",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": choices,
    }
    if usage is not None:
        obj["usage"] = usage
    return obj


def _sse_events(reply: Reply, req: Request, model: str, include_usage: bool):
    """The reply as SSE events (bytes), without the final [DONE]."""

    def event(obj: dict) -> bytes:
        return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"

    def delta(d: dict, finish: str | None = None) -> bytes:
        if reply.empty_choices:
            return event(_chunk(model, []))
        return event(_chunk(model, [{"index": 0, "delta": d, "logprobs": None, "finish_reason": finish}]))

    if reply.role_chunk:
        yield delta({"role": "assistant", "content": ""})
    n = reply.chunk_size
    for i in range(0, len(reply.reasoning), n):
        yield delta({reply.reasoning_field: reply.reasoning[i : i + n]})
    for piece in reply.text_chunks():
        yield delta({"content": piece})
    for i, (cid, name, args) in enumerate(reply.calls()):
        if reply.object_arguments:  # the whole call in one chunk, its arguments an object
            fn = {"name": name, "arguments": json.loads(args)}
            yield delta({"tool_calls": [{"index": i, "id": cid, "type": "function", "function": fn}]})
            continue
        yield delta(
            {"tool_calls": [{"index": i, "id": cid, "type": "function", "function": {"name": name, "arguments": ""}}]}
        )
        for j in range(0, len(args), n):
            yield delta({"tool_calls": [{"index": i, "function": {"arguments": args[j : j + n]}}]})
    finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
    yield delta({}, finish)
    if include_usage:
        yield event(_chunk(model, [], reply.usage_for(req)))


def _completion(reply: Reply, req: Request, model: str) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": reply.full_text() or None}
    if reply.reasoning:
        message[reply.reasoning_field] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": cid,
                "type": "function",
                "function": {"name": name, "arguments": json.loads(args) if reply.object_arguments else args},
            }
            for cid, name, args in reply.calls()
        ]
    finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
    choices = (
        [] if reply.empty_choices else [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}]
    )
    return {
        "id": "chatcmpl-loopback",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": choices,
        "usage": reply.usage_for(req),
    }

"""A loopback DashScope server for tests: the native HTTP API and its SSE stream, on 127.0.0.1.

It answers what the `dashscope` SDK sends when pointed at `server.base_url`:

    POST /api/v1/services/aigc/text-generation/generation          (Generation.call)
    POST /api/v1/services/aigc/multimodal-generation/generation    (MultiModalConversation.call)
    GET  /api/v1/uploads?action=getPolicy&model=...                (upload policy for local files)
    POST /oss                                                      (the upload itself, multipart)
    POST /api/v1/services/embeddings/text-embedding/text-embedding (text-embedding-v*: toy vectors, see embeddings.py)

A request with the header `X-DashScope-SSE: enable` gets an SSE stream in DashScope's format
(`id:` / `event:result` / `:HTTP_STATUS/200` / `data:{"output": ..., "usage": ..., "request_id": ...}`),
with only the new text per event when `parameters.incremental_output` is true and the text so far
otherwise; any other request gets one JSON body. Answers use `result_format='message'` (choices).

    server.add('Hello!')                                            # text, 4 characters an event
    server.add(Reply(text='Hi', chunks=['H', 'i']))                 # explicit events
    server.add(Reply(reasoning='hmm', text='42'))                   # reasoning_content first
    server.add(Reply(tool_calls=[('get_weather', {'city': 'Paris'}), ('get_time', {})]))
    server.add(Reply(usage={'input_tokens': 7, 'output_tokens': 3}))
    server.add(Reply(status=429, code='Throttling.RateQuota', headers={'Retry-After': '0.1'}))
    server.add(Reply(status=500))  /  Reply(status=401, code='InvalidApiKey')   # HTTP errors, DashScope JSON
    server.add(Reply(status=502, body='<html>Bad gateway</html>'))  # any raw (text/html) body
    server.add(Reply(text='abcdefgh', drop_after=1))                # close the connection after 1 event
    server.add(Reply(text='abcdefgh', error_after=1, code='InternalError'))    # an `event:error` after 1 event
    server.add(Reply(text='x', interval=0.05))                      # wait between events
    server.add(lambda request: 'computed from ' + request.path)     # computed per request

Set `server.api_key` to make every request with another key fail with 401 InvalidApiKey.
Received requests are in `server.requests` (`Request(method, path, headers, json, peer)`, lower-case
header names, `outcome` 'complete' | 'dropped' | 'aborted' once answered); uploaded files in
`server.uploads` as {object key: bytes}. With no scripted reply left the server answers 400
`NoScriptedReply`, which is not retried, so a test that asks for more than it scripted fails at once.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support import loopback
from tests.support.embeddings import toy_vector
from tests.support.loopback import LoopbackHandler, LoopbackServer, ScriptedText

EMBEDDING_PATH = "/api/v1/services/embeddings/text-embedding/text-embedding"
GENERATION_PATHS = (
    "/api/v1/services/aigc/text-generation/generation",
    "/api/v1/services/aigc/multimodal-generation/generation",
)


@dataclass
class Reply(ScriptedText):
    """One scripted answer (see the module docstring)."""

    text: str = ""
    chunks: list[str] | None = None
    chunk_size: int = 4
    reasoning: str = ""
    tool_calls: list[tuple[str, dict | str]] = field(default_factory=list)
    usage: dict | None = None
    finish_reason: str | None = None
    # faults
    status: int = 200
    code: str | None = None
    message: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: str | None = None
    delay: float = 0.0
    interval: float = 0.0
    drop_after: int | None = None
    error_after: int | None = None

    def error_body(self, request_id: str) -> dict:
        code = self.code or {401: "InvalidApiKey", 429: "Throttling.RateQuota"}.get(self.status, "InternalError")
        return {"code": code, "message": self.message or f"scripted error {self.status}", "request_id": request_id}


class Request(loopback.Request):
    """One request the server received."""

    @property
    def parameters(self) -> dict:
        return (self.json or {}).get("parameters") or {}

    @property
    def messages(self) -> list[dict]:
        return ((self.json or {}).get("input") or {}).get("messages") or []


class _Handler(LoopbackHandler):
    owner: DashScopeServer

    def _record(self) -> tuple[Request, bytes]:
        raw, headers = self._read_body()
        body: Any = None
        if raw and "json" in headers.get("content-type", ""):
            body = json.loads(raw)
        req = Request(self.command, urlsplit(self.path).path, headers, body, self.client_address[:2])
        with self.owner._lock:
            self.owner.requests.append(req)
        return req, raw

    def _authorized(self, req: Request) -> bool:
        key = self.owner.api_key
        if key is None or req.headers.get("authorization") == f"Bearer {key}":
            return True
        self._send_json(401, {"code": "InvalidApiKey", "message": "Invalid API-key provided.", "request_id": "r-0"})
        return False

    def do_GET(self) -> None:
        req, _ = self._record()
        query = parse_qs(urlsplit(self.path).query)
        if req.path.rstrip("/") == "/api/v1/uploads" and query.get("action") == ["getPolicy"]:
            if self._authorized(req):
                port = self.server.server_address[1]
                policy = {
                    "policy": "loopback-policy",
                    "signature": "loopback-signature",
                    "upload_dir": "dashscope-instant/loopback",
                    "upload_host": f"http://127.0.0.1:{port}/oss",
                    "expire_in_seconds": 300,
                    "max_file_size_mb": 100,
                    "capacity_limit_mb": 1000,
                    "oss_access_key_id": "loopback-id",
                    "x_oss_object_acl": "private",
                    "x_oss_forbid_overwrite": "true",
                }
                self._send_json(200, {"request_id": "r-policy", "data": policy})
        else:
            self._send_json(404, {"code": "NotFound", "message": f"no route {req.path}"})
        req.outcome = "complete"
        req.done.set()

    def do_POST(self) -> None:
        req, raw = self._record()
        self._finish(req, lambda: self._route(req, raw))

    def _route(self, req: Request, raw: bytes) -> str:
        if req.path == "/oss":
            self._upload(req, raw)
        elif req.path == EMBEDDING_PATH:
            if self._authorized(req):
                self._embeddings(req)
        elif req.path not in GENERATION_PATHS:
            self._send_json(404, {"code": "NotFound", "message": f"no route {req.path}"})
        elif self._authorized(req):
            return self._answer(req, self.owner._next_reply(req))
        return "complete"

    def _embeddings(self, req: Request) -> None:
        texts = ((req.json or {}).get("input") or {}).get("texts") if isinstance(req.json, dict) else None
        if not isinstance(texts, list) or len(texts) > 10:
            self._send_json(400, {"code": "InvalidParameter", "message": "input.texts: 1 to 10 strings"})
            return
        out = [{"text_index": i, "embedding": toy_vector(t)} for i, t in enumerate(texts)]
        body = {"output": {"embeddings": out}, "usage": {"total_tokens": 1}, "request_id": "r-embed"}
        self._send_json(200, body)

    def _upload(self, req: Request, raw: bytes) -> None:
        head = f"Content-Type: {req.headers.get('content-type', '')}\r\n\r\n".encode()
        form = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
        fields = {part.get_param("name", header="content-disposition"): part for part in form.iter_parts()}
        key = fields["key"].get_payload(decode=True).decode()
        self.owner.uploads[key] = fields["file"].get_payload(decode=True)
        self._send_json(200, {})

    def _answer(self, req: Request, reply: Reply) -> str:
        if reply.delay:
            self.owner.pause(reply.delay)
        request_id = f"r-{len(self.owner.requests)}"
        if reply.body is not None:
            self._send_body(reply.status, reply.body.encode(), "text/html; charset=utf-8")
            return "complete"
        if reply.status != 200:
            self._send_json(reply.status, reply.error_body(request_id), reply.headers)
            return "complete"
        multimodal = "multimodal" in req.path
        if req.headers.get("x-dashscope-sse") != "enable":
            self._send_json(200, _whole(reply, multimodal, request_id), reply.headers)
            return "complete"
        sse = {"Content-Type": "text/event-stream;charset=UTF-8", "Transfer-Encoding": "chunked"}
        self._send_head(200, sse, {"X-Request-Id": request_id}, reply.headers)
        incremental = bool(req.parameters.get("incremental_output"))
        for n, data in enumerate(_events(reply, multimodal, incremental, request_id)):
            if n and reply.interval:
                self.owner.pause(reply.interval)
            if reply.drop_after is not None and n >= reply.drop_after:
                return self._drop()
            if reply.error_after is not None and n >= reply.error_after:
                body = json.dumps(reply.error_body(request_id))
                status = reply.status if reply.status != 200 else 500
                self._write_chunk(f"id:{n + 1}\nevent:error\n:HTTP_STATUS/{status}\ndata:{body}\n\n".encode())
                break
            self._write_chunk(f"id:{n + 1}\nevent:result\n:HTTP_STATUS/200\ndata:{data}\n\n".encode())
        self._write_chunk(b"")
        return "complete"


class DashScopeServer(LoopbackServer):
    """The server: `start()` it, `add()` replies, read `requests` and `uploads`."""

    handler = _Handler
    reply_type = Reply
    thread_name = "dashscope-server"

    def __init__(self) -> None:
        super().__init__()
        self.api_key: str | None = None
        self.uploads: dict[str, bytes] = {}

    @property
    def base_url(self) -> str:
        """The HTTP API root to give as `base_url` (what the SDK calls base_http_api_url)."""
        return f"http://127.0.0.1:{self.port}/api/v1"

    def add(self, *replies: Reply | str | Callable[[Request], Reply | str]) -> DashScopeServer:
        """Queue replies, one per generation request, in order."""
        return super().add(*replies)

    def reset(self) -> None:
        """Forget queued replies, recorded requests, uploads and the expected key."""
        super().reset()
        self.uploads = {}
        self.api_key = None

    @property
    def generation_requests(self) -> list[Request]:
        return [r for r in self.requests if r.path in GENERATION_PATHS]

    def _no_reply(self) -> Reply:
        return Reply(status=400, code="NoScriptedReply", message="loopback server: no scripted reply left")


def _usage(reply: Reply, produced: int) -> dict:
    usage = dict(reply.usage or {"input_tokens": 10, "output_tokens": produced})
    usage["total_tokens"] = usage.get("input_tokens", 0) + usage.get("output_tokens", 0)
    return usage


def _body(message: dict, finish: str, usage: dict, request_id: str) -> dict:
    choice = {"finish_reason": finish, "message": {"role": "assistant", **message}}
    return {"output": {"choices": [choice]}, "usage": usage, "request_id": request_id}


def _events(reply: Reply, multimodal: bool, incremental: bool, request_id: str) -> Iterator[str]:
    """The `data:` payloads of a streamed reply (JSON strings)."""
    pieces: list[dict] = [
        {"content": "", "reasoning_content": reply.reasoning[i : i + reply.chunk_size]}
        for i in range(0, len(reply.reasoning), reply.chunk_size)
    ]
    so_far = ""
    for piece in reply.text_chunks():
        so_far += piece
        text = piece if incremental else so_far
        pieces.append({"content": [{"text": text}] if multimodal else text})
    for i, (cid, name, args) in enumerate(reply.calls()):
        head = {"index": i, "id": cid, "type": "function", "function": {"name": name, "arguments": ""}}
        pieces.append({"content": "", "tool_calls": [head]})
        for j in range(0, len(args), reply.chunk_size):
            part = {"index": i, "id": "", "type": "function", "function": {"arguments": args[j : j + reply.chunk_size]}}
            pieces.append({"content": "", "tool_calls": [part]})
    finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
    pieces.append({"content": [] if multimodal else ""})
    for n, message in enumerate(pieces):
        last = n == len(pieces) - 1
        yield json.dumps(_body(message, finish if last else "null", _usage(reply, n + 1), request_id))


def _whole(reply: Reply, multimodal: bool, request_id: str) -> dict:
    text = reply.full_text()
    message: dict[str, Any] = {"content": [{"text": text}] if multimodal else text}
    if reply.reasoning:
        message["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {"index": i, "id": cid, "type": "function", "function": {"name": name, "arguments": args}}
            for i, (cid, name, args) in enumerate(reply.calls())
        ]
    finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
    produced = len(reply.text_chunks()) + len(reply.tool_calls) + (1 if reply.reasoning else 0)
    return _body(message, finish, _usage(reply, produced), request_id)

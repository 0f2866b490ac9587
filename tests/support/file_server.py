"""A loopback HTTP server of a directory's files (the standard library's), for tools that download URLs.

with FileServer(tmp_path) as server:
    url = server.url('report.csv')       # http://127.0.0.1:<port>/report.csv
"""

from __future__ import annotations

import functools
import threading
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self


class ThreadedServer:
    """A ThreadingHTTPServer on 127.0.0.1 (a free port) with `handler`, served from a thread while open."""

    def __init__(self, handler: Any) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        """The URL of `path` ('/x' or 'x') on this server."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/{path.lstrip('/')}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


class QuietHandler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


class FileServer(ThreadedServer):
    """Serves `root` on 127.0.0.1 (a free port) from a thread while open; `requests` counts the GETs."""

    def __init__(self, root: Path) -> None:
        outer = self
        self.requests = 0

        class Handler(SimpleHTTPRequestHandler, QuietHandler):
            def do_GET(self) -> None:
                outer.requests += 1
                super().do_GET()

        super().__init__(functools.partial(Handler, directory=str(root)))

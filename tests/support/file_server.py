"""A loopback HTTP server of a directory's files (the standard library's), for tools that download URLs.

with FileServer(tmp_path) as server:
    url = server.url('report.csv')       # http://127.0.0.1:<port>/report.csv
"""

from __future__ import annotations

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


class FileServer:
    """Serves `root` on 127.0.0.1 (a free port) from a thread while open; `requests` counts the GETs."""

    def __init__(self, root: Path) -> None:
        outer = self
        self.requests = 0

        class Handler(_QuietHandler):
            def do_GET(self) -> None:
                outer.requests += 1
                super().do_GET()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/{name}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

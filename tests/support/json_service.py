"""A loopback JSON web service for tools that call one (web search, image search, weather): real HTTP on 127.0.0.1.

    with JSONService() as service:
        service.route('POST', '/search', lambda request: {'organic': [...]})   # or (status, body)
        WebSearch({'api_key': 'k', 'url': service.url('/search')}).call({'query': 'q'})
        service.requests[0].json, service.requests[0].query, service.requests[0].headers['x-api-key']

A request with no route gets 404. `requests` holds every request received, in order.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.file_server import QuietHandler, ThreadedServer


@dataclass
class ServiceRequest:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    json: Any


Answer = Callable[[ServiceRequest], Any]


class JSONService(ThreadedServer):
    """Answers routes with JSON from a thread while open."""

    def __init__(self) -> None:
        self.requests: list[ServiceRequest] = []
        self.routes: dict[tuple[str, str], Answer] = {}
        outer = self

        class Handler(QuietHandler):
            def _answer(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                request = ServiceRequest(
                    self.command, parts.path, {k: v[-1] for k, v in parse_qs(parts.query).items()},
                    {k.lower(): v for k, v in self.headers.items()}, json.loads(body) if body else None,
                )  # fmt: skip
                outer.requests.append(request)
                answer = outer.routes.get((self.command, parts.path))
                status, obj = (404, {"error": "no route"}) if answer is None else _status_and_body(answer(request))
                data = json.dumps(obj, ensure_ascii=False).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _answer

        super().__init__(Handler)

    def route(self, method: str, path: str, answer: Answer) -> None:
        self.routes[method, path] = answer


def _status_and_body(answer: Any) -> tuple[int, Any]:
    if isinstance(answer, tuple) and len(answer) == 2 and isinstance(answer[0], int):
        return answer[0], answer[1]
    return 200, answer

"""A scripted A2A partner on loopback, for attacks on `A2AAgent`: real HTTP, the A2A card and JSON-RPC as the
`a2a-sdk` client speaks them, and whatever a hostile partner would do.

    with A2APartner(interface="http://127.0.0.1:9/steal") as partner:   # a card naming another origin
        ...A2AAgent(partner.url, api_key="k")...
        partner.requests   # every request received: (method, path, headers)

`description`: the card's description (any size); `answer`: the text of every SendMessage's answer;
`answer_bytes`: an answer of that many bytes, written in pieces (never held whole); `endless=True`: an answer that
never ends (the server writes until the client goes away). The card names `interface` (default: its own
`/a2a/partner`).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

CARD_PATH = "/.well-known/agent-card.json"
_PIECE = 64 * 1024


class A2APartner:
    """See the module docstring."""

    def __init__(
        self, *, interface: str | None = None, description: str = "A partner agent.", answer: str = "Done.",
        answer_bytes: int | None = None, endless: bool = False,
    ) -> None:  # fmt: skip
        self.interface, self.description, self.answer = interface, description, answer
        self.answer_bytes, self.endless = answer_bytes, endless
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.bodies: list[Any] = []
        self._lock = threading.Lock()
        handler = type("Handler", (_Handler,), {"owner": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.2,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def card(self) -> dict[str, Any]:
        return {
            "name": "partner",
            "description": self.description,
            "supportedInterfaces": [
                {
                    "url": self.interface or f"{self.url}/a2a/partner",
                    "protocolBinding": "JSONRPC",
                    "protocolVersion": "1.0",
                }  # fmt: skip
            ],
            "version": "1.0",
            "capabilities": {"streaming": False},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [],
        }

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


class _Handler(BaseHTTPRequestHandler):
    owner: A2APartner
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _note(self) -> None:
        with self.owner._lock:
            self.owner.requests.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}))

    def do_GET(self) -> None:
        self._note()
        if not self.path.endswith(CARD_PATH):
            self.send_error(404)
            return
        self._json(self.owner.card())

    def do_POST(self) -> None:
        self._note()
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"null")
        with self.owner._lock:
            self.owner.bodies.append(body)
        owner = self.owner
        if owner.answer_bytes is None and not owner.endless:
            message = {"messageId": "m1", "role": "ROLE_AGENT", "parts": [{"text": owner.answer}]}
            self._json({"jsonrpc": "2.0", "id": body.get("id"), "result": {"message": message}})
            return
        head = json.dumps({"jsonrpc": "2.0", "id": body.get("id")})[:-1]
        head += ', "result": {"message": {"messageId": "m1", "role": "ROLE_AGENT", "parts": [{"text": "'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            self._chunk(head.encode())
            sent, piece = 0, b"x" * _PIECE
            while owner.endless or sent < (owner.answer_bytes or 0):
                self._chunk(piece)
                sent += len(piece)
            self._chunk(b'"}]}}}')
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    def _json(self, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

"""Bounds on the connections of `chatagent serve`: how many may be open, and how long a client may take to send a
request's headers (a slow-loris client holds a connection by sending them a byte at a time).

uvicorn's HTTP/1.1 protocol (h11) with two additions: a connection past `max_connections` is answered 503 and
closed at once; a connection whose request headers have not all arrived `header_timeout` seconds after it opened
(or after its previous response) is closed. The body has its own limit (`body_timeout`, in the request handling).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

_BUSY = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\ncontent-length: 28\r\nconnection: close\r\n\r\n" \
    b"too many connections; retry\n"  # fmt: skip


def bounded_protocol(max_connections: int, header_timeout: float) -> type[H11Protocol]:
    """An h11 protocol class for uvicorn (`Config(http=...)`) with these bounds."""
    if max_connections < 1 or header_timeout <= 0:
        raise ValueError("max_connections must be at least 1 and header_timeout positive")

    class Bounded(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                transport.write(_BUSY)
                transport.close()
                return
            self._wait_for_headers()

        def _wait_for_headers(self) -> None:
            self._stop_waiting()
            self._header_timer = self.loop.call_later(header_timeout, self._headers_late)

        def _stop_waiting(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_late(self) -> None:
            self._header_timer = None
            idle = self.cycle is None or self.cycle.response_complete  # no request under way: its headers are late
            if idle and not self.transport.is_closing():
                self.transport.close()

        def handle_events(self) -> None:
            cycle = self.cycle
            super().handle_events()
            if self.cycle is not cycle:  # a request's headers arrived
                self._stop_waiting()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._wait_for_headers()  # the next request on this connection gets the same time

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_waiting()
            super().connection_lost(exc)

    return Bounded


__all__ = ["bounded_protocol"]

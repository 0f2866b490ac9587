"""A TCP relay on loopback that a test can cut: `TcpRelay(port).start()` listens on a free port of 127.0.0.1 and
copies bytes both ways between each client and 127.0.0.1:`port`; `cut()` closes every relayed connection and the
listening socket (connecting then is refused: what a network failure between a replica and its database looks
like to the replica), `restore()` listens again on the same port; `freeze()` holds every byte, connections left
open (a server that stops answering), `thaw()` delivers them and goes on.

    with TcpRelay(pg.port).start() as relay:
        url = f"postgresql://postgres@127.0.0.1:{relay.port}/postgres"
        relay.cut(); relay.restore()
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Any, Self


class TcpRelay:
    """Relays 127.0.0.1:`self.port` to 127.0.0.1:`target` until cut (see the module docstring)."""

    def __init__(self, target: int) -> None:
        self.target, self.port = target, 0
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._flowing = threading.Event()
        self._flowing.set()

    def start(self) -> Self:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port, self._listener = listener.getsockname()[1], listener
        threading.Thread(target=self._accept, args=(listener,), name="tcp-relay", daemon=True).start()
        return self

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:  # closed by cut()
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                if self._listener is not listener:  # cut meanwhile
                    client.close(), upstream.close()
                    return
                self._open |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._copy, args=(a, b), name="tcp-relay-copy", daemon=True).start()

    def _copy(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                self._flowing.wait()
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """Close every relayed connection and stop listening: new connections are refused."""
        with self._lock:
            listener, self._listener = self._listener, None
            conns, self._open = self._open, set()
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for s in conns:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def freeze(self) -> None:
        """Hold every byte from now on, in both directions, connections kept open."""
        self._flowing.clear()

    def thaw(self) -> None:
        """Deliver what was held, and relay again."""
        self._flowing.set()

    def restore(self) -> None:
        """Listen again on the same port."""
        self.start()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.thaw()
        self.cut()

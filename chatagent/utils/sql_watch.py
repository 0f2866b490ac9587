"""A deadline on PostgreSQL's answers: a store's call (a query, a transaction) that gets no answer from the server
within the store's `answer_timeout` fails instead of waiting for ever on a server that keeps its connections open
and answers nothing (a frozen process, a paused VM whose kernel still acknowledges, a proxy holding every byte).
Neither libpq's `connect_timeout` (connecting only) nor TCP keepalives (the peer's kernel answers them) end that wait.

    with watching(conn, 30.0) as watch:     # one thread for every watched call of the process, started when needed
        conn.execute("SELECT 1")
    watch.fired                             # True: the call was ended (the connection is broken: drop it)

    url, seconds = answer_timeout(url)      # a store URL's own `answer_timeout=SECONDS` (0: no deadline), taken off

Past the deadline the watchdog shuts the connection's socket down: libpq's wait ends, psycopg raises an
OperationalError and marks the connection broken. It does so holding the lock the call's end takes, so a call that
ended meanwhile is never touched, and a connection it ended is never given back to a pool (`fired`).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["ANSWER_TIMEOUT_S", "Watch", "answer_timeout", "watching"]

ANSWER_TIMEOUT_S = 30.0  # a store's call without an answer for this long fails (a URL's answer_timeout=... changes it)


class Watch:
    """One watched call (a context manager: the block is the call): its connection, how long it may wait, when it
    must have ended, and whether the watchdog ended it (`fired`)."""

    __slots__ = ("conn", "seconds", "deadline", "fired")

    def __init__(self, conn: Any, seconds: float) -> None:
        self.conn, self.seconds, self.deadline, self.fired = conn, seconds, 0.0, False

    def __enter__(self) -> Watch:
        if self.seconds > 0:
            self.deadline = time.monotonic() + self.seconds
            _WATCHDOG.add(self)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.seconds > 0:
            _WATCHDOG.remove(self)


class _Watchdog:
    def __init__(self) -> None:
        self._calls: dict[Watch, None] = {}
        self._cond = threading.Condition(threading.Lock())
        self._wake_at = float("inf")  # when the thread wakes next (inf: when told)
        self._thread: threading.Thread | None = None

    def add(self, watch: Watch) -> None:
        with self._cond:
            self._calls[watch] = None
            if self._thread is None or not self._thread.is_alive():  # (a forked child has no thread)
                self._thread = threading.Thread(target=self._run, name="chatagent-sql-watch", daemon=True)
                self._thread.start()
            elif watch.deadline < self._wake_at:
                self._cond.notify()

    def remove(self, watch: Watch) -> None:
        with self._cond:
            self._calls.pop(watch, None)

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                for watch in [w for w in self._calls if w.deadline <= now]:
                    del self._calls[watch]
                    watch.fired = True
                    _shut(watch.conn)
                self._wake_at = min((w.deadline for w in self._calls), default=float("inf"))
                self._cond.wait(self._wake_at - now if self._calls else None)


def _shut(conn: Any) -> None:
    """Shut the socket of psycopg connection `conn` down (both ways): its call's wait on the server ends."""
    try:
        fd = conn.pgconn.socket
    except Exception:  # closed meanwhile (psycopg raises OperationalError): nothing waits on it
        return
    sock = socket.socket(fileno=os.dup(fd))
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already shut down or reset by the peer: its call fails anyway
        pass
    finally:
        sock.close()


_WATCHDOG = _Watchdog()


def watching(conn: Any, seconds: float) -> Watch:
    """Watch the calls made on psycopg connection `conn` inside the `with` block: past `seconds` (0: never) the
    connection's socket is shut down and the call waiting on it fails."""
    return Watch(conn, seconds)


def answer_timeout(url: str, default: float = ANSWER_TIMEOUT_S) -> tuple[str, float]:
    """`url` without its `answer_timeout=SECONDS` (libpq does not know it), and those seconds (else `default`).
    A value that is not a number of seconds >= 0 raises ValueError."""
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    given = [v for k, v in pairs if k == "answer_timeout"]
    if not given:
        return url, default
    try:
        seconds = float(given[-1])
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:  # (NaN too)
        raise ValueError(f"answer_timeout must be a number of seconds >= 0, got {given[-1]!r}")
    query = urlencode([(k, v) for k, v in pairs if k != "answer_timeout"])
    return urlunsplit(parts._replace(query=query)), seconds

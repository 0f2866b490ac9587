"""The PostgreSQL session store (psycopg 3): a small pool of connections, the statements of `SQLStore`, and run
locks as session-level advisory locks on one connection of their own, which the server releases when that
connection ends, however the process ended.

A lost connection (server restarted, network cut, backend terminated) fails the call in progress with a
SessionStoreError saying so; the connection is dropped and the next call opens a new one. So does a call the
server gives no answer within `answer_timeout` seconds (30; the URL's `answer_timeout=SECONDS` changes it, 0: no
deadline): a server that keeps its connections open and answers nothing never holds a turn (`chatagent.utils.sql_watch`).
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from chatagent.sessions.errors import SessionBusyError, SessionStoreError
from chatagent.sessions.store import FIND, SQLStore
from chatagent.utils.extras import missing_dependency
from chatagent.utils.keys import redact
from chatagent.utils.sql import SCHEMA_LOCK, connect_postgres, first_line
from chatagent.utils.sql_watch import answer_timeout, watching

_POOL_SIZE = 10
_POOL_WAIT_S = 60.0
_BLOB_LOCK = 0x63686174_00000002  # advisory lock keys of our own ("chat" ...), after utils.sql's SCHEMA_LOCK


def _pg(sql: str) -> str:
    return sql.replace("?", "%s")


class _Cursor:
    """A psycopg cursor that takes our `?` placeholders."""

    __slots__ = ("_cur",)

    def __init__(self, cur: Any) -> None:
        self._cur = cur

    def execute(self, sql: str, params: tuple = ()) -> _Cursor:
        self._cur.execute(_pg(sql), params)
        return self

    def fetchone(self) -> Any:
        return self._cur.fetchone()

    def fetchall(self) -> list[tuple]:
        return self._cur.fetchall()

    @property
    def rowcount(self) -> int:
        return self._cur.rowcount


class PostgresStore(SQLStore):
    """Sessions in a PostgreSQL database (see `chatagent.sessions.store`). Tables go into the first schema of the
    connection's search_path (`?options=-csearch_path%3Dmyschema` in the URL picks one); `answer_timeout=SECONDS`
    in the URL: how long a call may wait for the server's answer (see the module docstring)."""

    dialect = {
        "id_pk": "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
        "int": "BIGINT",
        "real": "DOUBLE PRECISION",
        "blob": "BYTEA",
        "without_rowid": "",
    }
    # pg_class read with the statement's snapshot (to_regclass's catalog cache may miss a table another process
    # just created while we waited for the schema lock)
    find_for_update = FIND + " FOR UPDATE"
    has_table = (
        "SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relname = ? AND n.nspname = current_schema()"
    )

    def __init__(self, url: str) -> None:
        try:
            import psycopg
        except ModuleNotFoundError as e:
            raise missing_dependency(e, "a postgresql:// session store") from None
        self._psycopg = psycopg
        self.url = redact(url)
        try:
            self._conninfo, self.answer_timeout = answer_timeout(url)
        except ValueError as e:
            raise SessionStoreError(f"bad PostgreSQL store URL {self.url!r}: {e}") from None
        self._idle: list[Any] = []
        self._open = 0  # connections of the pool, idle or in use
        self._pool = threading.Condition(threading.RLock())
        self._lock_conn: Any = None
        self._held: set[int] = set()
        self._lock_mutex = threading.RLock()
        self._identity = ""  # the database and schema the tables are in: part of every run lock's key
        try:
            self._ensure_schema()
            database, schema = self._read("SELECT current_database(), current_schema()")[0]
            self._identity = f"{database}\0{schema}"
        except BaseException:
            self.close()
            raise

    # ---- connections and transactions -------------------------------------------------------------------

    def _connect(self) -> Any:
        return connect_postgres(
            self._conninfo, needed_for="a postgresql:// session store", autocommit=True, error=SessionStoreError
        )

    @contextlib.contextmanager
    def _connection(self) -> Iterator[Any]:
        conn = self._take()
        healthy = False
        try:
            with watching(conn, self.answer_timeout) as watch:
                try:
                    yield conn
                except self._psycopg.Error as e:
                    if watch.fired:
                        self._forget_idle()  # (they wait on the same server)
                        raise self._unanswered() from e
                    raise
            healthy = not watch.fired  # (an answer came as the watchdog ended it: the connection is broken)
        except self._psycopg.Error as e:
            healthy = not (conn.closed or conn.broken)
            if not healthy:
                self._forget_idle()
            raise self._error(e, lost=not healthy) from e
        except BaseException:
            healthy = not (conn.closed or conn.broken)
            raise
        finally:
            self._give_back(conn, healthy)

    def _take(self) -> Any:
        deadline = time.monotonic() + _POOL_WAIT_S
        with self._pool:
            while True:
                if self._idle:
                    return self._idle.pop()
                if self._open < _POOL_SIZE:
                    self._open += 1
                    break
                if not self._pool.wait(deadline - time.monotonic()):
                    raise SessionStoreError(f"{self.url}: no free connection after {_POOL_WAIT_S:g} s")
        try:
            return self._connect()
        except BaseException:
            with self._pool:
                self._open -= 1
                self._pool.notify()
            raise

    def _give_back(self, conn: Any, healthy: bool) -> None:
        with self._pool:
            if healthy:
                self._idle.append(conn)
                conn = None
            else:
                self._open -= 1
            self._pool.notify()
        if conn is not None:
            conn.close()

    def _forget_idle(self) -> None:
        """Close the idle connections: when one was lost (a server restart, a network cut) they are likely lost
        too, and the next call should not fail on one of them."""
        with self._pool:
            idle, self._idle = self._idle, []
            self._open -= len(idle)
            self._pool.notify_all()
        for conn in idle:
            with contextlib.suppress(Exception):
                conn.close()

    def _read(self, sql: str, params: tuple = ()) -> list[tuple]:
        with self._connection() as conn:
            return conn.execute(_pg(sql), params).fetchall()

    @contextlib.contextmanager
    def _write(self, sync: bool = True) -> Iterator[_Cursor]:
        with self._connection() as conn, conn.transaction(), conn.cursor() as cur:
            if not sync:  # the server has it at commit; it may not be on its disk yet
                cur.execute("SET LOCAL synchronous_commit = off")
            yield _Cursor(cur)

    def _lock_schema(self, cur: Any) -> None:
        cur.execute("SELECT pg_advisory_xact_lock(?)", (SCHEMA_LOCK,))

    def _lock_blobs(self, cur: Any, exclusive: bool) -> None:
        fn = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
        cur.execute(f"SELECT {fn}(?)", (_BLOB_LOCK,))

    def _unanswered(self) -> SessionStoreError:
        return SessionStoreError(
            f"PostgreSQL at {self.url} gave no answer in {self.answer_timeout:g} s (its answer_timeout); "
            "the next call reconnects"
        )

    def _error(self, e: Exception, lost: bool) -> SessionStoreError:
        if lost:
            return SessionStoreError(
                f"lost the connection to PostgreSQL at {self.url}: {first_line(e)}; the next call reconnects"
            )
        return SessionStoreError(f"PostgreSQL at {self.url}: {first_line(e)}")

    def close(self) -> None:
        """Close the idle connections, and the lock connection if no run holds a lock (used again, the store opens
        new ones)."""
        self._forget_idle()
        with self._lock_mutex:
            if not self._held:
                self._drop_lock_connection()

    # ---- run locks ----------------------------------------------------------------------------------------

    def lock(self, user: str, session_id: str) -> Callable[[], None]:
        # advisory locks are shared by everything in the database: the key names the store too, so that two stores
        # (two schemas of one database) never hold up each other's runs
        name = f"{self._identity}\0{user}\0{session_id}".encode()
        key = int.from_bytes(hashlib.blake2b(name, digest_size=8).digest(), "big", signed=True)
        with self._lock_mutex:
            if key not in self._held and self._try_lock(key):
                self._held.add(key)
            else:
                raise SessionBusyError(
                    f"session {session_id!r} in {self.url} has a run in progress; try again when it ends"
                )
        released = False

        def release() -> None:
            nonlocal released
            with self._lock_mutex:
                if released:
                    return
                released = True
                self._held.discard(key)
                if self._lock_conn is not None:
                    try:
                        with watching(self._lock_conn, self.answer_timeout):
                            self._lock_conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
                    except self._psycopg.Error:
                        self._drop_lock_connection()  # the server released its locks with it

        return release

    def _try_lock(self, key: int) -> bool:
        while True:
            conn, fresh = self._lock_conn, False
            if conn is None or conn.closed or conn.broken:
                conn, fresh = self._open_lock_connection(), True
            with watching(conn, self.answer_timeout) as watch:
                try:
                    return bool(conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0])
                except self._psycopg.Error as e:
                    lost = conn.closed or conn.broken
                    self._drop_lock_connection()
                    self._forget_idle()
                    if watch.fired:
                        raise self._unanswered() from e
                    if fresh or not lost:  # (one kept from before the server restarted or the network was cut: again)
                        raise self._error(e, lost=True) from e

    def _open_lock_connection(self) -> Any:
        self._drop_lock_connection()
        conn = self._connect()
        try:  # a new connection holds nothing: take again the locks of the runs still going here
            with watching(conn, self.answer_timeout) as watch:
                for held in self._held:
                    conn.execute("SELECT pg_try_advisory_lock(%s)", (held,))
        except self._psycopg.Error as e:
            conn.close()
            raise (self._unanswered() if watch.fired else self._error(e, lost=True)) from e
        self._lock_conn = conn
        return conn

    def _drop_lock_connection(self) -> None:
        conn, self._lock_conn = self._lock_conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

"""Opening SQL connections, one way for every store of ours (sessions, memories, the retrieval backend, the vector
cache): a SQLite file kept private, in autocommit mode (each store writes its own BEGIN), with the pragmas the store
asks for; a PostgreSQL database through psycopg, with a connect timeout unless the URL sets one. How a store pools
its connections and runs its transactions stays its own.

    private_sqlite_file(path)                               # its folder 0700, the file 0600 (and so -wal, -shm)
    conn = connect_sqlite(path, timeout=10, wal=True, synchronous="NORMAL")
    conn = connect_postgres(url, needed_for="a PostgreSQL memory store", autocommit=False, error=MemoryStoreError)
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from chatagent.utils.extras import missing_dependency
from chatagent.utils.keys import redact
from chatagent.utils.workspace import private_dirs, private_file

__all__ = ["CONNECT_TIMEOUT_S", "connect_postgres", "connect_sqlite", "first_line", "private_sqlite_file"]

CONNECT_TIMEOUT_S = 10  # a PostgreSQL server that does not answer: seconds before connecting fails


def private_sqlite_file(path: Path) -> None:
    """Make `path`'s missing folders (0700) and the file itself, empty (0600), unless they exist: SQLite gives its
    -wal and -shm files the database file's mode, so none of them is readable by other users."""
    private_dirs(path.parent)
    private_file(path)


def connect_sqlite(
    path: Path | str,
    *,
    timeout: float,
    wal: bool = False,
    synchronous: Literal["FULL", "NORMAL"] | None = None,
) -> sqlite3.Connection:
    """A connection to the SQLite file `path` in autocommit mode (`isolation_level=None`: the store says BEGIN),
    usable from any thread, waiting up to `timeout` seconds for another writer; `wal` sets journal_mode=WAL (kept in
    the file), `synchronous` the connection's own durability."""
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
    try:
        if wal:
            conn.execute("PRAGMA journal_mode=WAL")
        if synchronous is not None:
            conn.execute(f"PRAGMA synchronous={synchronous}")
    except BaseException:
        conn.close()
        raise
    return conn


def connect_postgres(
    url: str,
    *,
    needed_for: str,
    autocommit: bool,
    error: Callable[[str], Exception] | None = None,
) -> Any:
    """A psycopg connection to `url`, with a `CONNECT_TIMEOUT_S` connect timeout unless the URL sets its own.

    Without psycopg: a MissingDependencyError naming the extra that installs it (`needed_for` says what for). A
    server that refuses or does not answer raises `error(message)` (the URL without its credentials and the first
    line of psycopg's reason), chained to psycopg's error; without `error`, psycopg's own error."""
    try:
        import psycopg  # the [postgres] extra: only for a postgresql:// URL
    except ModuleNotFoundError as e:
        raise missing_dependency(e, needed_for) from None
    extra: dict[str, Any] = {} if "connect_timeout" in url else {"connect_timeout": CONNECT_TIMEOUT_S}
    try:
        return psycopg.connect(url, autocommit=autocommit, **extra)
    except psycopg.Error as e:
        if error is None:
            raise
        raise error(f"cannot connect to PostgreSQL at {redact(url)}: {first_line(e)}") from e


SCHEMA_LOCK = 0x63686174_00000001  # the advisory lock key under which every store creates its tables ("chat" ...)


def lock_schema(cur: Any) -> None:
    """Hold, until the transaction ends, the lock under which a PostgreSQL store creates its tables: `CREATE TABLE
    (or EXTENSION) IF NOT EXISTS` is not safe against another connection doing the same at once (it fails on a
    unique index of the catalogue), which replicas starting together do."""
    cur.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))


def first_line(e: BaseException) -> str:
    """The first line of an error's message (a database's message may go on for lines), or its type's name."""
    return (str(e).strip().splitlines() or [type(e).__name__])[0]

"""Where memories are kept: a SQLite file (default) or a PostgreSQL database, named by the URLs sessions use.

    sqlite:///relative/memory.db   sqlite:////absolute/memory.db   a plain file path   postgresql://user@host/db

Without a URL: $CHATAGENT_MEMORY_STORE, else `<workspace>/memory/memory.db`. A SQLite file (and its journal) is
created readable by its owner only (0600). Every statement names the user: one user's records are never read,
changed or deleted through another's. Each user has a version, bumped by every change, so that a process keeps
a user's records in memory and reloads them only when someone (any process) changed them.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from chatagent.memories.records import MemoryRecord
from chatagent.sessions.errors import SessionStoreError
from chatagent.sessions.sqlite import parse_sqlite_url
from chatagent.utils.extras import missing_dependency
from chatagent.utils.keys import redact
from chatagent.utils.workspace import private_dirs, private_file, workspace_root

__all__ = ["MemoryStore", "MemoryStoreError", "default_memory_url", "open_memory_store"]

MemoryStoreError = SessionStoreError  # the same failures as a session store's: unreachable, unreadable, refused

_COLUMNS = "id, user_id, scope, text, importance, source, created, updated, model, vector"
_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS chatagent_memories (id TEXT PRIMARY KEY, user_id TEXT NOT NULL, scope TEXT NOT NULL,"
    " text TEXT NOT NULL, importance {real} NOT NULL, source TEXT NOT NULL, created {real} NOT NULL,"
    " updated {real} NOT NULL, model TEXT, vector {blob})",
    "CREATE INDEX IF NOT EXISTS chatagent_memories_by_user ON chatagent_memories (user_id, updated)",
    "CREATE TABLE IF NOT EXISTS chatagent_memory_versions (user_id TEXT PRIMARY KEY, version {int} NOT NULL)",
]
_BUMP = (
    "INSERT INTO chatagent_memory_versions (user_id, version) VALUES (?, 1) "
    "ON CONFLICT (user_id) DO UPDATE SET version = chatagent_memory_versions.version + 1"
)


def default_memory_url() -> str:
    """$CHATAGENT_MEMORY_STORE, else the SQLite file `<workspace>/memory/memory.db`."""
    env = os.environ.get("CHATAGENT_MEMORY_STORE")
    if env:
        return env
    return "sqlite:///" + str(workspace_root() / "memory" / "memory.db")


class MemoryStore:
    """Memory records of every user in one database (see the module docstring); thread-safe."""

    def __init__(self, url: str) -> None:
        self.url = url
        scheme = urlsplit(url).scheme.lower() if "://" in url else "sqlite"
        if scheme not in ("sqlite", "postgresql", "postgres"):
            raise MemoryStoreError(f"unknown memory store URL {redact(url)!r}: use sqlite:///path.db or postgresql://")
        self.postgres = scheme != "sqlite"
        self._lock = threading.Lock()
        self._conn: Any = None
        self._pid = 0
        types = {"real": "DOUBLE PRECISION", "blob": "BYTEA", "int": "BIGINT"} if self.postgres else {}
        types = types or {"real": "REAL", "blob": "BLOB", "int": "INTEGER"}
        with self._transaction() as cur:
            for statement in _SCHEMA:
                cur.execute(self._sql(statement.format(**types)))

    def __repr__(self) -> str:
        return f"MemoryStore({redact(self.url)!r})"

    # ---- connections ---------------------------------------------------------------------------------------

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.postgres else sql

    def _connect(self) -> Any:
        if self.postgres:
            try:
                import psycopg
            except ModuleNotFoundError as e:
                raise missing_dependency(e, "a PostgreSQL memory store") from None
            try:
                return psycopg.connect(self.url, connect_timeout=10)
            except psycopg.Error as e:
                raise MemoryStoreError(f"cannot connect to PostgreSQL at {redact(self.url)}: {e}") from None
        path = _sqlite_path(self.url)
        try:
            private_dirs(path.parent)  # this user's, writable by no one else
            private_file(path)  # 0600 (SQLite gives its journal files the same mode), or this user's own
        except OSError as e:
            raise MemoryStoreError(f"cannot use the memory store {path}: {e.strerror or e}") from None
        conn = sqlite3.connect(path, timeout=10, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        return conn

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[Any]:
        with self._lock:
            if self._conn is None or self._pid != os.getpid():
                self._conn, self._pid = self._connect(), os.getpid()
            conn = self._conn
            try:
                if self.postgres:
                    with conn.transaction(), conn.cursor() as cur:
                        yield cur
                else:
                    cur = conn.cursor()
                    cur.execute("BEGIN IMMEDIATE")
                    try:
                        yield cur
                    except BaseException:
                        cur.execute("ROLLBACK")
                        raise
                    cur.execute("COMMIT")
            except (sqlite3.Error, OSError) as e:
                raise MemoryStoreError(f"memory store {redact(self.url)}: {e}") from None
            except Exception as e:
                if type(e).__module__.startswith("psycopg"):
                    self._conn = None  # a lost connection: the next call opens a new one
                    raise MemoryStoreError(f"memory store {redact(self.url)}: {str(e).splitlines()[0]}") from None
                raise

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    # ---- reading -------------------------------------------------------------------------------------------

    def version(self, user: str) -> int:
        """How many changes `user`'s records have seen (0: none yet)."""
        with self._transaction() as cur:
            cur.execute(self._sql("SELECT version FROM chatagent_memory_versions WHERE user_id = ?"), (user,))
            row = cur.fetchone()
        return int(row[0]) if row else 0

    def load(self, user: str) -> tuple[int, list[tuple[MemoryRecord, str | None, bytes | None]]]:
        """`user`'s version and records, oldest first, each with the model and bytes of its vector (or None)."""
        with self._transaction() as cur:
            cur.execute(self._sql("SELECT version FROM chatagent_memory_versions WHERE user_id = ?"), (user,))
            row = cur.fetchone()
            cur.execute(self._sql(f"SELECT {_COLUMNS} FROM chatagent_memories WHERE user_id = ? ORDER BY created, id"),
                        (user,))  # fmt: skip
            rows = cur.fetchall()
        return (int(row[0]) if row else 0), [
            (_record(r), r[8], bytes(r[9]) if r[9] is not None else None) for r in rows
        ]

    def get(self, user: str, record_id: str) -> MemoryRecord | None:
        with self._transaction() as cur:
            cur.execute(self._sql(f"SELECT {_COLUMNS} FROM chatagent_memories WHERE user_id = ? AND id = ?"),
                        (user, record_id))  # fmt: skip
            row = cur.fetchone()
        return _record(row) if row else None

    def list(self, user: str, scope: str | None = None) -> list[MemoryRecord]:
        """`user`'s records, most recently updated first (of one scope when given)."""
        sql = f"SELECT {_COLUMNS} FROM chatagent_memories WHERE user_id = ?"
        params: tuple[Any, ...] = (user,)
        if scope is not None:
            sql, params = sql + " AND scope = ?", (user, scope)
        with self._transaction() as cur:
            cur.execute(self._sql(sql + " ORDER BY updated DESC, id"), params)
            return [_record(r) for r in cur.fetchall()]

    # ---- writing -------------------------------------------------------------------------------------------

    def add(
        self, records: Sequence[MemoryRecord], model: str | None = None, vectors: Sequence[bytes] | None = None
    ) -> None:
        """Store new records (with their vectors by `model`, when given)."""
        if not records:
            return
        rows = [
            (r.id, r.user, r.scope, r.text, r.importance, orjson.dumps(r.source).decode(), r.created, r.updated,
             model if vectors is not None else None, vectors[i] if vectors is not None else None)
            for i, r in enumerate(records)
        ]  # fmt: skip
        with self._transaction() as cur:
            cur.executemany(
                self._sql(f"INSERT INTO chatagent_memories ({_COLUMNS}) VALUES ({','.join('?' * 10)})"), rows
            )
            for user in {r.user for r in records}:
                cur.execute(self._sql(_BUMP), (user,))

    def update(self, user: str, record_id: str, text: str, importance: float, updated: float) -> bool:
        """Change a record's text and importance (its vector is dropped, to be made again); False if not found."""
        with self._transaction() as cur:
            cur.execute(
                self._sql("UPDATE chatagent_memories SET text = ?, importance = ?, updated = ?, model = NULL, "
                          "vector = NULL WHERE user_id = ? AND id = ?"),
                (text, importance, updated, user, record_id),
            )  # fmt: skip
            changed = cur.rowcount > 0
            if changed:
                cur.execute(self._sql(_BUMP), (user,))
        return changed

    def set_vectors(self, user: str, model: str, vectors: dict[str, bytes], texts: dict[str, str]) -> None:
        """Store the vectors of records by id, each only if the record still has the text it was made from."""
        rows = [(model, v, user, rid, texts[rid]) for rid, v in vectors.items()]
        with self._transaction() as cur:
            cur.executemany(
                self._sql("UPDATE chatagent_memories SET model = ?, vector = ? WHERE user_id = ? AND id = ? AND text = ?"),
                rows,
            )  # fmt: skip
            cur.execute(self._sql(_BUMP), (user,))

    def delete(self, user: str, record_ids: Sequence[str] | None = None) -> int:
        """Delete `user`'s records of these ids (all of them with None); how many were deleted."""
        with self._transaction() as cur:
            if record_ids is None:
                cur.execute(self._sql("DELETE FROM chatagent_memories WHERE user_id = ?"), (user,))
                count = cur.rowcount
            else:
                count = 0
                for rid in record_ids:
                    cur.execute(self._sql("DELETE FROM chatagent_memories WHERE user_id = ? AND id = ?"), (user, rid))
                    count += cur.rowcount
            if count:
                cur.execute(self._sql(_BUMP), (user,))
        return count


def _record(row: Sequence[Any]) -> MemoryRecord:
    return MemoryRecord(
        id=row[0], user=row[1], scope=row[2], text=row[3], importance=float(row[4]), source=orjson.loads(row[5]),
        created=float(row[6]), updated=float(row[7]),
    )  # fmt: skip


def _sqlite_path(url: str) -> Path:
    if "://" not in url:
        return Path(url).expanduser().absolute()
    return parse_sqlite_url(url)[0].absolute()


_stores: dict[str, MemoryStore] = {}
_stores_lock = threading.Lock()


def open_memory_store(store: str | os.PathLike[str] | MemoryStore | None = None) -> MemoryStore:
    """The store for a URL or path (one per URL in a process); None means `default_memory_url()`."""
    if isinstance(store, MemoryStore):
        return store
    url = default_memory_url() if store is None else os.fspath(store)
    key = url if "://" in url else "sqlite:///" + str(Path(url).expanduser().resolve())
    with _stores_lock:
        found = _stores.get(key)
        if found is None:
            found = _stores[key] = MemoryStore(url)
        return found

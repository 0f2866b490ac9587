"""Where memories are kept: a SQLite file (default) or a PostgreSQL database, named by the URLs sessions use.

    sqlite:///relative/memory.db   sqlite:////absolute/memory.db   a plain file path   postgresql://user@host/db

Without a URL: $CHATAGENT_MEMORY_STORE, else `<workspace>/memory/memory.db`. A SQLite file (and its journal) is
created readable by its owner only (0600). Every statement names the user: one user's records are never read,
changed or deleted through another's. Each user has a version, bumped by every change, so that a process keeps
a user's records in memory and reloads them only when someone (any process) changed them. A PostgreSQL call the
server gives no answer within the URL's `answer_timeout` seconds (default 30, as a session store's) fails with a
MemoryStoreError (`chatagent.utils.sql_watch`): the turn then goes on without memories.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from chatagent.memories.records import MemoryRecord
from chatagent.sessions.errors import SessionStoreError
from chatagent.sessions.sqlite import parse_sqlite_url
from chatagent.utils.keys import redact
from chatagent.utils.sql import connect_postgres, connect_sqlite, lock_schema, private_sqlite_file
from chatagent.utils.sql_watch import answer_timeout, watching
from chatagent.utils.workspace import workspace_root

__all__ = ["MemoryStore", "MemoryStoreError", "default_memory_url", "open_memory_store"]

MemoryStoreError = SessionStoreError  # the same failures as a session store's: unreachable, unreadable, refused

_COLUMNS = "id, user_id, scope, text, importance, source, created, updated, model, vector"
_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS chatagent_memories (id TEXT PRIMARY KEY, user_id TEXT NOT NULL, scope TEXT NOT NULL,"
    " text TEXT NOT NULL, importance {real} NOT NULL, source TEXT NOT NULL, created {real} NOT NULL,"
    " updated {real} NOT NULL, model TEXT, vector {blob})",
    "CREATE INDEX IF NOT EXISTS chatagent_memories_by_user ON chatagent_memories (user_id, updated)",
    "CREATE TABLE IF NOT EXISTS chatagent_memory_versions (user_id TEXT PRIMARY KEY, version {int} NOT NULL)",
    "CREATE TABLE IF NOT EXISTS chatagent_memory_forgotten (user_id TEXT NOT NULL, id TEXT NOT NULL, seq {int} NOT NULL)",
    "CREATE INDEX IF NOT EXISTS chatagent_memory_forgotten_by_seq ON chatagent_memory_forgotten (user_id, seq)",
    "CREATE TABLE IF NOT EXISTS chatagent_memory_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
]
_SEQ_INDEX = "CREATE INDEX IF NOT EXISTS chatagent_memories_by_seq ON chatagent_memories (user_id, seq)"
_BUMP = (
    "INSERT INTO chatagent_memory_versions (user_id, version) VALUES (?, 1) "
    "ON CONFLICT (user_id) DO UPDATE SET version = chatagent_memory_versions.version + 1 RETURNING version"
)
_ROW = "id, scope, text, importance, created, updated, model, vector"  # what recall's index takes (recall.Row)


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
        self.answer_timeout = 0.0  # seconds a PostgreSQL call may wait for an answer (0: no deadline)
        if self.postgres:
            try:
                self._conninfo, self.answer_timeout = answer_timeout(url)
            except ValueError as e:
                raise MemoryStoreError(f"bad memory store URL {redact(url)!r}: {e}") from None
        self.path: Path | None = None if self.postgres else _sqlite_path(url)  # the SQLite file
        self._lock = threading.Lock()
        self._conn: Any = None
        self._pid = 0
        types = {"real": "DOUBLE PRECISION", "blob": "BYTEA", "int": "BIGINT"} if self.postgres else {}
        types = types or {"real": "REAL", "blob": "BLOB", "int": "INTEGER"}
        with self._transaction() as cur:
            if self.postgres:
                lock_schema(cur)  # replicas opening one store at once
            for statement in _SCHEMA:
                cur.execute(self._sql(statement.format(**types)))
            self._add_seq(cur, types["int"])
            cur.execute(self._sql("INSERT INTO chatagent_memory_meta (name, value) VALUES ('epoch', ?) "
                                  "ON CONFLICT (name) DO NOTHING"), (uuid.uuid4().hex,))  # fmt: skip
            cur.execute("SELECT value FROM chatagent_memory_meta WHERE name = 'epoch'")
            self.epoch: str = cur.fetchone()[0]  # this database's identity: a recreated file is another store

    def _add_seq(self, cur: Any, integer: str) -> None:
        """The `seq` column (stores made before it have none): each record's user version when it last changed."""
        if self.postgres:
            cur.execute(f"ALTER TABLE chatagent_memories ADD COLUMN IF NOT EXISTS seq {integer}")
        else:
            cur.execute("PRAGMA table_info(chatagent_memories)")
            if "seq" not in {row[1] for row in cur.fetchall()}:
                cur.execute(f"ALTER TABLE chatagent_memories ADD COLUMN seq {integer}")
        cur.execute(_SEQ_INDEX)

    def __repr__(self) -> str:
        return f"MemoryStore({redact(self.url)!r})"

    # ---- connections ---------------------------------------------------------------------------------------

    @property
    def _by_id(self) -> str:
        """`user_id` as a condition beside `id IN (...)`: SQLite would otherwise walk the user's records by an index
        of user_id rather than look the ids up (`+` keeps its planner off that index)."""
        return "user_id" if self.postgres else "+user_id"

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.postgres else sql

    def _connect(self) -> Any:
        if self.postgres:
            return connect_postgres(
                self._conninfo, needed_for="a PostgreSQL memory store", autocommit=False, error=MemoryStoreError
            )
        path = _sqlite_path(self.url)
        try:
            private_sqlite_file(path)  # this user's folder, writable by no one else; the file 0600, or this user's own
        except OSError as e:
            raise MemoryStoreError(f"cannot use the memory store {path}: {e.strerror or e}") from None
        return connect_sqlite(path, timeout=10, wal=True)

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[Any]:
        with self._lock:
            if self._conn is None or self._pid != os.getpid():
                self._conn, self._pid = self._connect(), os.getpid()
            conn = self._conn
            watched = watching(conn, self.answer_timeout)
            try:
                if self.postgres:
                    with watched, conn.transaction(), conn.cursor() as cur:
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
                    why = str(e).splitlines()[0]
                    if watched.fired:
                        why = f"no answer in {self.answer_timeout:g} s (its answer_timeout)"
                    raise MemoryStoreError(f"memory store {redact(self.url)}: {why}") from None
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

    def changes(self, user: str, since: int = 0) -> tuple[int, list[tuple[Any, ...]], list[str]]:
        """`user`'s version, the records changed after version `since` (all with 0), as (id, scope, text,
        importance, created, updated, model, vector bytes), and the ids deleted after it. Read in this order, so a
        change made meanwhile may be in the rows already: applying them twice is harmless."""
        with self._transaction() as cur:
            cur.execute(self._sql("SELECT version FROM chatagent_memory_versions WHERE user_id = ?"), (user,))
            row = cur.fetchone()
            if since > 0:
                cur.execute(self._sql(f"SELECT {_ROW} FROM chatagent_memories WHERE user_id = ? AND seq > ? "
                                      "ORDER BY created, id"), (user, since))  # fmt: skip
            else:
                cur.execute(self._sql(f"SELECT {_ROW} FROM chatagent_memories WHERE user_id = ? ORDER BY created, id"),
                            (user,))  # fmt: skip
            rows = [(*r[:7], bytes(r[7]) if r[7] is not None else None) for r in cur.fetchall()]
            forgotten: list[str] = []
            if since > 0:
                cur.execute(self._sql("SELECT id FROM chatagent_memory_forgotten WHERE user_id = ? AND seq > ?"),
                            (user, since))  # fmt: skip
                forgotten = [r[0] for r in cur.fetchall()]
        return (int(row[0]) if row else 0), rows, forgotten

    def get_many(self, user: str, record_ids: Sequence[str]) -> dict[str, MemoryRecord]:
        """`user`'s records of these ids (those that exist), by id."""
        if not record_ids:
            return {}
        marks = ",".join("?" * len(record_ids))
        with self._transaction() as cur:
            cur.execute(self._sql(f"SELECT {_COLUMNS} FROM chatagent_memories WHERE {self._by_id} = ? AND id IN ({marks})"),
                        (user, *record_ids))  # fmt: skip
            return {r[0]: _record(r) for r in cur.fetchall()}

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

    def unembedded(self, user: str, model: str, ids: Sequence[str] | None = None) -> list[tuple[str, str]]:
        """(id, text) of `user`'s records (of these `ids`, when given) that have no vector by `model`, oldest first:
        what waits to be embedded."""
        sql = "SELECT id, text FROM chatagent_memories WHERE user_id = ? AND (model IS NULL OR model <> ?)"
        params: tuple[Any, ...] = (user, model)
        if ids is not None:
            if not ids:
                return []
            sql = sql.replace("user_id = ?", f"{self._by_id} = ?") + f" AND id IN ({','.join('?' * len(ids))})"
            params = (*params, *ids)
        with self._transaction() as cur:
            cur.execute(self._sql(sql + " ORDER BY created, id"), params)
            return [(r[0], r[1]) for r in cur.fetchall()]

    # ---- writing -------------------------------------------------------------------------------------------

    def add(
        self, records: Sequence[MemoryRecord], model: str | None = None, vectors: Sequence[bytes] | None = None
    ) -> None:
        """Store new records (with their vectors by `model`, when given)."""
        if not records:
            return
        with self._transaction() as cur:
            seq = {user: self._bump(cur, user) for user in dict.fromkeys(r.user for r in records)}
            rows = [
                (r.id, r.user, r.scope, r.text, r.importance, orjson.dumps(r.source).decode(), r.created, r.updated,
                 model if vectors is not None else None, vectors[i] if vectors is not None else None, seq[r.user])
                for i, r in enumerate(records)
            ]  # fmt: skip
            cur.executemany(
                self._sql(f"INSERT INTO chatagent_memories ({_COLUMNS}, seq) VALUES ({','.join('?' * 11)})"), rows
            )

    def update(self, user: str, record_id: str, text: str, importance: float, updated: float) -> bool:
        """Change a record's text and importance (its vector is dropped, to be made again); False if not found."""
        with self._transaction() as cur:
            seq = self._bump(cur, user)
            cur.execute(
                self._sql("UPDATE chatagent_memories SET text = ?, importance = ?, updated = ?, model = NULL, "
                          "vector = NULL, seq = ? WHERE user_id = ? AND id = ?"),
                (text, importance, updated, seq, user, record_id),
            )  # fmt: skip
            return cur.rowcount > 0

    def set_vectors(self, user: str, model: str, vectors: dict[str, bytes], texts: dict[str, str]) -> None:
        """Store the vectors of records by id, each only if the record still has the text it was made from."""
        with self._transaction() as cur:
            seq = self._bump(cur, user)
            cur.executemany(
                self._sql("UPDATE chatagent_memories SET model = ?, vector = ?, seq = ? "
                          "WHERE user_id = ? AND id = ? AND text = ?"),
                [(model, v, seq, user, rid, texts[rid]) for rid, v in vectors.items()],
            )  # fmt: skip

    def delete(self, user: str, record_ids: Sequence[str] | None = None) -> int:
        """Delete `user`'s records of these ids (all of them with None); how many were deleted. Their ids are kept
        (`changes` tells an index to forget them), not their texts."""
        with self._transaction() as cur:
            seq = self._bump(cur, user)
            forgotten = "INSERT INTO chatagent_memory_forgotten (user_id, id, seq) SELECT user_id, id, ? "
            if record_ids is None:
                cur.execute(self._sql(forgotten + "FROM chatagent_memories WHERE user_id = ?"), (seq, user))
                cur.execute(self._sql("DELETE FROM chatagent_memories WHERE user_id = ?"), (user,))
                return cur.rowcount
            count = 0
            for rid in record_ids:
                cur.execute(self._sql(forgotten + "FROM chatagent_memories WHERE user_id = ? AND id = ?"),
                            (seq, user, rid))  # fmt: skip
                cur.execute(self._sql("DELETE FROM chatagent_memories WHERE user_id = ? AND id = ?"), (user, rid))
                count += cur.rowcount
            return count

    def _bump(self, cur: Any, user: str) -> int:
        """Count a change of `user`'s records (in the transaction of `cur`); the user's new version."""
        cur.execute(self._sql(_BUMP), (user,))
        return int(cur.fetchone()[0])


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

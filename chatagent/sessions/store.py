"""Session stores: where conversations are kept, named by a URL; the schema and its migrations.

    sqlite:///relative/path.db      a SQLite file (SQLAlchemy's convention: three slashes, then the path)
    sqlite:////absolute/path.db     four slashes for an absolute path; a plain file path works too
    postgresql://user:pw@host:5432/db   a PostgreSQL database (needs psycopg: pip install 'chatagent[postgres]')

Without a URL the store is `$CHATAGENT_SESSION_STORE`, else `<workspace>/sessions/sessions.db`. One `Store` per
URL serves a process (`store_urls.open_store` caches it). Every dialect runs the same statements (`SQLStore`); a backend adds
its connections, its transactions and the lock that keeps two runs off one session (a file lock for SQLite, an
advisory lock for PostgreSQL), both released by the system when a process dies.

A conversation is stored turn by turn: one row per turn holding its messages as a JSON array, written in one
transaction with the session's version, which every change bumps. A turn is saved only if the version is still
the one its run started from, so two writers never interleave. Attached files are stored once by content hash
(see `chatagent.sessions.attachments`). The schema version is kept in `chatagent_meta`; opening a store creates or
migrates the schema, and refuses, without changing anything, a store written by a newer chatagent.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from chatagent.sessions import attachments, journal, pending
from chatagent.sessions.errors import SessionStoreError, conflict_error, damaged_error
from chatagent.sessions.pending import PendingTurn, decode_pending, encode, summed_usage

SCHEMA_VERSION = 3
DEFAULT_USER = "local"
_UNCHANGED: Any = object()

# Each migration takes a store at version N (the key) to N + 1, inside one transaction: statements in the
# dialect-neutral form of SCHEMA below.
# 2: turns in progress and their checkpoints, and what a session's runs used (tokens, cost)
_V2 = [*pending.SCHEMA, "ALTER TABLE chatagent_sessions ADD COLUMN usage {blob}"]
_V3 = ["ALTER TABLE chatagent_turns ADD COLUMN times {blob}"]  # 3: when each message was done (sessions.history)
MIGRATIONS: dict[int, list[str]] = {1: _V2, 2: _V3}

SCHEMA = [
    "CREATE TABLE chatagent_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE chatagent_sessions (sid {id_pk}, user_id TEXT NOT NULL, session_id TEXT NOT NULL, title TEXT, "
    "system_message {blob}, created {real} NOT NULL, updated {real} NOT NULL, version {int} NOT NULL DEFAULT 0, "
    "message_count {int} NOT NULL DEFAULT 0, UNIQUE (user_id, session_id))",
    "CREATE INDEX chatagent_sessions_by_user ON chatagent_sessions (user_id, updated)",
    "CREATE TABLE chatagent_turns (sid {int} NOT NULL, turn {int} NOT NULL, body {blob} NOT NULL, "
    "PRIMARY KEY (sid, turn)) {without_rowid}",
    "CREATE TABLE chatagent_blobs (sha256 TEXT PRIMARY KEY, size {int} NOT NULL, data {blob} NOT NULL)",
    "CREATE TABLE chatagent_turn_blobs (sid {int} NOT NULL, turn {int} NOT NULL, sha256 TEXT NOT NULL, "
    "PRIMARY KEY (sid, turn, sha256)) {without_rowid}",
    "CREATE INDEX chatagent_turn_blobs_by_sha ON chatagent_turn_blobs (sha256)",
    *_V2,
    *_V3,
]

LOAD = (
    "SELECT s.sid, s.version, s.system_message, t.body FROM chatagent_sessions s "
    "LEFT JOIN chatagent_turns t ON t.sid = s.sid WHERE s.user_id = ? AND s.session_id = ? ORDER BY t.turn"
)
FIND = "SELECT sid, version FROM chatagent_sessions WHERE user_id = ? AND session_id = ?"
CREATE = (
    "INSERT INTO chatagent_sessions (user_id, session_id, created, updated) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (user_id, session_id) DO NOTHING"
)
ADVANCE = (
    "UPDATE chatagent_sessions SET version = version + 1, updated = ?, message_count = message_count + ?, "
    "title = COALESCE(title, ?) WHERE sid = ? AND version = ?"
)
ADVANCE_WITH_SYSTEM = ADVANCE.replace(" WHERE", ", system_message = ? WHERE")
ADD_TURN = "INSERT INTO chatagent_turns (sid, turn, body, times) VALUES (?, ?, ?, ?)"
TURNS = "SELECT t.turn, t.body, t.times FROM chatagent_turns t JOIN chatagent_sessions s ON s.sid = t.sid " \
    "WHERE s.user_id = ? AND s.session_id = ? ORDER BY t.turn"  # fmt: skip
PUT_BLOB = (
    "INSERT INTO chatagent_blobs (sha256, size, data) VALUES (?, ?, ?) "
    "ON CONFLICT (sha256) DO UPDATE SET size = excluded.size"
)
REF_BLOB = "INSERT INTO chatagent_turn_blobs (sid, turn, sha256) VALUES (?, ?, ?) ON CONFLICT DO NOTHING"
GET_BLOB = "SELECT data FROM chatagent_blobs WHERE sha256 = ?"
LAST_TURN = "SELECT turn, body FROM chatagent_turns WHERE sid = ? ORDER BY turn DESC LIMIT 1"
DELETE_TURN = "DELETE FROM chatagent_turns WHERE sid = ? AND turn = ?"
TURN_BLOBS = "SELECT sha256 FROM chatagent_turn_blobs WHERE sid = ? AND turn = ?"
DELETE_TURN_BLOBS = "DELETE FROM chatagent_turn_blobs WHERE sid = ? AND turn = ?"
SESSION_BLOBS = "SELECT DISTINCT sha256 FROM chatagent_turn_blobs WHERE sid = ?"
DELETE_SESSION_TURNS = "DELETE FROM chatagent_turns WHERE sid = ?"
DELETE_SESSION_BLOBS = "DELETE FROM chatagent_turn_blobs WHERE sid = ?"
DELETE_SESSION = "DELETE FROM chatagent_sessions WHERE sid = ?"
DROP_BLOB = (
    "DELETE FROM chatagent_blobs WHERE sha256 = ? AND NOT EXISTS (SELECT 1 FROM chatagent_turn_blobs WHERE sha256 = ?)"
)
AFTER_POP = (
    "UPDATE chatagent_sessions SET version = version + 1, updated = ?, message_count = message_count - ? WHERE sid = ?"
)
AFTER_CLEAR = (
    "UPDATE chatagent_sessions SET version = version + 1, updated = ?, message_count = 0, title = NULL, "
    "system_message = NULL WHERE sid = ?"
)
SET_TITLE = "UPDATE chatagent_sessions SET title = ? WHERE sid = ?"
_INFO_COLUMNS = "session_id, title, created, updated, message_count, user_id FROM chatagent_sessions"
INFO = f"SELECT {_INFO_COLUMNS} WHERE user_id = ? AND session_id = ?"
LIST = f"SELECT {_INFO_COLUMNS} WHERE user_id = ? ORDER BY updated DESC, sid DESC"
LIST_ALL = f"SELECT {_INFO_COLUMNS} ORDER BY updated DESC, sid DESC"
COUNT = "SELECT COUNT(*) FROM chatagent_sessions WHERE user_id = ?"
_SIZE = (  # the turns' bytes and their files' (each file as often as a turn holds it)
    "WITH s AS (SELECT sid FROM chatagent_sessions WHERE {where}) SELECT (SELECT COALESCE(SUM(LENGTH(body)), 0) "
    "FROM chatagent_turns WHERE sid IN (SELECT sid FROM s)) + (SELECT COALESCE(SUM(b.size), 0) FROM "
    "chatagent_turn_blobs tb JOIN chatagent_blobs b ON b.sha256 = tb.sha256 WHERE tb.sid IN (SELECT sid FROM s))"
)
SIZE, USER_SIZE = _SIZE.format(where="user_id = ? AND session_id = ?"), _SIZE.format(where="user_id = ?")
READ_VERSION = "SELECT value FROM chatagent_meta WHERE key = 'schema_version'"
WRITE_VERSION = "UPDATE chatagent_meta SET value = ? WHERE key = 'schema_version'"
INIT_VERSION = "INSERT INTO chatagent_meta (key, value) VALUES ('schema_version', ?)"


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A stored conversation as listed: its id, title ('' until the first question), times (Unix seconds), size."""

    id: str
    title: str
    created: float
    updated: float
    messages: int
    user: str


@dataclass(slots=True)
class Loaded:
    """A session as a run starts on it: its row id (None if not stored yet), version, system message, messages."""

    sid: int | None
    version: int
    system: dict | None
    messages: list[dict]


class SQLStore:
    """The operations of a session store in SQL that SQLite and PostgreSQL both run; a backend provides
    `_read` (one statement), `_write` (a transaction), `lock` and the dialect's pieces."""

    url: str  # for messages: the URL without a password
    dialect: dict[str, str]  # the SCHEMA placeholders
    find_for_update = FIND  # FIND, locking the row where transactions run concurrently (PostgreSQL)
    has_table: str  # a query with one parameter (a table name) giving a row if the table exists

    # ---- what a backend provides ----------------------------------------------------------------------

    def _read(self, sql: str, params: tuple = ()) -> list[tuple]:
        raise NotImplementedError

    def _write(self, sync: bool = True) -> contextlib.AbstractContextManager[Any]:
        """A write transaction: a cursor with `execute(sql, params)`, `fetchone()`, `fetchall()`, `rowcount`.
        `sync=False`: its commit does not wait for the disk (it survives the process's death, not the machine's)."""
        raise NotImplementedError

    def _write_one(self, sql: str, params: tuple) -> int:
        """One statement written in a transaction of its own, not synced (`_write(sync=False)`); its rowcount."""
        with self._write(sync=False) as cur:
            cur.execute(sql, params)
            return cur.rowcount

    def _lock_blobs(self, cur: Any, exclusive: bool) -> None:
        """Keep blob collection and blob references apart where transactions run concurrently (PostgreSQL)."""

    def lock(self, user: str, session_id: str) -> Callable[[], None]:
        """Take the run lock of a session (SessionBusyError if another run holds it); returns its release."""
        raise NotImplementedError

    def close(self) -> None:
        """Close the connections not in use; the store stays usable (it connects again when used)."""
        raise NotImplementedError

    # ---- schema -------------------------------------------------------------------------------------------

    def _ensure_schema(self) -> None:
        """Create the tables in an empty store, migrate an older one, refuse a newer one (changing nothing)."""
        version = self._schema_version(self._read)
        if version == SCHEMA_VERSION:
            return
        self._check_not_newer(version)
        with self._write() as cur:
            self._lock_schema(cur)

            def read(sql: str, params: tuple = ()) -> list[tuple]:
                return cur.execute(sql, params).fetchall()

            version = self._schema_version(read)  # again, inside the transaction: another process may have won
            self._check_not_newer(version)
            if version is None:
                for statement in SCHEMA:
                    cur.execute(statement.format(**self.dialect), ())
                cur.execute(INIT_VERSION, (str(SCHEMA_VERSION),))
                return
            while version < SCHEMA_VERSION:
                for statement in MIGRATIONS[version]:
                    cur.execute(statement.format(**self.dialect), ())
                version += 1
            cur.execute(WRITE_VERSION, (str(version),))

    def _lock_schema(self, cur: Any) -> None:
        """Serialise schema creation and migration between processes (SQLite's write transaction does)."""

    def _schema_version(self, read: Callable[[str, tuple], list[tuple]]) -> int | None:
        if not read(self.has_table, ("chatagent_meta",)):
            return None
        rows = read(READ_VERSION, ())
        try:
            return int(rows[0][0])
        except (IndexError, ValueError):
            raise SessionStoreError(f"{self.url}: chatagent_meta holds no valid schema version; not a store we "
                                    "can use") from None  # fmt: skip

    def _check_not_newer(self, version: int | None) -> None:
        if version is not None and version > SCHEMA_VERSION:
            raise SessionStoreError(
                f"{self.url} has session schema version {version}, newer than this chatagent understands "
                f"({SCHEMA_VERSION}): upgrade chatagent to use it. The store was not changed."
            )
        if version is not None and any(v not in MIGRATIONS for v in range(version, SCHEMA_VERSION)):
            raise SessionStoreError(f"{self.url} has session schema version {version}, which cannot be migrated")

    # ---- reading ------------------------------------------------------------------------------------------

    def load(self, user: str, session_id: str, files: bool = True) -> Loaded:
        """The stored conversation (attached files restored to local paths; with `files=False`, left as references)."""
        rows = self._read(LOAD, (user, session_id))
        if not rows:
            return Loaded(None, 0, None, [])
        sid, version, system, _ = rows[0]
        messages: list[dict] = []
        try:
            for row in rows:
                if row[3] is not None:
                    messages += orjson.loads(row[3])
            system_msg = orjson.loads(system) if system is not None else None
        except orjson.JSONDecodeError as e:
            raise damaged_error(self.url, session_id, e) from None
        if files and attachments.references(messages):
            owned = {r[0] for r in self._read(SESSION_BLOBS, (sid,))}
            messages = attachments.restore(messages, self.blob, owned)
        return Loaded(sid, version, system_msg, messages)

    def turns(self, user: str, session_id: str) -> list[tuple[int, list[dict], list[float] | None]]:
        """Each stored turn: (its number, its messages as stored, when each was done or None: `sessions.history`)."""
        rows = self._read(TURNS, (user, session_id))
        return [(r[0], orjson.loads(r[1]), orjson.loads(r[2]) if r[2] is not None else None) for r in rows]

    def blob(self, sha256: str) -> bytes | None:
        rows = self._read(GET_BLOB, (sha256,))
        return bytes(rows[0][0]) if rows else None

    def info(self, user: str, session_id: str) -> SessionInfo | None:
        rows = self._read(INFO, (user, session_id))
        return _info(rows[0]) if rows else None

    def ping(self) -> None:
        """A round trip to the database (SessionStoreError if it does not answer)."""
        self._read("SELECT 1")

    def count(self, user: str) -> int:
        """How many sessions the user has."""
        return int(self._read(COUNT, (user,))[0][0])

    def size(self, user: str, session_id: str | None = None) -> int:
        """The bytes a session's stored turns and files take (0 for a session not stored); all the user's sessions'
        without `session_id`."""
        found = self._read(SIZE, (user, session_id)) if session_id is not None else self._read(USER_SIZE, (user,))
        return int(found[0][0])

    def list(self, user: str | None) -> list[SessionInfo]:
        rows = self._read(LIST, (user,)) if user is not None else self._read(LIST_ALL)
        return [_info(r) for r in rows]

    # ---- writing ------------------------------------------------------------------------------------------

    def commit(
        self,
        user: str,
        session_id: str,
        expected: Loaded | None,
        messages: list[dict],
        title: str,
        system: dict | None = _UNCHANGED,
        pending_key: str | None = None,
        usage: dict | None = None,
        times: list[float] | None = None,
    ) -> None:
        """Append one turn, in one transaction, if the session is still at `expected.version` (else
        SessionConflictError); with `expected=None`, to whatever the session holds. `system` replaces the stored
        system message when given. `pending_key`: the turn was pending under this key; its rows go (and if they
        are gone, discarded meanwhile, nothing is stored: SessionConflictError). `usage` (USAGE_KEYS): what the
        turn's run used, added to the session's. `times`: when each of its messages was done."""
        stored, files = attachments.stash(messages)
        body = orjson.dumps(stored)
        now = time.time()
        with self._write() as cur:
            if expected is not None and expected.sid is not None:
                sid, version = expected.sid, expected.version
            else:
                found = cur.execute(self.find_for_update, (user, session_id)).fetchone()
                if found is None:
                    cur.execute(CREATE, (user, session_id, now, now))
                    found = cur.execute(self.find_for_update, (user, session_id)).fetchone()
                sid, version = found
                if expected is not None and version != expected.version:
                    raise conflict_error(self.url, session_id)
            if system is _UNCHANGED:
                cur.execute(ADVANCE, (now, len(messages), title, sid, version))
            else:
                system_body = orjson.dumps(system) if system is not None else None
                cur.execute(ADVANCE_WITH_SYSTEM, (now, len(messages), title, system_body, sid, version))
            if cur.rowcount != 1:
                raise conflict_error(self.url, session_id)
            if pending_key is not None:
                found = cur.execute(pending.FIND_PENDING, (sid,)).fetchone()
                if found is None or found[0] != pending_key:
                    raise conflict_error(self.url, session_id)
                cur.execute(pending.DELETE_PENDING, (sid,))
                cur.execute(pending.DELETE_CHECKPOINTS, (sid,))
            turn = version + 1
            cur.execute(ADD_TURN, (sid, turn, body, orjson.dumps(times) if times is not None else None))
            if usage:
                row = cur.execute(pending.GET_USAGE, (sid,)).fetchone()
                cur.execute(pending.SET_USAGE, (orjson.dumps(summed_usage(row[0] if row else None, usage)), sid))
            if files:
                self._lock_blobs(cur, exclusive=False)
                for sha, data in files.items():
                    cur.execute(PUT_BLOB, (sha, len(data), data))
                    cur.execute(REF_BLOB, (sid, turn, sha))
        if pending_key is not None:
            self._drop_journal(user, session_id)

    def pop(self, user: str, session_id: str) -> list[dict]:
        """Remove the last turn; its messages (attached files restored), [] if there is none."""
        with self._write() as cur:
            found = cur.execute(FIND, (user, session_id)).fetchone()
            last = cur.execute(LAST_TURN, (found[0],)).fetchone() if found else None
            if last is None:
                return []
            sid, (turn, body) = found[0], last
            shas = [r[0] for r in cur.execute(TURN_BLOBS, (sid, turn)).fetchall()]
            try:
                messages = orjson.loads(body)
            except orjson.JSONDecodeError as e:
                raise damaged_error(self.url, session_id, e) from None
            if shas:  # the caller may send them again: keep local copies of the files (read inside this txn)
                messages = attachments.restore(messages, lambda sha: _blob_in(cur, sha), set(shas))
            cur.execute(DELETE_TURN, (sid, turn))
            cur.execute(DELETE_TURN_BLOBS, (sid, turn))
            cur.execute(AFTER_POP, (time.time(), len(messages), sid))
            self._collect(cur, shas)
        return messages

    def clear(self, user: str, session_id: str, delete: bool = False) -> bool:
        """Forget the conversation (and its title); with `delete`, the session too. False if it was not stored."""
        with self._write() as cur:
            found = cur.execute(FIND, (user, session_id)).fetchone()
            if found is None:
                return False
            sid = found[0]
            shas = [r[0] for r in cur.execute(SESSION_BLOBS, (sid,)).fetchall()]
            cur.execute(DELETE_SESSION_TURNS, (sid,))
            cur.execute(DELETE_SESSION_BLOBS, (sid,))
            running = cur.execute(pending.FIND_PENDING, (sid,)).fetchone()
            cur.execute(pending.DELETE_PENDING, (sid,))
            cur.execute(pending.DELETE_CHECKPOINTS, (sid,))
            if delete:
                cur.execute(DELETE_SESSION, (sid,))
            else:
                cur.execute(AFTER_CLEAR, (time.time(), sid))
            dropped = self._collect(cur, shas)
        if running:
            self._drop_journal(user, session_id, discarded=running[0])
        attachments.forget(dropped)
        return True

    # ---- turns in progress (see chatagent.sessions.pending) ---------------------------------------------------

    def checkpoint(
        self,
        user: str,
        session_id: str,
        expected: Loaded,
        key: str,
        step: int,
        at: int,
        messages: list[dict] | None,
        new: list[dict] | None = None,
        state: str = pending.RUNNING,
        detail: dict | None = None,
    ) -> None:
        """Write checkpoint `step` of the pending turn `key`: `messages` from response index `at` on (None: only
        its state), in one transaction, not synced. With `new` (its first write) the turn becomes pending, if the
        session is still at `expected.version` and has no other pending turn (else SessionConflictError). The
        usual checkpoint of a running turn is `append`."""
        now = time.time()
        detail_body = encode(detail) if detail else None
        with self._write(sync=False) as cur:
            if new is not None:
                found = cur.execute(self.find_for_update, (user, session_id)).fetchone()
                if found is None:
                    cur.execute(CREATE, (user, session_id, now, now))
                    found = cur.execute(self.find_for_update, (user, session_id)).fetchone()
                sid, version = found
                if version != expected.version or cur.execute(pending.FIND_PENDING, (sid,)).fetchone():
                    raise conflict_error(self.url, session_id)
                cur.execute(pending.START, (sid, key, version, state, encode(new), detail_body, now, now))
            else:
                found = cur.execute(FIND, (user, session_id)).fetchone()
                sid = found[0] if found else None
                cur.execute(pending.TOUCH, (state, detail_body, now, sid, key))
                if cur.rowcount != 1:
                    raise conflict_error(self.url, session_id)
                self._fold(cur, user, session_id, sid, key)
            if messages is not None:
                cur.execute(pending.ADD_CHECKPOINT, (sid, step, at, encode(messages)))
        if new is None:
            self._drop_journal(user, session_id)

    def usage(self, user: str, session_id: str) -> dict:
        """What the session's stored turns used (USAGE_KEYS; cost None when no call was priced)."""
        rows = self._read(pending.USAGE, (user, session_id))
        return summed_usage(rows[0][0] if rows else None, {})

    def pending(self, user: str, session_id: str) -> PendingTurn | None:
        """The session's pending turn, with its checkpoints applied; None if it has none."""
        contents = self._journal(user, session_id)  # first: records folded meanwhile are then in the database
        rows = self._read(pending.LOAD_PENDING, (user, session_id))
        return self._decoded(session_id, rows, contents) if rows else None

    def discard_pending(self, user: str, session_id: str) -> PendingTurn | None:
        """Delete the session's pending turn; what it was (None if there was none). A run still writing it stops
        at its next checkpoint (SessionConflictError)."""
        with self._write() as cur:
            rows = cur.execute(pending.LOAD_PENDING, (user, session_id)).fetchall()
            if not rows:
                return None
            contents = self._journal(user, session_id)
            cur.execute(pending.DELETE_PENDING, (rows[0][0],))
            cur.execute(pending.DELETE_CHECKPOINTS, (rows[0][0],))
        self._drop_journal(user, session_id, discarded=rows[0][1])
        return self._decoded(session_id, rows, contents)

    def _decoded(self, session_id: str, rows: list[tuple], contents: journal.Contents | None) -> PendingTurn:
        try:
            return decode_pending(rows, contents)
        except orjson.JSONDecodeError as e:
            raise damaged_error(self.url, session_id, e) from None

    # ---- a journal of the usual checkpoints: SQLite keeps one (chatagent.sessions.journal), other backends none --

    def append(self, user: str, session_id: str, key: str, step: int, at: int, messages: list[dict]) -> None:
        """Write checkpoint `step` of the running turn `key` (not its first; its state unchanged): `messages` from
        response index `at` on, not synced (SessionConflictError if the turn is no longer pending). Here one
        statement in a transaction of its own; SQLite writes it to the turn's journal."""
        if self._write_one(pending.ADD_LATER_CHECKPOINT, (step, at, encode(messages), user, session_id, key)) != 1:
            raise conflict_error(self.url, session_id)  # discarded (or the session cleared) while the run went on

    def _journal(self, user: str, session_id: str) -> journal.Contents | None:
        """What the journal of the session's running turn holds."""
        return None

    def _fold(self, cur: Any, user: str, session_id: str, sid: int | None, key: str) -> None:
        """Write the journal's records of the turn `key` as its checkpoints, in the transaction `cur`."""

    def _drop_journal(self, user: str, session_id: str, discarded: str | None = None) -> None:
        """Remove the session's journal once the run writing it has its records in the database, or (`discarded`:
        the turn's key) when its turn is gone, so that a run still writing it stops."""

    def set_title(self, user: str, session_id: str, title: str | None) -> None:
        now = time.time()
        with self._write() as cur:
            cur.execute(CREATE, (user, session_id, now, now))
            sid = cur.execute(FIND, (user, session_id)).fetchone()[0]
            cur.execute(SET_TITLE, (title, sid))

    def _collect(self, cur: Any, shas: list[str]) -> list[str]:
        """Delete the blobs among `shas` that no turn refers to any more; those deleted."""
        if not shas:
            return []
        self._lock_blobs(cur, exclusive=True)
        dropped = []
        for sha in shas:
            cur.execute(DROP_BLOB, (sha, sha))
            if cur.rowcount:
                dropped.append(sha)
        return dropped


def _blob_in(cur: Any, sha: str) -> bytes | None:
    row = cur.execute(GET_BLOB, (sha,)).fetchone()
    return bytes(row[0]) if row else None


def _info(row: tuple) -> SessionInfo:
    session_id, title, created, updated, count, user = row
    return SessionInfo(session_id, title or "", float(created), float(updated), int(count), user)

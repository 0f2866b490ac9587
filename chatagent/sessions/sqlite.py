"""The SQLite session store: one database file (WAL journal, full sync), two small pools of connections (synced, and
at synchronous=NORMAL for the writes that need not wait for the disk: checkpoints), and a lock file per running
session next to the database (`<file>-locks/`), held with flock so that it goes away with the process that held it,
however it ended; beside it, the journal of the session's running turn (`chatagent.sessions.journal`)."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from chatagent.sessions import journal, pending
from chatagent.sessions.errors import SessionBusyError, SessionStoreError, conflict_error
from chatagent.sessions.store import SQLStore
from chatagent.utils.sql import connect_sqlite, private_sqlite_file
from chatagent.utils.workspace import NOFOLLOW, UnsafePathError, check_private_file, private_dirs

try:
    import fcntl
except ImportError:  # pragma: no cover  (Windows: runs are kept apart within one process only)
    fcntl = None

DEFAULT_TIMEOUT_S = 5.0
_POOL_SIZE = 4


def parse_sqlite_url(url: str) -> tuple[Path, dict[str, Any]]:
    """The file and options of `sqlite:///relative.db` or `sqlite:////absolute.db` (option: `?timeout=SECONDS`,
    how long to wait for another writer)."""
    parts = urlsplit(url)
    path = unquote(parts.path)[1:]
    if parts.netloc or not path or path == ":memory:":
        raise SessionStoreError(
            f"bad SQLite store URL {url!r}: write sqlite:///relative/file.db or sqlite:////absolute/file.db "
            "(in-memory databases are not supported: use a file in a temporary directory)"
        )
    options: dict[str, Any] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key != "timeout":
            raise SessionStoreError(f"bad SQLite store URL {url!r}: unknown option {key!r} (known: timeout)")
        try:
            options["timeout"] = float(value)
        except ValueError:
            raise SessionStoreError(f"bad SQLite store URL {url!r}: timeout must be a number of seconds") from None
    return Path(path).expanduser(), options


class SQLiteStore(SQLStore):
    """Sessions in a SQLite file (see `chatagent.sessions.store`)."""

    dialect = {
        "id_pk": "INTEGER PRIMARY KEY",
        "int": "INTEGER",
        "real": "REAL",
        "blob": "BLOB",
        "without_rowid": "WITHOUT ROWID",
    }
    has_table = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"

    def __init__(self, path: Path, *, create_dir: bool = False, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.path = path.absolute()
        self.url = str(self.path)
        self.timeout = timeout
        if self.path.is_dir():
            raise SessionStoreError(f"{self.url} is a directory, not a SQLite session store file")
        if not self.path.parent.is_dir() and not create_dir:
            raise SessionStoreError(f"cannot open {self.url}: the directory {self.path.parent} does not exist")
        try:
            private_sqlite_file(self.path)
        except OSError as e:
            raise SessionStoreError(f"cannot make the session store {self.url}: {e.strerror or e}") from None
        self._locks_dir = self.path.with_name(self.path.name + "-locks")
        self._idle: list[sqlite3.Connection] = []
        self._unsynced: list[sqlite3.Connection] = []  # at synchronous=NORMAL: their commits survive the process only
        self._write_lock = threading.RLock()  # one writer at a time in this process, without SQLite's busy waits
        # (reentrant: a run dropped and finalised in the middle of a write by this thread must not deadlock)
        self._local_locks: set[str] = set()  # where flock is missing
        self._writers: dict[tuple[str, str], journal.Writer] = {}  # the journals of the runs holding a lock here
        try:
            if self._read("PRAGMA journal_mode")[0][0].lower() != "wal":
                self._read("PRAGMA journal_mode=WAL")
            self._ensure_schema()
        except BaseException:
            self.close()
            raise

    # ---- connections and transactions -------------------------------------------------------------------
    # (no locks and no generator-based context managers here: they would cost as much as the statements)

    def _connect(self, sync: bool) -> sqlite3.Connection:
        return connect_sqlite(self.path, timeout=self.timeout, synchronous="FULL" if sync else "NORMAL")

    def _take(self, sync: bool = True) -> sqlite3.Connection:
        try:
            return (self._idle if sync else self._unsynced).pop()  # atomic: the pool needs no lock of its own
        except IndexError:
            pass
        try:
            return self._connect(sync)
        except sqlite3.Error as e:
            raise self._error(e) from e

    def _give_back(self, conn: sqlite3.Connection, sync: bool = True) -> None:
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                conn.close()
                return
        pool = self._idle if sync else self._unsynced
        if len(pool) < _POOL_SIZE:
            pool.append(conn)
        else:
            conn.close()

    def _read(self, sql: str, params: tuple = ()) -> list[tuple]:
        conn = self._take()
        try:
            return conn.execute(sql, params).fetchall()
        except sqlite3.Error as e:
            raise self._error(e) from e
        finally:
            self._give_back(conn)

    def _write(self, sync: bool = True) -> _Transaction:
        return _Transaction(self, sync)

    def _error(self, e: sqlite3.Error) -> SessionStoreError:
        text = str(e)
        if "locked" in text or "busy" in text:
            return SessionStoreError(
                f"{self.url} is locked by another process or connection (waited {self.timeout:g} s): {text}. "
                "Nothing was changed."
            )
        if isinstance(e, sqlite3.DatabaseError) and ("not a database" in text or "malformed" in text):
            return SessionStoreError(
                f"{self.url} is not a usable SQLite database ({text}): it is damaged or not a session store. "
                "It was not changed; give another file, or restore this one from a backup."
            )
        if "unable to open" in text:
            return SessionStoreError(f"cannot open {self.url}: {text} (check the path and its permissions)")
        return SessionStoreError(f"{self.url}: {text}")

    def close(self) -> None:
        """Close the idle connections (used again, the store opens new ones)."""
        idle, self._idle, self._unsynced = self._idle + self._unsynced, [], []
        for conn in idle:
            conn.close()

    # ---- run locks ----------------------------------------------------------------------------------------

    def lock(self, user: str, session_id: str) -> Callable[[], None]:
        key = _lock_name(user, session_id)
        busy = SessionBusyError(f"session {session_id!r} in {self.url} has a run in progress; try again when it ends")
        if fcntl is None:  # pragma: no cover
            with self._write_lock:
                if key in self._local_locks:
                    raise busy
                self._local_locks.add(key)
            return lambda: self._local_locks.discard(key)
        try:
            private_dirs(self._locks_dir)
            fd = os.open(self._locks_dir / key, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | NOFOLLOW, 0o600)
        except OSError as e:
            raise SessionStoreError(f"cannot make the lock file of a session in {self._locks_dir}: {e}") from e
        try:
            check_private_file(self._locks_dir / key, fd)  # not a file someone else left there
        except OSError as e:
            os.close(fd)
            raise SessionStoreError(f"cannot use the lock file of a session in {self._locks_dir}: {e}") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise busy from None
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self._close_writer(user, session_id)
                os.close(fd)  # closing the only descriptor releases the flock

        return release

    # ---- the journal of a running turn (see chatagent.sessions.journal) -----------------------------------------

    def journal_path(self, user: str, session_id: str) -> Path:
        """Where the journal of the session's running turn is kept."""
        return self._locks_dir / (_lock_name(user, session_id) + ".journal")

    def append(self, user: str, session_id: str, key: str, step: int, at: int, messages: list[dict]) -> None:
        writer = self._writers.get((user, session_id))
        if writer is None or writer.key != key:
            if fcntl is None:  # pragma: no cover  (Windows: no journal; a statement instead)
                return super().append(user, session_id, key, step, at, messages)
            writer = self._open_writer(user, session_id, key)
        try:
            kept = writer.append(step, at, messages)
        except OSError as e:
            raise SessionStoreError(f"cannot write a checkpoint beside {self.url}: {e.strerror or e}") from e
        if not kept:  # discarded (or the session cleared) while the run went on
            raise conflict_error(self.url, session_id)

    def flow_journal_path(self, flow_id: str) -> Path:
        """Where the journal of a running flow's steps is kept (see `chatagent.sessions.flow_states`); its directory
        is made."""
        private_dirs(self._locks_dir)
        return self._locks_dir / ("flow-" + _lock_name("", flow_id) + ".journal")

    def _open_writer(self, user: str, session_id: str, key: str) -> journal.Writer:
        self._close_writer(user, session_id)
        try:  # (in the private directory that `lock` made)
            writer = journal.Writer(self.journal_path(user, session_id), key)
        except OSError as e:
            raise SessionStoreError(f"cannot write a checkpoint beside {self.url}: {e.strerror or e}") from e
        found = self._read(pending.PENDING_KEY, (user, session_id))  # after the opening: a discard before it shows
        if not found or found[0][0] != key:
            writer.close()
            raise conflict_error(self.url, session_id)
        self._writers[(user, session_id)] = writer
        return writer

    def _close_writer(self, user: str, session_id: str) -> None:
        writer = self._writers.pop((user, session_id), None)
        if writer is not None:
            writer.close()

    def _journal(self, user: str, session_id: str) -> journal.Contents:
        try:
            return journal.read(self.journal_path(user, session_id))
        except UnsafePathError as e:
            raise SessionStoreError(f"cannot read the journal of a turn beside {self.url}: {e}") from e

    def _fold(self, cur: Any, user: str, session_id: str, sid: int | None, key: str) -> None:
        contents = self._journal(user, session_id)
        if contents.key == key and contents.records:
            last = cur.execute(pending.LAST_STEP, (sid,)).fetchone()[0]
            for step, at, messages in journal.after(contents.records, -1 if last is None else last):
                cur.execute(pending.ADD_CHECKPOINT, (sid, step, at, pending.encode(messages)))

    def _drop_journal(self, user: str, session_id: str, discarded: str | None = None) -> None:
        path = self.journal_path(user, session_id)
        if discarded is None:
            self._close_writer(user, session_id)
        try:
            if discarded is None:
                journal.remove(path)
            else:
                journal.discard(path, discarded)
        except OSError as e:
            raise SessionStoreError(
                f"session {session_id!r} in {self.url} was written, but the journal of its turn could not be removed "
                f"({e.strerror or e})"
            ) from e


def _lock_name(user: str, session_id: str) -> str:
    """The name of a session's lock file (and, with `.journal`, of its running turn's journal)."""
    return hashlib.sha256(f"{user}\0{session_id}".encode()).hexdigest()[:32]


class _Transaction:
    """`with store._write() as cur:` one write transaction (BEGIN IMMEDIATE), one writer of this process at a time;
    committed at the end, rolled back on an exception; SQLite errors become SessionStoreErrors. With `sync=False`
    the commit is not synced to the disk (synchronous=NORMAL: in WAL mode it survives the process's death)."""

    __slots__ = ("store", "conn", "sync")

    def __init__(self, store: SQLiteStore, sync: bool = True) -> None:
        self.store = store
        self.sync = sync

    def __enter__(self) -> sqlite3.Cursor:
        store = self.store
        store._write_lock.acquire()
        try:
            self.conn = store._take(self.sync)
            cur = self.conn.cursor()
            cur.execute("BEGIN IMMEDIATE")
            return cur
        except BaseException as e:
            if hasattr(self, "conn"):
                store._give_back(self.conn, self.sync)
            store._write_lock.release()
            if isinstance(e, sqlite3.Error):
                raise store._error(e) from e
            raise

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: Any) -> None:
        store, conn = self.store, self.conn
        try:
            if kind is None:
                conn.execute("COMMIT")
        except sqlite3.Error as e:
            raise store._error(e) from e
        finally:
            store._give_back(conn, self.sync)  # rolls back what was not committed
            store._write_lock.release()
        if isinstance(error, sqlite3.Error):
            raise store._error(error) from error

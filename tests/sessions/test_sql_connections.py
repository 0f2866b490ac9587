"""chatagent.utils.sql: how every store opens its connections (a private SQLite file, its pragmas; psycopg with a
connect timeout and an error that names the server without its password), and the stores that use it."""

from __future__ import annotations

import socket
import stat
import sys
from pathlib import Path

import pytest

from chatagent.errors import MissingDependencyError
from chatagent.memories.store import MemoryStore, MemoryStoreError
from chatagent.rag.vector_cache import VectorCache
from chatagent.sessions.errors import SessionStoreError
from chatagent.utils.sql import connect_postgres, connect_sqlite, private_sqlite_file


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_sqlite_file_is_private_and_opened_in_autocommit_with_the_pragmas_asked(tmp_path: Path) -> None:
    path = tmp_path / "new" / "deeper" / "store.db"
    private_sqlite_file(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == stat.S_IMODE(path.parent.parent.stat().st_mode) == 0o700
    conn = connect_sqlite(path, timeout=1, wal=True, synchronous="NORMAL")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    conn.execute("CREATE TABLE t (x)")
    conn.execute("INSERT INTO t VALUES (1)")
    assert not conn.in_transaction  # autocommit: the stores write their own BEGIN
    assert connect_sqlite(path, timeout=1, synchronous="FULL").execute("PRAGMA synchronous").fetchone()[0] == 2
    conn.close()


def test_a_file_that_exists_keeps_its_content_and_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "kept.db"
    path.write_bytes(b"stored")
    path.chmod(0o640)  # readable by the group: made this user's alone (utils.workspace.check_private_file)
    private_sqlite_file(path)
    assert path.read_bytes() == b"stored" and stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_postgres_server_that_refuses_is_named_without_its_password() -> None:
    psycopg = pytest.importorskip("psycopg")
    url = f"postgresql://app:s3cret@127.0.0.1:{_closed_port()}/chat"
    with pytest.raises(SessionStoreError, match="cannot connect to PostgreSQL at postgresql://app:\\*\\*\\*@") as info:
        connect_postgres(url, needed_for="a test", autocommit=True, error=SessionStoreError)
    assert "s3cret" not in str(info.value) and "\n" not in str(info.value)
    assert isinstance(info.value.__cause__, psycopg.Error)
    with pytest.raises(psycopg.OperationalError):  # without `error`: psycopg's own (the retrieval backend's)
        connect_postgres(url + "?connect_timeout=5", needed_for="a test", autocommit=True)


def test_without_psycopg_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # what an installation without [postgres] gives
    with pytest.raises(MissingDependencyError, match="a PostgreSQL memory store needs the psycopg package.*postgres"):
        connect_postgres("postgresql://127.0.0.1/x", needed_for="a PostgreSQL memory store", autocommit=False)


def test_the_memory_store_says_what_a_session_store_says_of_an_unreachable_server() -> None:
    pytest.importorskip("psycopg")
    url = f"postgresql://app:s3cret@127.0.0.1:{_closed_port()}/chat"
    with pytest.raises(MemoryStoreError, match="cannot connect to PostgreSQL at postgresql://app:\\*\\*\\*@") as info:
        MemoryStore(url)
    assert "s3cret" not in str(info.value)


def test_the_stores_sqlite_files_are_private(tmp_path: Path) -> None:
    memory = MemoryStore(str(tmp_path / "m" / "memory.db"))
    memory.version("alice")
    cache = VectorCache(tmp_path / "v" / "vectors.sqlite3")
    cache.get_many("model", ["text"])
    for path in (tmp_path / "m" / "memory.db", tmp_path / "v" / "vectors.sqlite3"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    memory.close()

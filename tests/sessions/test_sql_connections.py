"""chatagent.utils.sql: how every store opens its connections (a private SQLite file, its pragmas; psycopg with a
connect timeout and an error that names the server without its password), and the stores that use it."""

from __future__ import annotations

import socket
import stat
import sys
from pathlib import Path
from typing import Any

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


def _open_flows_and_traces(url: str, start: Any, failures: Any) -> None:
    """(A process of the test below.) Connect, wait for the others, open the store's flows and traces."""
    from chatagent.sessions.flow_states import FlowStates
    from chatagent.sessions.postgres import PostgresStore
    from chatagent.sessions.traces import TraceStore

    store = PostgresStore(url)
    start.wait(timeout=120)
    try:
        FlowStates(store)
        TraceStore(store)
    except Exception as e:  # noqa: BLE001 (the test reports every failure)
        failures.put(repr(e)[:300])
    finally:
        store.close()


def test_processes_opening_one_postgres_store_at_once_create_the_flow_and_trace_tables_once(postgres) -> None:
    """Processes opening one store's flows at once (a replica reading a flow the worker starts) each send
    `CREATE TABLE IF NOT EXISTS`, which PostgreSQL fails on its catalogue's unique index when two overlap (17 of 20
    rounds of eight connections did, unlocked): a store creates a feature's tables under the schema lock. Six
    processes, connected, then released together, open the flows and traces of a new schema, three times."""
    pytest.importorskip("psycopg")
    import multiprocessing

    from chatagent.sessions.flow_states import FlowStates
    from chatagent.sessions.postgres import PostgresStore

    ctx = multiprocessing.get_context("spawn")
    for _ in range(3):
        url = postgres.new_store_url()
        start, failures = ctx.Barrier(6), ctx.Queue()
        procs = [ctx.Process(target=_open_flows_and_traces, args=(url, start, failures)) for _ in range(6)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=180)
        assert [p.exitcode for p in procs] == [0] * 6
        found = []
        while not failures.empty():
            found.append(failures.get(timeout=10))
        assert found == []
        store = PostgresStore(url)
        assert FlowStates(store).load("none") is None
        store.close()

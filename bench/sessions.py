"""Sessions: load and append latency on a 200-message conversation, and 50 sessions written at once, on SQLite and
on PostgreSQL, beside the raw driver running the same statements (the limit) and, on SQLite, LangGraph's
SqliteSaver and the OpenAI Agents SDK's SQLiteSession doing the same work (bench/_sessions_peers.py: venvs of their
own). Then bad input: a damaged, a foreign and a locked file, wrong URLs, a store from a newer chatagent: the error
each one gives, and whether the stored conversation is still there.

    .venv/bin/python bench/sessions.py [--no-peers] [--no-postgres]

Goals: a 200-message load within 5 ms on SQLite, at most 1.5x the raw driver, ahead of both peers. Latencies are
medians. SQLite runs twice: on tmpfs (/dev/shm: fsync is free, so the figures are the libraries' own cost) and on
disk (with fsync at every commit, as all sides do by default). PostgreSQL is a throwaway local server
(tests/support/postgres.py) with fsync on.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from _measure import show  # noqa: E402
from _sessions_peers import WORK, concurrently, conversation, reference, result, timed  # noqa: E402

from chatagent import Session, SessionStoreError  # noqa: E402
from chatagent.sessions import close_stores, open_store  # noqa: E402
from chatagent.sessions import store as sql  # noqa: E402

USER = "local"


def turn(q: str, a: str) -> list[dict]:
    return [{"role": "user", "content": q}, {"role": "assistant", "content": a}]


# ---- the raw drivers: the same statements, nothing else ----------------------------------------------------------


class RawSQLite:
    """sqlite3 with the store's pragmas: one connection per thread, one writer at a time in the process."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.local = threading.local()
        self.write_lock = threading.Lock()

    def conn(self) -> sqlite3.Connection:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA synchronous=FULL")
        return conn

    def load(self, session_id: str) -> list[dict]:
        messages: list[dict] = []
        for row in self.conn().execute(sql.LOAD, (USER, session_id)).fetchall():
            messages += orjson.loads(row[3])
        return messages

    def append(self, session_id: str, messages: list[dict]) -> None:
        """One transaction: where the session stands, bump its version, add the turn (creating it first)."""
        body, now, conn = orjson.dumps(messages), time.time(), self.conn()
        with self.write_lock:
            conn.execute("BEGIN IMMEDIATE")
            found = conn.execute(sql.FIND, (USER, session_id)).fetchone()
            if found is None:
                conn.execute(sql.CREATE, (USER, session_id, now, now))
                found = conn.execute(sql.FIND, (USER, session_id)).fetchone()
            sid, version = found
            conn.execute(sql.ADVANCE, (now, len(messages), "title", sid, version))
            conn.execute(sql.ADD_TURN, (sid, version + 1, body, orjson.dumps([now] * len(messages))))
            conn.execute("COMMIT")


class RawPsycopg:
    """psycopg 3, one connection per thread."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.local = threading.local()
        self.all: list[Any] = []

    def conn(self) -> Any:
        import psycopg

        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = psycopg.connect(self.url, autocommit=True)
            self.all.append(conn)
        return conn

    def load(self, session_id: str) -> list[dict]:
        messages: list[dict] = []
        for row in self.conn().execute(_pg(sql.LOAD), (USER, session_id)).fetchall():
            messages += orjson.loads(row[3])
        return messages

    def append(self, session_id: str, messages: list[dict]) -> None:
        body, now, conn = orjson.dumps(messages), time.time(), self.conn()
        find = _pg(sql.FIND) + " FOR UPDATE"
        with conn.transaction():
            found = conn.execute(find, (USER, session_id)).fetchone()
            if found is None:
                conn.execute(_pg(sql.CREATE), (USER, session_id, now, now))
                found = conn.execute(find, (USER, session_id)).fetchone()
            sid, version = found
            conn.execute(_pg(sql.ADVANCE), (now, len(messages), "title", sid, version))
            conn.execute(_pg(sql.ADD_TURN), (sid, version + 1, body, orjson.dumps([now] * len(messages))))

    def close(self) -> None:
        for conn in self.all:
            conn.close()


def _pg(statement: str) -> str:
    return statement.replace("?", "%s")


def compare(url: str, driver: Any) -> tuple[dict, dict]:
    """Our figures and the raw driver's on the same work, interleaved operation by operation so that both see the
    same machine (other processes come and go); the concurrent writes run twice each, alternately (best kept)."""
    s = Session("bench", url)
    for q, a in conversation(WORK["history_turns"]):
        s.append(turn(q, a))
        driver.append("raw", turn(q, a))
    assert len(s.messages()) == len(driver.load("raw")) == 2 * WORK["history_turns"]
    loads: tuple[list, list] = ([], [])
    for _ in range(WORK["loads"]):
        loads[0].append(timed(s.messages))
        loads[1].append(timed(driver.load, "raw"))
    appends: tuple[list, list] = ([], [])
    for q, a in conversation(WORK["appends"], seed=3):
        appends[0].append(timed(s.append, turn(q, a)))
        appends[1].append(timed(driver.append, "raw", turn(q, a)))
    concurrent: tuple[list, list] = ([], [])
    for n in range(2):
        writers = [Session(f"writer-{n}-{i}", url) for i in range(WORK["writers"])]
        concurrent[0].append(concurrently(lambda i, q, a, w=writers: w[i].append(turn(q, a))))
        concurrent[1].append(concurrently(lambda i, q, a, n=n: driver.append(f"raw-writer-{n}-{i}", turn(q, a))))
    return result(loads[0], appends[0], min(concurrent[0])), result(loads[1], appends[1], min(concurrent[1]))


# ---- reporting ----------------------------------------------------------------------------------------------------


def report(backend: str, mine: dict, limit: dict, limit_name: str, peers: dict[str, dict | str]) -> dict:
    """Print one backend's lines; the ratios to the raw driver."""
    what = {
        "load_ms": f"load of a {2 * WORK['history_turns']}-message conversation (median ms)",
        "append_ms": "append of a turn to it (median ms)",
        "concurrent_s": f"{WORK['writers']} sessions x {WORK['writes']} turns written at once (s)",
    }
    ratios = {}
    for key, label in what.items():
        ratios[key] = mine[key] / limit[key] if limit[key] else float("inf")
        parts = [f"ours {mine[key]}", f"{limit_name} {limit[key]} ({ratios[key]:.2f}x)"]
        for name, figures in peers.items():
            if isinstance(figures, dict):
                parts.append(f"{name} {figures[key]} (ours {figures[key] / mine[key]:.1f}x faster)")
        show(f"{backend} {label}", ", ".join(parts))
    show(f"{backend} turns per second while {WORK['writers']} sessions write", f"ours {mine['concurrent_turns_per_s']}")
    for name, figures in peers.items():
        if isinstance(figures, str):
            show(f"{backend} {name}", figures)
        else:
            show(f"{backend} {name} sqlite settings", str(figures["sqlite"]))
    return ratios


# ---- bad input ------------------------------------------------------------------------------------------------


def bad_input(tmp: Path) -> None:
    def outcome(name: str, make: Any, check: Any) -> None:
        try:
            make()
            show(f"bad input: {name}", "NO ERROR (a bug)")
        except SessionStoreError as e:
            kept = check()
            show(f"bad input: {name}", f"SessionStoreError: {e} | conversation kept: {'yes' if kept else 'NO'}")
        finally:
            close_stores()

    def stored(path: Path) -> list[dict]:
        s = Session("kept", path)
        s.append(turn("remember this", "I will"))
        close_stores()
        return s.messages()

    foreign = tmp / "notes.db"
    foreign.write_bytes(b"my notes, not a database\n" * 100)
    outcome("a file that is not a database", lambda: Session("x", foreign).messages(),
            lambda: foreign.read_bytes() == b"my notes, not a database\n" * 100)  # fmt: skip

    newer = tmp / "newer.db"
    before = stored(newer)
    with sqlite3.connect(newer) as conn:
        conn.execute("UPDATE chatagent_meta SET value = '99' WHERE key = 'schema_version'")

    def kept_newer() -> bool:
        with sqlite3.connect(newer) as conn:
            conn.execute("UPDATE chatagent_meta SET value = ? WHERE key = 'schema_version'", (str(sql.SCHEMA_VERSION),))
        return Session("kept", newer).messages() == before

    outcome("a store from a newer chatagent", lambda: Session("kept", newer), kept_newer)

    locked = tmp / "locked.db"
    before_locked = stored(locked)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys\nc = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
         "c.execute('BEGIN EXCLUSIVE')\nprint('locked', flush=True)\nsys.stdin.read()", str(locked)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        holder.stdout.readline()
        outcome("a file locked by another process", lambda: Session("kept", f"sqlite:///{locked}?timeout=0.5").append(
            turn("more", "ok")), lambda: True)  # fmt: skip
    finally:
        holder.stdin.close()
        holder.wait(30)
    show(
        "bad input: the locked file once released",
        f"conversation kept: {Session('kept', locked).messages() == before_locked}",
    )
    for url in ("mysql://db/chat", "sqlite:///:memory:", "postgresql://app:secret@127.0.0.1:1/chat"):
        outcome(f"the URL {url}", lambda url=url: Session("x", url), lambda: True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-peers", action="store_true", help="skip LangGraph and the OpenAI Agents SDK")
    parser.add_argument("--no-postgres", action="store_true", help="skip PostgreSQL")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="chatagent-bench-sessions-"))
    try:
        if Path("/dev/shm").is_dir():
            memory = Path(tempfile.mkdtemp(prefix="chatagent-bench-sessions-", dir="/dev/shm"))
            try:
                sqlite_round(memory, "sqlite in memory (tmpfs)", args.no_peers)
            finally:
                shutil.rmtree(memory, ignore_errors=True)
        (tmp / "disk").mkdir()
        sqlite_round(tmp / "disk", "sqlite on disk", args.no_peers)
        if not args.no_postgres:
            postgres(tmp)
        bad_input(tmp)
    finally:
        close_stores()
        shutil.rmtree(tmp, ignore_errors=True)


def sqlite_round(directory: Path, backend: str, no_peers: bool) -> None:
    """Ours, the raw driver and the peers on SQLite files in `directory`. On tmpfs a commit's fsync costs nothing,
    so the figures are the libraries' own cost; on disk they include it (all sides pay it alike, but how much
    varies with whether the WAL file is growing)."""
    url = f"sqlite:///{directory / 'sessions.db'}"
    mine, limit = compare(url, RawSQLite(Path(open_store(url).url)))
    close_stores()
    peers: dict[str, dict | str] = {}
    if not no_peers:
        (directory / "peers").mkdir()
        peers = {name: reference(name, directory / "peers") for name in ("langgraph", "openai-agents")}
    ratios = report(backend, mine, limit, "raw sqlite3", peers)
    goals = [f"load within 5 ms: {'yes' if mine['load_ms'] <= 5 else 'NO'} ({mine['load_ms']} ms)"]
    worst = max(ratios.values())
    goals.append(f"within 1.5x raw: {'yes' if worst <= 1.5 else 'NO'} (worst {worst:.2f}x)")
    for name, figures in peers.items():
        if isinstance(figures, dict):
            behind = [k for k in ("load_ms", "append_ms", "concurrent_s") if figures[k] < mine[k]]
            goals.append(f"ahead of {name}: {'yes' if not behind else 'NO, behind on ' + ', '.join(behind)}")
    show(f"{backend} goals", "; ".join(goals))


def postgres(tmp: Path) -> None:
    from tests.support.postgres import PostgresCluster, unavailable

    reason = unavailable()
    if reason:
        show("postgresql", f"skipped: {reason}")
        return
    with PostgresCluster(fsync=True).start() as cluster:
        url = cluster.new_store_url()
        driver = RawPsycopg(url)
        try:
            mine, limit = compare(url, driver)
        finally:
            driver.close()
        close_stores()
        ratios = report("postgresql", mine, limit, "raw psycopg", {})
        show("postgresql goals", f"within 1.5x raw: {'yes' if max(ratios.values()) <= 1.5 else 'NO'} "
             f"(worst {max(ratios.values()):.2f}x)")  # fmt: skip


if __name__ == "__main__":
    main()

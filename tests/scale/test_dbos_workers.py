"""DBOS as the durable engine, through real processes: two worker processes (tests/support/worker_child.py) on
the fixture's PostgreSQL take jobs from one DBOS queue; the one that runs a job is killed with SIGKILL mid-way
(inside a tool call, inside a flow method, inside a task of a batch), and the other one recovers the job on its
own: completed steps are not done again (the ledger sees each effect once), the job ends as if uninterrupted.
A turn paused for approval stays paused through a kill. The model is the loopback OpenAI-compatible server.
"""

from __future__ import annotations

import os
import queue
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("dbos", reason="the DBOS engine needs chatagent[dbos] (scripts/setup.sh installs it)")

from chatagent.sessions import Session  # noqa: E402
from chatagent.workers import Jobs  # noqa: E402
from tests.support.line_child import DEADLINE  # noqa: E402
from tests.support.openai_server import OpenAIServer, Reply  # noqa: E402
from tests.support.postgres import PostgresCluster  # noqa: E402
from tests.support.workers import Worker, lines  # noqa: E402


class Pool:
    """The module's two workers, their directory (ledger, hang), the store and the job client."""

    def __init__(self, store: str, schema: str, model_url: str, directory: Path) -> None:
        self.store, self.schema, self.model_url, self.dir = store, schema, model_url, directory
        self.workers: list[Worker] = []
        self.jobs = Jobs(store, dbos_schema=schema)

    def add(self, n: int = 1) -> None:
        made = [Worker(self.store, self.schema, self.model_url, self.dir) for _ in range(n)]
        for w in made:
            w.ready()
        self.workers += made

    def reset(self, hang: str = "-") -> None:
        for name in os.listdir(self.dir):
            os.remove(self.dir / name)
        (self.dir / "hang").write_text(hang)

    def blocked(self) -> Worker:
        """The worker that blocked where DIR/hang says (reading every worker's lines until one says so)."""
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            for w in self.workers:
                try:
                    line = w.lines.get(timeout=0.05)
                except queue.Empty:
                    continue
                assert line, f"a worker ended: {w.p.stderr.read()[-3000:]}"  # type: ignore[union-attr]
                if '"blocked"' in line:
                    return w
        raise AssertionError(f"no worker blocked within {DEADLINE} s")

    def kill(self, w: Worker) -> None:
        w.kill()
        self.workers.remove(w)

    def ledger(self, suffix: str = "") -> list[str]:
        return lines(self.dir / f"ledger{suffix}")


@pytest.fixture(scope="module")
def pool(postgres: PostgresCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    server = OpenAIServer().start()
    directory = tmp_path_factory.mktemp("workers")
    made = Pool(postgres.new_store_url(), f"dbos_{os.getpid()}", server.base_url, directory)
    made.server = server  # type: ignore[attr-defined]
    made.reset()
    try:
        made.add(2)
        yield made
    finally:
        for w in made.workers:
            w.stop()
        made.jobs.close()
        server.close()


def _server(pool: Pool) -> OpenAIServer:
    server: OpenAIServer = pool.server  # type: ignore[attr-defined]
    server.reset()
    return server


def _again(pool: Pool) -> None:
    """Two workers for the next test (a replacement for the one killed)."""
    if len(pool.workers) < 2:
        pool.add(2 - len(pool.workers))


def test_a_turn_whose_worker_is_killed_inside_a_tool_call_is_recovered_by_the_other_worker(pool: Pool) -> None:
    _again(pool)
    pool.reset(hang="record:2")
    server = _server(pool)
    server.add(Reply(tool_calls=[("record", {"n": 1})]), Reply(tool_calls=[("record", {"n": 2})]), "Recorded both.")
    job = pool.jobs.turn("recorder", [{"role": "user", "content": "Record 1 and 2."}], user="alice")
    victim = pool.blocked()
    assert job.status().state == "running"
    pool.kill(victim)  # SIGKILL inside record(2), after its effect
    done = job.wait(timeout=DEADLINE)
    assert done.state == "done", done
    assert [m["role"] for m in done.messages] == ["assistant", "function", "assistant", "function", "assistant"]
    assert done.messages[-1]["content"] == "Recorded both."
    attempts = pool.ledger(".attempts")
    assert [a.split()[0] for a in attempts] == ["record:1", "record:2", "record:2"]  # record(1) was not run again
    assert attempts[1].split()[1] == attempts[2].split()[1]  # record(2) again, with the same idempotency key
    assert [a.split()[0] for a in pool.ledger()] == ["record:1", "record:2"]  # so each effect happened once
    asked = server.chat_requests[-1].json["messages"]  # the model asked from the last checkpoint, once
    assert [m["role"] for m in asked] == ["user", "assistant", "tool", "assistant", "tool"]
    assert len(server.chat_requests) == 3
    session = Session(done.session_id, pool.store, user="alice")
    assert session.pending_turn is None and len(session.messages()) == 6
    assert pool.jobs.get(job.id, user="bob") is None  # not another principal's to read

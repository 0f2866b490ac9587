"""A queue's concurrency bounds its jobs across every worker (issue 41), through real processes: two DBOS workers
(tests/support/worker_child.py), each with room for 2 jobs, on a queue of `QueueLimits(concurrency=2)`. Six flow
jobs that hold their slot until the test opens a gate: two start, the others wait while the two hold; once the gate
opens all six end, each once, and the order in which the holds started and ended (written by the jobs themselves)
never has more than two of them at once. A queue's rate (2 starts per 2 s) spaces six tasks' starts on two workers
as DBOS recorded them: no three within 2 s. `chatagent worker` asked for more room in one worker than the queue has in
all says so and exits.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("dbos", reason="the DBOS engine needs chatagent[dbos] (scripts/setup.sh installs it)")

from chatagent.workers import Jobs  # noqa: E402
from tests.support import processes  # noqa: E402
from tests.support.line_child import DEADLINE  # noqa: E402
from tests.support.postgres import PostgresCluster  # noqa: E402
from tests.support.workers import Worker, lines  # noqa: E402

JOBS = 6

pytestmark = pytest.mark.timeout(900)


def _workers(store: str, schema: str, directory: Path, **env: str) -> list[Worker]:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        return [Worker(store, schema, "http://127.0.0.1:9/v1", directory) for _ in range(2)]  # no job asks a model


@pytest.fixture(scope="module")
def workers(
    postgres: PostgresCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Jobs, Path, str, str]]:
    directory = tmp_path_factory.mktemp("limits")
    store, schema = postgres.new_store_url(), f"dbos_limits_{os.getpid()}"
    made = _workers(store, schema, directory, WORKER_CONCURRENCY="2")
    jobs = Jobs(store, dbos_schema=schema)
    try:
        for w in made:
            w.ready()
        yield jobs, directory, store, schema
    finally:
        (directory / "gate").touch()  # whatever happened, nothing holds a worker at its stop
        for w in made:
            w.stop()
        jobs.close()


def _most_at_once(events: list[str]) -> int:
    running, most = 0, 0
    for event in events:
        running += 1 if event.startswith("start ") else -1
        most = max(most, running)
    return most


def test_a_queues_concurrency_bounds_its_jobs_across_every_worker(workers) -> None:
    jobs, directory, _, _ = workers
    holds = directory / "ledger.holds"
    submitted = [jobs.flow("hold", {"label": f"h{n}"}, user="alice") for n in range(JOBS)]
    end = time.monotonic() + DEADLINE
    while len(lines(holds)) < 2:
        assert time.monotonic() < end, f"two holds did not start within {DEADLINE} s"
        time.sleep(0.05)
    watch = time.monotonic() + 3.0  # fifteen polls of each worker's: room for the others to start, were it there
    while time.monotonic() < watch:  # (a slow machine makes this weaker, never wrong)
        assert len(lines(holds)) == 2, lines(holds)
        time.sleep(0.05)
    states = [job.status().state for job in submitted]
    assert states.count("running") == 2 and states.count("queued") == JOBS - 2, states
    (directory / "gate").touch()
    assert [job.wait(timeout=DEADLINE * 2).output for job in submitted] == [f"h{n}" for n in range(JOBS)]
    events = lines(holds)
    assert sorted(e.split()[1] for e in events if e.startswith("start ")) == [f"h{n}" for n in range(JOBS)]
    assert _most_at_once(events) == 2, events  # two at once, never more, though the workers had room for 4
    assert sorted(line.split()[1] for line in lines(directory / "ledger.attempts")) == [f"h{n}" for n in range(JOBS)]


def test_a_worker_asked_for_more_room_than_its_queue_has_says_so_and_exits(workers) -> None:
    _, _, store, schema = workers
    argv = [sys.executable, "-m", "chatagent", "worker", "--agent", "tests.support.replica_agent:make",
            "--store", store, "--dbos-schema", schema, "--concurrency", "2", "--worker-concurrency", "4"]  # fmt: skip
    env = {**os.environ, "REPLICA_MODEL_URL": "http://127.0.0.1:9/v1"}
    done = processes.run(argv, capture_output=True, text=True, timeout=DEADLINE, cwd=Path(__file__).parents[2],
                         env=env)  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert "cannot exceed the queue's (2, across every worker): lower --worker-concurrency" in done.stderr
    assert "Traceback" not in done.stderr and "postgresql://" not in done.stderr


def test_a_queues_rate_spaces_its_jobs_starts_across_every_worker(postgres: PostgresCluster, tmp_path: Path) -> None:
    store, schema = postgres.new_store_url(), f"dbos_rate_{os.getpid()}"
    made = _workers(store, schema, tmp_path, WORKER_RATE="2/2")
    jobs = Jobs(store, dbos_schema=schema)
    try:
        for w in made:
            w.ready()
        submitted = [jobs.task("square", {"n": n}, user="alice") for n in range(JOBS)]
        assert [job.wait(timeout=DEADLINE).result for job in submitted] == [{"n": n, "square": n * n}
                                                                           for n in range(JOBS)]  # fmt: skip
        ids = [job.id for job in submitted]
        rows = postgres.admin(f"SELECT started_at_epoch_ms FROM {schema}.workflow_status WHERE workflow_uuid = ANY(%s)",
                              (ids,))  # fmt: skip
        starts = sorted(int(r[0]) for r in rows)
        assert len(starts) == JOBS
        assert all(b - a >= 2000 for a, b in zip(starts, starts[2:], strict=False)), starts  # 2 per 2 s at most
    finally:
        for w in made:
            w.stop()
        jobs.close()

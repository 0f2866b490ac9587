"""Fair shares of the workers among principals (issue 41), through real processes: `chatagent serve`'s `/v1/jobs` under
two API keys and a DBOS worker (tests/support/worker_child.py) whose queue runs at most 2 jobs of one principal at
once (`QueueLimits(per_principal=2)`: DBOS's partitioned queue, a partition per job owner). One key fills the queue
with 100 flow jobs that each hold their worker slot until the test opens a gate; the other key's one job, submitted
after them, still runs and ends while every one of the hundred waits: without the shares it would wait behind them
(its wait would reach its deadline). Then the gate opens and the hundred end too, each once.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("dbos", reason="the DBOS engine needs chatagent[dbos] (scripts/setup.sh installs it)")

from tests.support.line_child import DEADLINE  # noqa: E402
from tests.support.openai_server import OpenAIServer  # noqa: E402
from tests.support.postgres import PostgresCluster  # noqa: E402
from tests.support.workers import Worker, lines, model  # noqa: E402

FLOOD = 100  # what serve lets one principal have queued (its max_jobs)

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def worker(
    postgres: PostgresCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Worker, str, str, Path]]:
    server = OpenAIServer().start()
    directory = tmp_path_factory.mktemp("fair")
    store, schema = postgres.new_store_url(), f"dbos_fair_{os.getpid()}"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("WORKER_PER_PRINCIPAL", "2")
        made = Worker(store, schema, server.base_url, directory)
    try:
        made.ready()
        yield made, store, schema, directory
    finally:
        (directory / "gate").touch()  # whatever happened, nothing holds the worker at its stop
        made.stop()
        server.close()


def _ended(http: httpx.Client, job_id: str, deadline: float) -> dict[str, Any]:
    end = time.monotonic() + deadline
    while True:
        status = http.get(f"/v1/jobs/{job_id}").json()
        if status["state"] in ("done", "paused", "failed", "cancelled"):
            return status
        assert time.monotonic() < end, f"job {job_id} did not end within {deadline} s: {status['state']}"
        time.sleep(0.2)


def test_a_key_flooding_the_queue_leaves_room_for_another_keys_job(worker) -> None:
    from chatagent import FnCallAgent
    from chatagent.server.runner import AgentServer

    child, store, schema, directory = worker
    bot = FnCallAgent(llm=model("http://127.0.0.1:9/v1"), name="bot")  # serve needs an agent; no job asks it
    with AgentServer({"bot": bot}, port=0, api_key={"alice": "key-alice", "bob": "key-bob"}, store=store, jobs=True,
                     job_flows=("hold",), dbos_schema=schema) as serve:  # fmt: skip
        base = serve.url[: -len("/v1")]
        alice = httpx.Client(base_url=base, headers={"Authorization": "Bearer key-alice"}, timeout=DEADLINE)
        bob = httpx.Client(base_url=base, headers={"Authorization": "Bearer key-bob"}, timeout=DEADLINE)
        flood = []
        for n in range(FLOOD):
            made = alice.post("/v1/jobs", json={"flow": "hold", "inputs": {"label": f"a{n}"}})
            assert made.status_code == 202, made.text
            flood.append(made.json()["id"])
        assert alice.post("/v1/jobs", json={"flow": "hold", "inputs": {"label": "a-extra"}}).status_code == 429
        mine = bob.post("/v1/jobs", json={"flow": "hold", "inputs": {"label": "b0", "wait": False}})
        assert mine.status_code == 202, mine.text

        done = _ended(bob, mine.json()["id"], DEADLINE * 2)  # behind alice's hundred, it would never start
        assert done["state"] == "done" and done["output"] == "b0"
        ended = [line.split()[1] for line in lines(directory / "ledger.attempts")]
        assert ended == ["b0"]  # every one of alice's still holds (or waits for) its slot
        running = [alice.get(f"/v1/jobs/{j}").json()["state"] for j in flood]
        assert running.count("running") <= 2 and running.count("queued") >= FLOOD - 2  # her share: 2 at once

        (directory / "gate").touch()
        assert all(_ended(alice, j, DEADLINE * 4)["state"] == "done" for j in flood)
        ended = [line.split()[1] for line in lines(directory / "ledger.attempts")]
        assert ended[0] == "b0" and sorted(ended[1:]) == sorted(f"a{n}" for n in range(FLOOD))  # each once
        alice.close()
        bob.close()

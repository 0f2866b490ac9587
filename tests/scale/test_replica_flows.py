"""Flows across replicas (issue 41), through real processes: two `chatagent serve --jobs` replicas on one PostgreSQL
behind HAProxy and a DBOS worker (tests/support/worker_child.py) that runs the flows. A flow started through one
replica pauses for a person (`Flow.ask`, CrewAI's `@human_feedback`); its owner's feedback, sent to the other
replica, resumes it on the worker: the methods that completed before the pause are not run again (the worker's
ledger counts every run), and the flow ends with the feedback. Another API key, on either replica or through the
balancer, neither reads nor resumes it, and feedback for a flow that waits on nothing is refused.
"""

from __future__ import annotations

import hashlib
import os
import threading
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
from tests.support.replicas import Replicas, unavailable  # noqa: E402
from tests.support.workers import Worker, lines  # noqa: E402

ALICE, BOB = "alice-flow-key-0123456", "bob-flow-key-987654321"

pytestmark = [pytest.mark.skipif(unavailable() is not None, reason=unavailable() or ""), pytest.mark.timeout(900)]


class Cluster:
    """The replicas, the worker and its ledger."""

    def __init__(self, replicas: Replicas, worker: Worker, directory: Path) -> None:
        self.replicas, self.worker, self.dir = replicas, worker, directory

    def attempts(self, flow_id: str) -> list[str]:
        """The methods the worker ran for `flow_id`, every run (the ledger's `method flow_id` lines)."""
        return [line.split()[0] for line in lines(self.dir / "ledger.attempts") if line.split()[1] == flow_id]


@pytest.fixture(scope="module")
def cluster(postgres: PostgresCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    server = OpenAIServer().start()  # the worker's agents need a model; these flows do not ask it
    directory = tmp_path_factory.mktemp("flows")
    (directory / "hang").write_text("-")
    store, schema = postgres.new_store_url(), f"dbos_flows_{os.getpid()}"
    worker = Worker(store, schema, server.base_url, directory)
    replicas = None
    try:
        worker.ready()  # (DBOS's tables made before the replicas open them)
        env = {"REPLICA_MODEL_URL": server.base_url, "REPLICA_LEDGER": str(directory / "replica-ledger")}
        flows = ("--job-flow", "review", "--job-flow", "announce")
        replicas = Replicas(store, "tests.support.replica_agent:make", directory, env, n=2,
                            api_key=f"{ALICE}\n{BOB}", extra=("--jobs", *flows, "--dbos-schema", schema))  # fmt: skip
        yield Cluster(replicas.start(), worker, directory)
    finally:
        if replicas is not None:
            replicas.close()
        worker.stop()
        server.close()


def _headers(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def post(url: str, key: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{url}/v1/jobs", headers=_headers(key), json=body, timeout=DEADLINE)


def ended(url: str, key: str, job_id: str) -> dict[str, Any]:
    """The job's status once it ended, read through `url` (every wait has its deadline)."""
    end = time.monotonic() + DEADLINE * 2
    while True:
        got = httpx.get(f"{url}/v1/jobs/{job_id}", headers=_headers(key), timeout=DEADLINE)
        assert got.status_code == 200, got.text
        status = got.json()
        if status["state"] in ("done", "paused", "failed", "cancelled"):
            return status
        assert time.monotonic() < end, f"job {job_id} did not end within {DEADLINE * 2} s: {status}"
        time.sleep(0.2)


def _refused_to_bob(cluster: Cluster, job: dict[str, Any], feedback: str) -> None:
    """Bob, on each replica and through the balancer, neither reads alice's flow job nor resumes her flow."""
    replicas = cluster.replicas
    for url in (replicas.url, replicas.replica_url(0), replicas.replica_url(1)):
        assert httpx.get(f"{url}/v1/jobs/{job['id']}", headers=_headers(BOB), timeout=DEADLINE).status_code == 404
        answered = post(url, BOB, {"flow": job["flow"], "flow_id": job["flow_id"], "feedback": feedback})
        assert answered.status_code == 404 and answered.json()["error"]["code"] == "flow_not_found"


def test_a_flow_paused_through_one_replica_is_resumed_through_the_other_by_its_owner_only(cluster: Cluster) -> None:
    replicas = cluster.replicas
    started = post(replicas.url, ALICE, {"flow": "review", "inputs": {"topic": "rivers"}})  # through the balancer
    assert started.status_code == 202, started.text
    job = started.json() | {"flow": "review"}
    here = int(started.headers["x-replica"][1:])
    paused = ended(replicas.replica_url(here), ALICE, job["id"])
    assert paused["state"] == "paused" and paused["question"] == "Publish the draft on rivers?"
    assert cluster.attempts(job["flow_id"]) == ["review:draft"]

    _refused_to_bob(cluster, job, "publish it, says bob")
    assert ended(replicas.url, ALICE, job["id"])["state"] == "paused"  # bob changed nothing
    assert cluster.attempts(job["flow_id"]) == ["review:draft"]

    other = replicas.replica_url(1 - here)
    answered = post(other, ALICE, {"flow": "review", "flow_id": job["flow_id"], "feedback": "yes"})
    assert answered.status_code == 202, answered.text
    assert answered.json()["flow_id"] == job["flow_id"]
    done = ended(replicas.url, ALICE, answered.json()["id"])
    assert done["state"] == "done", done
    assert done["output"] == "published (draft on rivers, yes)"
    assert [m["name"] for m in done["messages"]] == ["draft", "approve", "publish"]
    assert cluster.attempts(job["flow_id"]) == ["review:draft", "review:approve", "review:publish"]  # draft: once

    again = post(replicas.url, ALICE, {"flow": "review", "flow_id": job["flow_id"], "feedback": "yes again"})
    assert again.status_code == 409 and again.json()["error"]["code"] == "flow_not_waiting"  # it waits on nothing
    assert cluster.attempts(job["flow_id"]) == ["review:draft", "review:approve", "review:publish"]


def test_a_crewai_flow_waiting_for_human_feedback_goes_on_on_another_replica(cluster: Cluster) -> None:
    replicas = cluster.replicas
    started = post(replicas.replica_url(1), ALICE, {"flow": "announce", "inputs": {"topic": "the ferry"}})
    assert started.status_code == 202, started.text
    job = started.json() | {"flow": "announce"}
    paused = ended(replicas.url, ALICE, job["id"])
    assert paused["state"] == "paused" and paused["question"] == "Is the announcement right?"
    assert cluster.attempts(job["flow_id"]) == ["announce:write", "announce:check"]  # reviewed, then paused

    _refused_to_bob(cluster, job, "no")
    answered = post(replicas.replica_url(0), ALICE, {"flow": "announce", "flow_id": job["flow_id"], "feedback": "ok"})
    assert answered.status_code == 202, answered.text
    done = ended(replicas.replica_url(1), ALICE, answered.json()["id"])
    assert done["state"] == "done", done
    assert done["output"] == "sent ANNOUNCEMENT OF THE FERRY (ok)"
    assert cluster.attempts(job["flow_id"]) == ["announce:write", "announce:check", "announce:send"]  # each once


def test_a_job_on_a_flow_that_is_not_the_principals_own_is_refused_before_it_reaches_a_worker(
    cluster: Cluster,
) -> None:
    replicas = cluster.replicas
    principal = "key:" + hashlib.sha256(ALICE.encode()).hexdigest()[:16]
    started = post(replicas.url, ALICE, {"flow": "review", "inputs": {"topic": "lakes"}})
    job = started.json()
    assert ended(replicas.url, ALICE, job["id"])["state"] == "paused"
    forged = post(replicas.url, BOB, {"flow": "review", "inputs": {"id": job["flow_id"], "topic": "lakes"}})
    assert forged.status_code == 400  # a flow's id is the server's, never the client's
    unknown = post(replicas.url, ALICE, {"flow": "review", "flow_id": "job-" + "0" * 32, "feedback": "yes"})
    assert unknown.status_code == 404
    assert principal not in str(forged.json()) + str(unknown.json())
    assert cluster.attempts(job["flow_id"]) == ["review:draft"]


def test_two_answers_sent_at_once_to_two_replicas_resume_the_flow_once(cluster: Cluster) -> None:
    replicas = cluster.replicas
    job = post(replicas.url, ALICE, {"flow": "review", "inputs": {"topic": "seas"}}).json()
    assert ended(replicas.url, ALICE, job["id"])["state"] == "paused"
    answers: dict[str, httpx.Response] = {}

    def answer(i: int, text: str) -> None:
        answers[text] = post(replicas.replica_url(i), ALICE, {"flow": "review", "flow_id": job["flow_id"],
                                                              "feedback": text})  # fmt: skip

    threads = [threading.Thread(target=answer, args=(i, text)) for i, text in enumerate(("yes", "no"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE)
    outcomes = {}
    for text, got in answers.items():  # one resumes; the other is refused by serve, or by the worker after it
        assert got.status_code in (202, 409), got.text
        outcomes[text] = ended(replicas.url, ALICE, got.json()["id"]) if got.status_code == 202 else None
    done = [text for text, status in outcomes.items() if status is not None and status["state"] == "done"]
    assert len(done) == 1, outcomes
    (other,) = set(outcomes) - set(done)
    refused = outcomes[other]
    assert refused is None or (refused["state"] == "failed" and refused["error"]["type"] == "FlowNotWaiting")
    assert outcomes[done[0]]["output"] == f"published (draft on seas, {done[0]})"  # type: ignore[index]
    assert cluster.attempts(job["flow_id"]) == ["review:draft", "review:approve", "review:publish"]  # once each

"""Background jobs (`chatagent serve --jobs`, run by DBOS workers) act for the principal that submitted them (issue 36):
two API keys attack each other's jobs through the real server, the real worker process (tests/support/worker_child.py)
and a real PostgreSQL. A job's run takes its principal and the server's rules from the job (`chatagent.run.trust`),
as every served turn does: its trace, memories and approvals are the submitter's, and code waits for a person.

Before the fix the worker ran a job with only its URL policy: a job's tool that runs code ran unasked (served turns
pause there), and a flow job's trace was the local user's (alice never saw it; the machine's `chatagent traces` did).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

pytest.importorskip("dbos", reason="the DBOS engine needs chatagent[dbos] (scripts/setup.sh installs it)")

import httpx  # noqa: E402

from chatagent import FnCallAgent, LongTermMemory  # noqa: E402
from chatagent.server.runner import AgentServer  # noqa: E402
from tests.support.line_child import DEADLINE  # noqa: E402
from tests.support.loopback import Request  # noqa: E402
from tests.support.openai_server import OpenAIServer, Reply  # noqa: E402
from tests.support.postgres import PostgresCluster  # noqa: E402
from tests.support.workers import Worker, lines, model  # noqa: E402

pytestmark = pytest.mark.timeout(300)

KEYS = {"alice": "key-a", "bob": "key-b"}
SALARY = "My salary is 91,000 EUR a year."
ALARM = "My alarm code is 4711-9902."


def echo(request: Request) -> str:
    """A model that repeats its whole input: whatever a memory put there comes back in the answer."""
    return "\n".join(str(m.get("content") or "") for m in request.json["messages"])


class Setup:
    def __init__(self, serve: AgentServer, model_server: OpenAIServer, directory: Path) -> None:
        base = serve.url[: -len("/v1")]
        self.model_server, self.dir = model_server, directory
        self.alice = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {KEYS['alice']}"}, timeout=60)
        self.bob = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {KEYS['bob']}"}, timeout=60)

    def submit(self, client: httpx.Client, body: dict) -> str:
        made = client.post("/v1/jobs", json=body)
        assert made.status_code == 202, made.text
        return made.json()["id"]

    def wait(self, client: httpx.Client, job: str) -> dict:
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            status = client.get(f"/v1/jobs/{job}").json()
            if status["state"] in ("done", "paused", "failed", "cancelled"):
                return status
            time.sleep(0.1)
        raise AssertionError(f"job {job} did not end within {DEADLINE} s")

    def traces(self, client: httpx.Client) -> list[dict]:
        """The client's traces once the worker wrote them (a job's trace is written after its run ends)."""
        return client.get("/v1/traces", params={"limit": 100}).json()["data"]


@pytest.fixture(scope="module")
def setup(postgres: PostgresCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    model_server = OpenAIServer().start()
    directory = tmp_path_factory.mktemp("trust-jobs")
    (directory / "hang").write_text("-")
    store, schema = postgres.new_store_url(), f"dbos_trust_{os.getpid()}"
    memory = f"sqlite:///{directory}/memory.db"
    LongTermMemory("client:alice", memory, embedder=None).remember(SALARY, importance=0.9)
    LongTermMemory("client:bob", memory, embedder=None).remember(ALARM, importance=0.9)
    os.environ["CHATAGENT_TRACES"] = store  # the worker records every run it makes into the store serve reads
    try:
        worker = Worker(store, schema, model_server.base_url, directory)
    finally:
        del os.environ["CHATAGENT_TRACES"]
    bots = {name: FnCallAgent(llm=model(model_server.base_url), name=name)
            for name in ("recorder", "coder", "rememberer", "outer")}  # fmt: skip
    try:
        worker.ready()
        with AgentServer(bots, port=0, api_key=KEYS, store=store, jobs=True, job_flows=("trip",), dbos_schema=schema,
                         traces=True) as serve:  # fmt: skip
            made = Setup(serve, model_server, directory)
            yield made
            made.alice.close()
            made.bob.close()
    finally:
        worker.stop()
        model_server.close()


def test_a_jobs_tool_that_runs_code_waits_for_a_person_as_a_served_turns_does(setup: Setup) -> None:
    setup.model_server.reset()
    setup.model_server.add(Reply(tool_calls=[("run_code", {"code": "print('INJECTED-RAN')"})]), "Done.")
    job = setup.submit(setup.alice, {"model": "coder", "session_id": "code",
                                     "messages": [{"role": "user", "content": "Summarise this e-mail."}]})  # fmt: skip
    status = setup.wait(setup.alice, job)
    assert not [line for line in lines(setup.dir / "ledger") if line.startswith("code")], "a job ran code unasked"
    assert status["state"] == "paused" and status["waiting"][0]["name"] == "run_code"
    decision = {"role": "user", "content": "", "extra": {"approval": False}}
    refused = setup.bob.post("/v1/jobs", json={"model": "coder", "session_id": "code", "messages": [decision]})
    assert refused.status_code == 400  # bob's "code" is his own conversation: nothing of alice's waits there
    assert setup.bob.get(f"/v1/jobs/{job}").status_code == 404
    assert setup.bob.delete(f"/v1/jobs/{job}").status_code == 404


def test_a_jobs_memories_are_its_submitters(setup: Setup) -> None:
    setup.model_server.reset()
    setup.model_server.add(echo, echo)
    said = {}
    for who, client in (("alice", setup.alice), ("bob", setup.bob)):
        job = setup.submit(client, {"model": "rememberer",
                                    "messages": [{"role": "user", "content": "What is my salary? My alarm code?"}]})  # fmt: skip
        done = setup.wait(client, job)
        assert done["state"] == "done", done
        said[who] = done["messages"][-1]["content"]
    assert "91,000" in said["alice"] and "4711" not in said["alice"], "alice's job read another's memory"
    assert "4711" in said["bob"] and "91,000" not in said["bob"], "bob's job read another's memory"


def _wait_for_traces(setup: Setup, client: httpx.Client, kinds: set[str]) -> list[dict]:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        found = setup.traces(client)
        if kinds <= {t["kind"] for t in found}:
            return found
        time.sleep(0.2)
    raise AssertionError(f"no trace of kinds {kinds} within {DEADLINE} s: {[t['kind'] for t in setup.traces(client)]}")


def test_each_key_sees_only_the_traces_of_its_own_jobs_nested_runs_and_flows_included(setup: Setup) -> None:
    setup.model_server.reset()
    setup.model_server.add(Reply(tool_calls=[("ask_inner", {"query": "the ferry times"})]), "Inner: 9:15.",
                           "The ferry leaves at 9:15.")  # fmt: skip
    job = setup.submit(setup.alice, {"model": "outer", "messages": [{"role": "user", "content": "Ferry times?"}]})
    assert setup.wait(setup.alice, job)["state"] == "done"
    flow = setup.submit(setup.alice, {"flow": "trip", "inputs": {"city": "Rome"}})
    assert setup.wait(setup.alice, flow)["state"] == "done"

    mine = _wait_for_traces(setup, setup.alice, {"run", "flow"})
    (outer,) = [t for t in mine if t["name"] == "outer"]
    body = setup.alice.get(f"/v1/traces/{outer['id']}").json()
    assert "inner" in orjson.dumps(body).decode()  # the nested agent's run is in alice's trace
    (trip,) = [t for t in mine if t["kind"] == "flow"]  # before: the flow's trace was the local user's
    assert trip["name"] == "Trip"
    theirs = setup.traces(setup.bob)
    assert not {t["id"] for t in theirs} & {t["id"] for t in mine}, "bob listed alice's traces"
    for t in (outer, trip):
        assert setup.bob.get(f"/v1/traces/{t['id']}").status_code == 404
    assert httpx.get(str(setup.alice.base_url) + "/v1/traces").status_code == 401

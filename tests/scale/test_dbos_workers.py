"""DBOS as the durable engine, through real processes: two worker processes (tests/support/worker_child.py) on
the fixture's PostgreSQL take jobs from one DBOS queue; the one that runs a job is killed with SIGKILL mid-way
(inside a tool call, inside a flow method, inside a crew's task, inside a task of a batch), and the other one recovers the job on its
own: completed steps are not done again (the ledger sees each effect once), the job ends as if uninterrupted.
A turn paused for approval, and a flow paused on a question, stay paused through a kill. The model is the loopback OpenAI-compatible server.
"""

from __future__ import annotations

import os
import queue
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

pytest.importorskip("dbos", reason="the DBOS engine needs chatagent[dbos] (scripts/setup.sh installs it)")

from chatagent import approval_message  # noqa: E402
from chatagent.rag.backends import PostgresBackend  # noqa: E402
from chatagent.sessions import Session  # noqa: E402
from chatagent.workers import Jobs  # noqa: E402
from chatagent.workers.batch import Pool as BatchPool  # noqa: E402
from chatagent.workers.batch import ingest_folder, ingest_into  # noqa: E402
from chatagent.workers.client import batch_ids  # noqa: E402
from tests.support.line_child import DEADLINE  # noqa: E402
from tests.support.openai_server import OpenAIServer, Reply  # noqa: E402
from tests.support.postgres import PostgresCluster  # noqa: E402
from tests.support.workers import Worker, lines, make_crew, model  # noqa: E402


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


def _worker_of(pool: Pool, job_id: str) -> Worker:
    executor = pool.jobs.client.retrieve_workflow(job_id).get_status().executor_id
    return next(w for w in pool.workers if w.executor == executor)


def test_a_turn_paused_for_approval_stays_paused_through_a_kill_and_the_decision_runs_the_call_once(
    pool: Pool,
) -> None:
    _again(pool)
    pool.reset(hang="record:2")
    server = _server(pool)
    server.add(Reply(tool_calls=[("refund", {"order": "A7"})]))
    paused = pool.jobs.turn("recorder", [{"role": "user", "content": "Refund A7."}], user="alice")
    status = paused.wait(timeout=DEADLINE)
    assert status.state == "paused" and status.waiting[0]["name"] == "refund"
    holder = _worker_of(pool, paused.id)
    server.add(Reply(tool_calls=[("record", {"n": 2})]), "Recorded 2.")
    busy = pool.jobs.turn("recorder", [{"role": "user", "content": "Record 2."}], user="alice")
    victims = {id(holder): holder, id(blocked := pool.blocked()): blocked}
    for w in victims.values():
        pool.kill(w)  # the worker that paused the turn, and the one inside record(2) (perhaps the same)
    pool.add()  # a new worker: it finds the dead ones and recovers what they were running
    assert busy.wait(timeout=DEADLINE).state == "done"
    again = paused.status()
    assert again.state == "paused" and again.waiting[0]["name"] == "refund"  # nothing ran the paused call
    session = Session(again.session_id, pool.store, user="alice")
    pending = session.pending_turn
    assert pending is not None and pending.state == "paused" and pending.kind == "approval"
    assert not [line for line in pool.ledger() if line.startswith("refund")]
    server.add("A7 is refunded.")
    decided = pool.jobs.turn("recorder", [approval_message(True)], user="alice", session_id=again.session_id)
    done = decided.wait(timeout=DEADLINE)
    assert done.state == "done" and done.messages[-1]["content"] == "A7 is refunded."
    assert [line.split()[0] for line in pool.ledger() if line.startswith("refund")] == ["refund:A7"]
    assert session.pending_turn is None


def test_a_flow_whose_worker_is_killed_inside_a_method_goes_on_from_its_last_completed_method(pool: Pool) -> None:
    _again(pool)
    pool.reset(hang="flow:book")
    job = pool.jobs.flow("trip", {"city": "Oslo"}, user="alice")
    pool.kill(pool.blocked())
    done = job.wait(timeout=DEADLINE)
    assert done.state == "done" and done.output == "confirmed (booked: plan for Oslo)"
    assert [line.split()[0] for line in pool.ledger(".attempts")] == ["flow:plan", "flow:book", "flow:book",
                                                                       "flow:confirm"]  # fmt: skip
    assert [m["name"] for m in done.messages] == ["plan", "book", "confirm"]
    assert pool.jobs.get(job.id, user="bob") is None


def test_a_batch_keeps_what_ended_when_a_worker_dies_and_gives_what_a_run_in_process_gives(pool: Pool) -> None:
    _again(pool)
    pool.reset(hang="task:3")
    told: list[tuple[int, int]] = []
    batch = BatchPool(
        pool.jobs, user="alice", timeout=DEADLINE * 2, progress=lambda done, total: told.append((done, total))
    )
    items = [{"n": n} for n in range(8)]
    ids = batch_ids("squares", len(items))
    for job_id, item in zip(ids, items, strict=True):  # submitted here, waited for below (by the same batch id)
        pool.jobs.task("square", item, user="alice", job_id=job_id)
    victim = pool.blocked()
    ended_before = {i for i in ids if pool.jobs.get(i, user="alice").status().ended}  # type: ignore[union-attr]
    pool.kill(victim)
    results = batch.map("square", items, batch="squares")  # the same batch again: it attaches, starts nothing anew
    assert results == [{"n": n, "square": n * n} for n in range(8)]
    assert results == [{"n": i["n"], "square": i["n"] ** 2} for i in items]  # what the function gives in process
    attempts = [line.split()[1] for line in pool.ledger(".attempts")]
    assert attempts.count("3") == 2  # the item the dead worker was inside ran again
    for k, job_id in enumerate(ids):
        if job_id in ended_before:
            assert attempts.count(str(k)) == 1  # an item that had ended was not run again
    assert sorted(line.split()[1] for line in pool.ledger()) == [str(n) for n in range(8)]
    assert told[-1] == (8, 8) and [d for d, _ in told] == sorted(d for d, _ in told)


def test_a_crew_whose_worker_is_killed_inside_its_second_task_goes_on_from_its_first_tasks_output(pool: Pool) -> None:
    import threading

    _again(pool)
    pool.reset()
    server = _server(pool)
    gate = threading.Event()  # set once the worker that asked was killed: its reply then goes nowhere
    crew = make_crew(pool.model_url)
    server.add(_crew_reply, _crew_reply)
    here = crew.kickoff({"topic": "rivers"})  # what it gives in process, uninterrupted
    server.add(_crew_reply, Reply(text="Shorter: never sent", gate=gate, gate_after=0, stall=DEADLINE), _crew_reply)
    job = pool.jobs.turn("crew", crew.start_messages({"topic": "rivers"}), user="alice")
    end = time.monotonic() + DEADLINE
    while len(server.chat_requests) < 4:  # the job's second task asked the model
        assert time.monotonic() < end, "the crew's second task did not start"
        time.sleep(0.05)
    holder = _worker_of(pool, job.id)
    pool.kill(holder)  # SIGKILL inside the crew's second task
    gate.set()
    if not pool.workers:
        pool.add()
    done = job.wait(timeout=DEADLINE)
    assert done.state == "done", done
    out = crew.output_of(Session(done.session_id, pool.store, user="alice").messages())
    assert [t.raw for t in out.tasks_output] == [t.raw for t in here.tasks_output] and out.raw == here.raw
    assert here.tasks_output[0].raw == "A line about rivers."
    assert len(server.chat_requests) == 5  # the first task was not asked again, the second once more
    asked = server.chat_requests[-1].json["messages"]
    assert "A line about rivers." in str(asked)  # asked from the first task's stored output


def test_a_flow_paused_on_a_question_stays_paused_through_a_kill_and_goes_on_with_the_answer(pool: Pool) -> None:
    _again(pool)
    pool.reset()
    job = pool.jobs.flow("review", {"topic": "lakes"}, user="alice")
    paused = job.wait(timeout=DEADLINE)
    assert paused.state == "paused" and paused.question == "Publish the draft on lakes?"
    for w in list(pool.workers):
        pool.kill(w)  # every worker, the one that ran the flow among them
    pool.add()  # a new worker: it recovers what the dead ones held, and the question still waits
    assert pool.jobs.task("square", {"n": 4}, user="alice").wait(timeout=DEADLINE).state == "done"  # it is at work
    again = pool.jobs.get(job.id, user="alice").status()  # type: ignore[union-attr]
    assert again.state == "paused" and again.question == "Publish the draft on lakes?"
    answered = pool.jobs.flow("review", flow_id=paused.flow_id, feedback="yes", user="alice").wait(timeout=DEADLINE)
    assert answered.state == "done" and answered.output == "published (draft on lakes, yes)"
    ran = [line.split()[0] for line in pool.ledger(".attempts") if line.startswith("review:")]
    assert ran == ["review:draft", "review:approve", "review:publish"]  # nothing ran twice


def _crew_reply(request) -> str:
    asked = request.json["messages"][-1]["content"]
    topic = asked.split("Write about ", 1)[1].split()[0].strip(".") if "Write about " in asked else None
    return f"A line about {topic}." if topic else "Shorter: " + asked.rsplit("A line about ", 1)[-1].split(".")[0]


def test_kickoff_for_each_on_the_workers_gives_what_it_gives_in_process(pool: Pool) -> None:
    _again(pool)
    pool.reset()
    server = _server(pool)
    inputs = [{"topic": t} for t in ("rivers", "lakes", "seas")]
    crew = make_crew(server.base_url)
    server.add(*[_crew_reply] * 6)
    here = crew.kickoff_for_each(inputs)
    server.add(*[_crew_reply] * 6)
    told: list[tuple[int, int]] = []
    batch = BatchPool(pool.jobs, user="alice", timeout=DEADLINE * 2, progress=lambda *p: told.append(p))
    there = crew.kickoff_for_each(inputs, pool=batch)
    assert told[-1] == (3, 3) and [d for d, _ in told] == sorted({d for d, _ in told})  # each count told once
    assert [o.raw for o in there] == [o.raw for o in here]
    assert [[t.raw for t in o.tasks_output] for o in there] == [[t.raw for t in o.tasks_output] for o in here]
    assert here[0].tasks_output[0].raw == "A line about rivers."


def test_a_folder_ingested_on_the_workers_holds_what_ingesting_it_here_holds(pool: Pool, tmp_path: Path) -> None:
    _again(pool)
    pool.reset()
    folder = tmp_path / "docs"
    for k in range(12):
        (folder / f"part{k % 3}").mkdir(parents=True, exist_ok=True)
        (folder / f"part{k % 3}" / f"note{k}.txt").write_text(f"Note {k}. The ferry number {k} leaves from pier {k}.\n\n"
                                                              + "Filler sentence about harbours. " * 40)  # fmt: skip
    (folder / "ignored.bin").write_bytes(b"\0\1")
    told: list[tuple[int, int]] = []
    batch = BatchPool(pool.jobs, user="alice", timeout=DEADLINE * 2, progress=lambda *p: told.append(p))
    there = ingest_folder(folder, "ingest", batch)
    assert told[-1] == (12, 12) and [d for d, _ in told] == sorted({d for d, _ in told})
    theirs = _rows(pool.store, "passages")
    here_backend = PostgresBackend(pool.store, table="passages_here", embedder=None)
    here = ingest_folder(folder, ingest_into(here_backend))
    assert there == here and len(there) == 12
    assert theirs == _rows(pool.store, "passages_here") and len(theirs) >= 12
    assert here_backend.search("ferry number 7 pier", top_k=1)[0][0].startswith("part1/note7.txt#")


def _rows(store: str, table: str) -> list[tuple]:
    import psycopg

    with psycopg.connect(store, autocommit=True) as conn:
        return conn.execute(f"SELECT id, title, text FROM {table} ORDER BY id").fetchall()


# ---- the same jobs through `chatagent serve`, as two principals --------------------------------------------------


def test_serve_takes_jobs_that_only_their_owner_reads_streams_decides_or_cancels(pool: Pool) -> None:
    import httpx

    from chatagent import FnCallAgent
    from chatagent.server.runner import AgentServer

    _again(pool)
    pool.reset()
    server = _server(pool)
    bots = {name: FnCallAgent(llm=model(server.base_url), name=name) for name in ("recorder", "crew")}
    with AgentServer(bots, port=0, api_key={"alice": "key-a", "bob": "key-b"}, store=pool.store, jobs=True,
                     job_flows=("trip",), dbos_schema=pool.schema) as serve:  # fmt: skip
        base = serve.url[: -len("/v1")]
        alice = httpx.Client(base_url=base, headers={"Authorization": "Bearer key-a"}, timeout=DEADLINE)
        bob = httpx.Client(base_url=base, headers={"Authorization": "Bearer key-b"}, timeout=DEADLINE)
        assert alice.get("/readyz").json() == {"status": "ready"}

        server.add(Reply(tool_calls=[("record", {"n": 5})]), "Recorded 5.")
        made = alice.post("/v1/jobs", json={"model": "recorder", "messages": [{"role": "user", "content": "Record 5"}]})
        assert made.status_code == 202, made.text
        job = made.json()["id"]
        with alice.stream("GET", f"/v1/jobs/{job}/events") as events:
            lines = [line for line in events.iter_lines() if line.startswith("data: ")]
        assert lines[-1] == "data: [DONE]"
        streamed = [orjson.loads(line[6:]) for line in lines[:-1]]
        assert [e["message"]["role"] for e in streamed[:-1]] == ["assistant", "function", "assistant"]
        assert streamed[-1]["status"]["state"] == "done"
        assert streamed[-1]["status"]["messages"][-1]["content"] == "Recorded 5."
        assert "chatagent_job" not in str(streamed)  # the server's marks stay the server's
        for verb, path in [
            ("GET", f"/v1/jobs/{job}"),
            ("GET", f"/v1/jobs/{job}/events"),
            ("DELETE", f"/v1/jobs/{job}"),
        ]:
            assert bob.request(verb, path).status_code == 404  # as for an id that does not exist
        assert alice.get(f"/v1/jobs/{job}").json()["state"] == "done"
        assert httpx.get(f"{base}/v1/jobs/{job}").status_code == 401  # no key, no principal

        server.add(Reply(tool_calls=[("refund", {"order": "B2"})]))
        paused_id = alice.post("/v1/jobs", json={"model": "recorder", "session_id": "refunds",
                                                 "messages": [{"role": "user", "content": "Refund B2"}]}).json()["id"]  # fmt: skip
        paused = pool.jobs.get(paused_id, user="client:alice").wait(timeout=DEADLINE)  # type: ignore[union-attr]
        assert paused.state == "paused"
        shown = alice.get(f"/v1/jobs/{paused_id}").json()
        assert shown["state"] == "paused" and shown["waiting"][0]["name"] == "refund"
        decision = {"role": "user", "content": "", "extra": {"approval": True}}
        refused = bob.post("/v1/jobs", json={"model": "recorder", "session_id": "refunds", "messages": [decision]})
        assert refused.status_code == 400  # bob's "refunds" is his own conversation: nothing of alice's waits there
        server.add("B2 is refunded.")
        decided = alice.post("/v1/jobs", json={"model": "recorder", "session_id": "refunds", "messages": [decision]})
        assert decided.status_code == 202, decided.text
        done = pool.jobs.get(decided.json()["id"], user="client:alice").wait(timeout=DEADLINE)  # type: ignore[union-attr]
        assert done.state == "done" and done.messages[-1]["content"] == "B2 is refunded."
        assert [line.split()[0] for line in pool.ledger() if line.startswith("refund")] == ["refund:B2"]

        flow = alice.post("/v1/jobs", json={"flow": "trip", "inputs": {"city": "Rome"}}).json()
        assert bob.post("/v1/jobs", json={"flow": "trip", "flow_id": flow["flow_id"]}).status_code == 404
        assert bob.post("/v1/jobs", json={"flow": "nope"}).status_code == 404
        finished = pool.jobs.get(flow["id"], user="client:alice").wait(timeout=DEADLINE)  # type: ignore[union-attr]
        assert finished.output == "confirmed (booked: plan for Rome)"
        assert alice.get(f"/v1/jobs/{flow['id']}").json()["output"] == "confirmed (booked: plan for Rome)"

        local = {"role": "user", "content": [{"text": "look"}, {"image": "http://127.0.0.1:9/secret.png"}]}
        blocked = alice.post("/v1/jobs", json={"model": "recorder", "messages": [local]})
        assert blocked.status_code == 400 and blocked.json()["error"]["code"] == "url_not_allowed"
        alice.close()
        bob.close()


def test_an_evaluation_on_the_workers_judges_what_a_run_in_process_judges(
    pool: Pool, capsys: pytest.CaptureFixture[str]
) -> None:
    from chatagent.evals import Case, evaluate

    _again(pool)
    pool.reset()
    cases = [Case({"n": n}, expected={"n": n, "square": n * n}, name=f"square of {n}") for n in range(5)]
    cases += [Case({"n": 3}, expected={"n": 3, "square": 10}, name="a wrong expectation"),
              Case({"n": "x"}, expected=None, name="an item the task fails on")]  # fmt: skip

    def square_here(item: dict) -> dict:
        return {"n": item["n"], "square": item["n"] ** 2}

    capsys.readouterr()
    task = BatchPool(pool.jobs, user="alice", timeout=DEADLINE).task("square")
    there = evaluate(task, cases, store=False, progress=True)
    shown = capsys.readouterr().err.split("\r")  # the progress line, rewritten as cases end on the workers
    assert [line.split()[0] for line in shown if line.strip()] == [f"{k}/7" for k in range(8)]
    assert "5 passed" in shown[-1]
    here = evaluate(square_here, cases, store=False)
    assert [[a.output for a in c.attempts] for c in there.cases] == [[a.output for a in c.attempts] for c in here.cases]
    assert [c.attempts[0].passed for c in there.cases] == [True] * 5 + [False, False]
    assert [c.attempts[0].passed for c in here.cases] == [True] * 5 + [False, False]
    assert there.cases[-1].attempts[0].error and here.cases[-1].attempts[0].error  # failed in both, said why
    assert sorted(line.split()[1] for line in pool.ledger()) == sorted(["0", "1", "2", "3", "4", "x"])  # ran there

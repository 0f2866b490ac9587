"""Beyond one machine: what each path adds to a turn, how long a killed worker's job takes to come back, and the
throughput of 1, 2 and 3 `chatagent serve` replicas on one PostgreSQL (docs/scale.md).

1. A turn of a FnCallAgent with 2 tool calls (the model in process: ScriptedLLM, so the figures are the
   framework's own), median wall and CPU time of 10 turns: without a session, on SQLite, on PostgreSQL, and as a
   DBOS job (submitted, run by a worker in this process, its status read back as done); beside them the database
   transactions each commits (PostgreSQL's own count). CPU instructions (cachegrind) for the session paths; the
   DBOS path is given in CPU time, since its threads poll the database on a clock (a count under cachegrind, 50
   times slower, would count the polls).
2. Recovery: two worker processes, one killed with SIGKILL inside a tool call; the time from the kill to the job
   done on the other (its liveness check, the queue's poll, the resumed turn).
3. Throughput: 3 replicas on one PostgreSQL, 40 clients sending turns (a tool call, then a short answer from the
   loopback model server) round-robin to the first 1, 2 and 3 of them, and to all 3 through HAProxy. The whole
   set-up (database, replicas, model server, clients) shares this machine's cores: the replicas cannot scale here.
   The paper estimate for N machines divides the database's measured transaction rate by the transactions a turn
   commits.

Each part is skipped, saying why, where PostgreSQL, DBOS or HAProxy is missing.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from _measure import show  # noqa: E402

from chatagent import FnCallAgent, ScriptedLLM, Session, tool_call  # noqa: E402
from chatagent.sessions import close_stores  # noqa: E402

TURNS = 10


def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def agent() -> FnCallAgent:
    script = [tool_call("lookup", {"key": "a"}), tool_call("lookup", {"key": "b"}), "Both looked up."]
    return FnCallAgent(function_list=[lookup], llm=ScriptedLLM(script), name="bench")


def timed(turn) -> tuple[float, float]:
    """Median (wall, CPU) seconds of TURNS calls of `turn(n)`."""
    walls, cpus = [], []
    for n in range(TURNS + 1):
        w, c = time.perf_counter(), time.process_time()
        turn(n)
        if n:  # the first one warms up
            walls.append(time.perf_counter() - w)
            cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus)


def commits(admin) -> int:
    """The database's next transaction id: the write transactions so far (a read-only one takes none; this
    question itself takes one)."""
    return int(admin("SELECT pg_current_xact_id()::text::bigint")[0][0])


def per_turn_costs(pg: Any | None) -> None:
    ask = [{"role": "user", "content": "Look a and b up."}]
    rows: list[tuple[str, float, float, str]] = []
    plain = timed(lambda n: agent().run_nonstream(ask))
    rows.append(("no session", *plain, "0"))
    with tempfile.TemporaryDirectory(dir=ROOT) as disk:
        url = f"sqlite:///{disk}/bench.db"
        rows.append(("SQLite session", *timed(lambda n: agent().run_nonstream(ask, session=Session(f"s{n}", url))),
                     "-"))  # fmt: skip
        close_stores()
    if pg is None:
        show("postgresql", "skipped: PostgreSQL is not installed")
    else:
        url = pg.new_store_url()
        Session("warm", url).messages()
        before = commits(pg.admin)
        wall, cpu = timed(lambda n: agent().run_nonstream(ask, session=Session(f"p{n}", url)))
        rows.append(("PostgreSQL session", wall, cpu, f"{(commits(pg.admin) - before - 1) / (TURNS + 1):.1f}"))
        rows += dbos_turns(pg)
    for name, wall, cpu, tx in rows:
        show(
            f"turn with 2 tool calls, {name}: wall (ms, median)", f"{wall * 1e3:.2f}   (+{(wall - plain[0]) * 1e3:.2f})"
        )
        show(f"turn with 2 tool calls, {name}: CPU (ms, median)", f"{cpu * 1e3:.2f}   (+{(cpu - plain[1]) * 1e3:.2f})")
        if tx != "-":
            show(f"turn with 2 tool calls, {name}: database write transactions", tx)
    instructions()


def dbos_turns(pg: Any) -> list[tuple[str, float, float, str]]:
    try:
        import dbos  # noqa: F401
    except ImportError:
        show("dbos job", "skipped: dbos is not installed (pip install 'chatagent[dbos]')")
        return []
    from chatagent.workers import Jobs, QueueLimits, Workers

    url = pg.new_store_url()
    schema = f"dbos_bench_{os.getpid()}"
    bots = {"bench": agent()}

    class Fresh(dict):  # a new ScriptedLLM for each job: the worker looks the agent up by name
        def get(self, key, default=None):
            return agent() if key == "bench" else default

    workers = Workers(url, agents=bots, queues=[QueueLimits("bench", worker_concurrency=1, polling=0.01)],
                      dbos_schema=schema, recovery_interval=60)  # fmt: skip
    workers.agents = Fresh()  # type: ignore[assignment]
    workers.launch()
    jobs = Jobs(url, dbos_schema=schema, queue="bench")
    try:
        ask = [{"role": "user", "content": "Look a and b up."}]
        before = commits(pg.admin)
        wall, cpu = timed(lambda n: jobs.turn("bench", ask, user="bench").wait(timeout=60, poll=0.02))
        tx = (commits(pg.admin) - before - 1) / (TURNS + 1)
    finally:
        jobs.close()
        workers.close(grace=5)
    show(
        "dbos job: what its wall and CPU time hold",
        "the queue's polls (every 10 ms here), DBOS's records, the client's status reads (every 20 ms), the turn",
    )
    return [("DBOS job (PostgreSQL)", wall, cpu, f"{tx:.1f}")]


def instructions() -> None:
    """CPU instructions of a turn: three turns less one, per turn, under cachegrind (load-independent)."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        show("turn instructions", "not measured (no valgrind)")
        return
    counts: dict[str, list[int]] = {}
    with tempfile.TemporaryDirectory(dir=ROOT) as disk:
        for variant in ("plain", "sqlite"):
            for n in (1, 4):
                cmd = [valgrind, "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                       sys.executable, __file__, "--count", variant, str(n), disk]  # fmt: skip
                out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=900,
                                     env={**os.environ, "PYTHONHASHSEED": "0"})  # fmt: skip
                found = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
                assert found is not None, out.stderr[-500:]
                counts.setdefault(variant, []).append(int(found.group(1).replace(",", "")))
    per = {v: (c[1] - c[0]) / 3 for v, c in counts.items()}
    show("turn with 2 tool calls, no session: instructions", f"{per['plain']:,.0f}")
    show(
        "turn with 2 tool calls, SQLite session: instructions",
        f"{per['sqlite']:,.0f}   (+{per['sqlite'] - per['plain']:,.0f})",
    )


def count(variant: str, n: int, directory: str) -> None:
    for k in range(n):
        session = {} if variant == "plain" else {"session": Session(f"c{k}", f"sqlite:///{directory}/c-{n}.db")}
        agent().run_nonstream([{"role": "user", "content": "Look a and b up."}], **session)


def recovery(pg: Any) -> None:
    try:
        import dbos  # noqa: F401
    except ImportError:
        show("recovery after a kill", "skipped: dbos is not installed")
        return
    from chatagent.workers import Jobs
    from tests.support.openai_server import OpenAIServer, Reply
    from tests.support.workers import Worker

    url, schema = pg.new_store_url(), f"dbos_rec_{os.getpid()}"
    with OpenAIServer() as server, tempfile.TemporaryDirectory() as directory:
        (Path(directory) / "hang").write_text("record:2")
        server.add(Reply(tool_calls=[("record", {"n": 1})]), Reply(tool_calls=[("record", {"n": 2})]), "Done.")
        workers = [Worker(url, schema, server.base_url, Path(directory)) for _ in range(2)]
        jobs = Jobs(url, dbos_schema=schema)
        try:
            for w in workers:
                w.ready()
            job = jobs.turn("recorder", [{"role": "user", "content": "Record 1 and 2."}], user="bench")
            victim = blocked(workers)
            executor = victim.executor
            start = time.perf_counter()
            victim.kill()
            requeued = None
            while not job.status().ended:
                if requeued is None and jobs.client.retrieve_workflow(job.id).get_status().executor_id != executor:
                    requeued = time.perf_counter() - start
                time.sleep(0.02)
            took = time.perf_counter() - start
        finally:
            jobs.close()
            for w in workers:
                w.kill() if w.p.poll() is None else None
    show("recovery: SIGKILL inside a tool call to the job taken by another worker (s)",
         f"{requeued or took:.2f}   (its liveness check every 0.3 s, DBOS's recovery, the queue's poll every 0.2 s)")  # fmt: skip
    show("recovery: SIGKILL inside a tool call to the job done on another worker (s)",
         f"{took:.2f}   (and the resumed turn: the tool call again, one more model call)")  # fmt: skip


def blocked(workers: list) -> Any:
    import queue

    end = time.monotonic() + 120
    while time.monotonic() < end:
        for w in workers:
            try:
                line = w.lines.get(timeout=0.05)
            except queue.Empty:
                continue
            if '"blocked"' in line:
                return w
    raise RuntimeError("no worker blocked")


def throughput(pg: Any) -> None:
    from tests.support.replicas import Replicas, unavailable

    reason = unavailable()
    import httpx

    from tests.support.openai_server import OpenAIServer, Reply

    def reply(request: Any) -> Reply | str:
        msgs = request.json["messages"]
        if msgs[-1]["role"] != "tool":
            return Reply(tool_calls=[("note", {"client": "bench"})])
        return "Noted, and here is a short answer."

    with OpenAIServer() as server, tempfile.TemporaryDirectory() as directory:
        env = {"REPLICA_MODEL_URL": server.base_url, "REPLICA_LEDGER": str(Path(directory) / "ledger")}
        store = pg.new_store_url()
        replicas = Replicas(store, "tests.support.replica_agent:make", Path(directory), env)
        if reason:
            show("replicas through HAProxy", f"skipped: {reason}")
        try:
            started = replicas.start() if not reason else None
            if started is None:  # no balancer: the replicas alone
                for i in range(replicas.n):
                    replicas._spawn(i)
                for i in range(replicas.n):
                    replicas.wait_ready(i)
            targets = [[replicas.replica_url(i) for i in range(k)] for k in (1, 2, 3)]
            if not reason:
                targets.append([replicas.url])
            rates = []
            for urls in targets:
                server.add(*[reply] * 400)
                before = commits(pg.admin)
                turns, seconds = burst(urls, httpx)
                rates.append(turns / seconds)
                name = (
                    f"{len(urls)} replica(s), clients round-robin"
                    if urls[0] != replicas.url
                    else "3 replicas through HAProxy"
                )
                show(
                    f"throughput, {name} (turns/s)",
                    f"{turns / seconds:.1f}   ({turns} turns with a tool call in {seconds:.1f} s)",
                )
                tx = (commits(pg.admin) - before - 1) / turns
            show("database write transactions per served turn (PostgreSQL's transaction ids)", f"{tx:.1f}")
            rate = db_rate(pg)
            show("PostgreSQL transaction rate here, 8 connections, synchronous_commit off (tx/s)", f"{rate:,.0f}")
            per_machine = max(rates[:3])
            for n in (1, 4, 16, 64):
                bound = rate / tx
                show(f"paper estimate, {n} machine(s) like this one (turns/s)",
                     f"{min(n * per_machine, bound):,.0f}   (replicas {n * per_machine:,.0f}; database bound {bound:,.0f})")  # fmt: skip
        finally:
            replicas.close()


def burst(urls: list[str], httpx: Any, clients: int = 40, per_client: int = 5) -> tuple[int, float]:
    errors: list[str] = []

    def client(k: int) -> None:
        with httpx.Client(headers={"Authorization": "Bearer replica-key"}, timeout=300) as http:
            for n in range(per_client):
                url = urls[(k + n) % len(urls)]
                r = http.post(f"{url}/v1/chat/completions", json={"model": "replica", "session_id": f"b{k}-{n}-{time.time_ns()}",
                              "messages": [{"role": "user", "content": f"bench {k} {n}"}]})  # fmt: skip
                if r.status_code != 200:
                    errors.append(r.text[:200])

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    took = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"{len(errors)} turns failed: {errors[0]}")
    return clients * per_client, took


def db_rate(pg: Any, threads: int = 8, each: int = 300) -> float:
    import psycopg

    pg.admin("CREATE TABLE IF NOT EXISTS bench_rate (k int, v text)")

    def work() -> None:
        with psycopg.connect(pg.url, autocommit=True) as conn:
            for k in range(each):
                with conn.transaction():
                    conn.execute("SET LOCAL synchronous_commit = off")
                    conn.execute("INSERT INTO bench_rate VALUES (%s, 'x')", (k,))

    pool = [threading.Thread(target=work) for _ in range(threads)]
    start = time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return threads * each / (time.perf_counter() - start)


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--count":  # a child of instructions(), under cachegrind
        count(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return
    argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0]).parse_args()  # --help; no options
    os.environ.setdefault("CHATAGENT_EMBEDDER", "none")
    from tests.support.postgres import PostgresCluster, unavailable

    reason = unavailable()
    if reason:
        show("postgresql", f"skipped: {reason}")
        per_turn_costs(None)
        return
    with PostgresCluster(fsync=True).start() as pg:
        per_turn_costs(pg)
        recovery(pg)
        throughput(pg)
    show("cores on this machine", f"{os.cpu_count()}   (database, replicas, model server and clients share them)")


if __name__ == "__main__":
    main()

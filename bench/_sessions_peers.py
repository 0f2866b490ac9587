"""The references of bench/sessions.py: LangGraph's SqliteSaver and the OpenAI Agents SDK's SQLiteSession doing the
same work as our sessions, each in a virtualenv of its own, made once from PyPI, then run offline.

    .venv/bin/python bench/_sessions_peers.py                 # make the venvs if missing, print where they are
    <peer venv>/bin/python bench/_sessions_peers.py measure langgraph DIR     # inside a peer venv: one JSON line

The venvs live under the bench cache (CHATAGENT_BENCH_CACHE, default ~/.cache/chatagent-bench) as
sessions-<peer>-venv; nothing of chatagent is importable there. A measurement runs with the offline
environment and the loopback-only guard of qa_common.py. This file uses the standard library only at import: the
workload (`conversation`, `WORK`) is shared with bench/sessions.py so that both sides do the same.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

PEERS = {
    "langgraph": ["langgraph==1.2.22", "langgraph-checkpoint-sqlite==3.1.2"],
    "openai-agents": ["openai-agents==0.24.0"],
}
IMPORT_CHECK = {"langgraph": "import langgraph.checkpoint.sqlite", "openai-agents": "import agents"}
BENCH_DIR = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("CHATAGENT_BENCH_CACHE", Path.home() / ".cache" / "chatagent-bench"))
_INSTALL_TIMEOUT = 1200.0

# the work: a conversation of HISTORY_TURNS turns (2 messages each), then APPENDS more turns one by one, LOADS
# reads of the whole 200-message conversation, and WRITERS sessions written at once, WRITES turns each
WORK = {"history_turns": 100, "appends": 100, "loads": 100, "writers": 50, "writes": 10}


def conversation(turns: int, seed: int = 7) -> list[tuple[str, str]]:
    """(question, answer) pairs of realistic sizes (about 120 and 700 characters), the same on every run."""
    rng = random.Random(seed)
    words = [*["the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "with", "was", "on", "be", "by", "this", "are", "or", "from", "at", "which", "have", "an", "not"],
             *["train", "hotel", "museum", "river", "ticket", "morning", "evening", "price", "garden", "walk", "coffee", "bridge", "market"]]  # fmt: skip

    def text(n: int) -> str:
        return " ".join(rng.choice(words) for _ in range(n)).capitalize() + "."

    return [(text(22), text(120)) for _ in range(turns)]


def median_ms(times: list[float]) -> float:
    return round(statistics.median(times) * 1000, 3)


# ---- the venvs ----------------------------------------------------------------------------------------------


class PeerUnavailable(RuntimeError):
    """A peer venv could not be made or its measurement failed; the message says why."""


def venv(peer: str) -> Path:
    return CACHE / f"sessions-{peer}-venv"


def python(peer: str) -> Path:
    return venv(peer) / "bin" / "python"


def ensure(peer: str) -> Path:
    """Make the peer's venv once (a lock guards concurrent benches); its interpreter."""
    stamp = venv(peer) / "chatagent-bench-requirements.json"
    if _ready(stamp, peer):
        return python(peer)
    CACHE.mkdir(parents=True, exist_ok=True)
    log_path = CACHE / f"sessions-{peer}-venv.log"
    with open(CACHE / f"sessions-{peer}-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _ready(stamp, peer):
            return python(peer)
        print(f"creating the {peer} reference venv in {venv(peer)} (once; log: {log_path}) ...", file=sys.stderr)
        with open(log_path, "w") as log:
            for cmd in (
                [sys.executable, "-m", "venv", "--clear", str(venv(peer))],
                [str(python(peer)), "-m", "pip", "install", "--disable-pip-version-check", *PEERS[peer]],
            ):
                try:
                    done = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=_INSTALL_TIMEOUT)
                except (OSError, subprocess.TimeoutExpired) as exc:
                    raise PeerUnavailable(f"`{' '.join(cmd)}` failed: {exc}") from exc
                if done.returncode != 0:
                    raise PeerUnavailable(f"`{' '.join(cmd)}` exited {done.returncode}; see {log_path}")
        check = _run(peer, ["-c", f"import qa_common; qa_common.guard(); {IMPORT_CHECK[peer]}"], 300)
        if check.returncode != 0:
            raise PeerUnavailable(f"`{IMPORT_CHECK[peer]}` fails in {venv(peer)}:\n{check.stderr[-2000:]}")
        stamp.write_text(json.dumps(PEERS[peer]))
    return python(peer)


def _ready(stamp: Path, peer: str) -> bool:
    try:
        return json.loads(stamp.read_text()) == PEERS[peer]
    except (OSError, ValueError):
        return False


def _run(peer: str, args: list[str], timeout: float) -> subprocess.CompletedProcess:
    from _qwen_agent import offline_env

    return subprocess.run(
        [str(python(peer)), *args], cwd=BENCH_DIR, env=offline_env(), capture_output=True, text=True, timeout=timeout
    )


def reference(peer: str, directory: Path) -> dict | str:
    """The peer's figures on the work, or a one-line reason why they are missing."""
    try:
        ensure(peer)
        done = _run(peer, [str(Path(__file__).resolve()), "measure", peer, str(directory)], 1800)
        if done.returncode != 0:
            raise PeerUnavailable(f"the {peer} measurement exited {done.returncode}:\n{done.stderr[-2000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (PeerUnavailable, subprocess.TimeoutExpired, OSError, ValueError, IndexError) as exc:
        return f"{peer} reference missing: {str(exc).strip()}".replace("\n", "\n    ")


# ---- the measurements, run inside a peer venv ---------------------------------------------------------------


def timed(fn: Any, *args: Any) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def concurrently(write_one: Any) -> float:
    """Seconds for WRITERS threads to write WRITES turns each to sessions of their own (`write_one(i, q, a)`)."""
    turns = conversation(WORK["writes"], seed=11)
    barrier = threading.Barrier(WORK["writers"] + 1)
    errors: list[BaseException] = []

    def writer(i: int) -> None:
        barrier.wait()
        try:
            for q, a in turns:
                write_one(i, q, a)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(WORK["writers"])]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise errors[0]
    return elapsed


def measure_langgraph(directory: Path) -> dict:
    import sqlite3

    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, MessagesState, StateGraph

    conn = sqlite3.connect(directory / "langgraph.db", check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    builder = StateGraph(MessagesState)
    builder.add_node("chat", lambda state: {})
    builder.add_edge(START, "chat")
    builder.add_edge("chat", END)
    graph = builder.compile(checkpointer=saver)

    def append(thread: str, q: str, a: str) -> None:
        graph.update_state({"configurable": {"thread_id": thread}}, {"messages": [HumanMessage(q), AIMessage(a)]})

    def load(thread: str) -> list:
        return graph.get_state({"configurable": {"thread_id": thread}}).values["messages"]

    for q, a in conversation(WORK["history_turns"]):
        append("bench", q, a)
    assert len(load("bench")) == 2 * WORK["history_turns"]
    loads = [timed(load, "bench") for _ in range(WORK["loads"])]
    appends = [timed(append, "bench", q, a) for q, a in conversation(WORK["appends"], seed=3)]
    concurrent = concurrently(lambda i, q, a: append(f"writer-{i}", q, a))
    pragmas = {p: conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("journal_mode", "synchronous")}
    return result(loads, appends, concurrent, sqlite=pragmas)


def measure_openai_agents(directory: Path) -> dict:
    import asyncio

    from agents import SQLiteSession

    path = directory / "openai-agents.db"

    async def main() -> dict:
        session = SQLiteSession("bench", path)
        for q, a in conversation(WORK["history_turns"]):
            await session.add_items([{"role": "user", "content": q}, {"role": "assistant", "content": a}])
        assert len(await session.get_items()) == 2 * WORK["history_turns"]
        loads, appends = [], []
        for _ in range(WORK["loads"]):
            start = time.perf_counter()
            await session.get_items()
            loads.append(time.perf_counter() - start)
        for q, a in conversation(WORK["appends"], seed=3):
            start = time.perf_counter()
            await session.add_items([{"role": "user", "content": q}, {"role": "assistant", "content": a}])
            appends.append(time.perf_counter() - start)
        turns = conversation(WORK["writes"], seed=11)

        async def writer(i: int) -> None:
            s = SQLiteSession(f"writer-{i}", path)
            for q, a in turns:
                await s.add_items([{"role": "user", "content": q}, {"role": "assistant", "content": a}])

        start = time.perf_counter()
        await asyncio.gather(*(writer(i) for i in range(WORK["writers"])))
        concurrent = time.perf_counter() - start
        conn = session._get_connection()
        pragmas = {p: conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("journal_mode", "synchronous")}
        return result(loads, appends, concurrent, sqlite=pragmas)

    return asyncio.run(main())


def result(loads: list[float], appends: list[float], concurrent: float, **extra: Any) -> dict:
    """The figures of one side: median load and append latencies, the concurrent writes' time and rate."""
    turns = WORK["writers"] * WORK["writes"]
    return {
        "load_ms": median_ms(loads),
        "append_ms": median_ms(appends),
        "concurrent_s": round(concurrent, 3),
        "concurrent_turns_per_s": round(turns / concurrent, 1),
        **extra,
    }


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "measure":
        sys.path.insert(0, str(BENCH_DIR))
        import qa_common

        qa_common.guard()
        fn = measure_langgraph if sys.argv[2] == "langgraph" else measure_openai_agents
        qa_common.emit(fn(Path(sys.argv[3])))
    else:
        for name in PEERS:
            try:
                print(f"{name} reference venv: {ensure(name)}")
            except PeerUnavailable as exc:
                print(f"{name} reference missing: {exc}")

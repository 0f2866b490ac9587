"""Durable turns: what checkpointing costs, and how long a resume takes, on SQLite (disk and tmpfs) and PostgreSQL.

A FnCallAgent turn with 20 tool calls runs on a session (the model: ScriptedLLM, in process, so the figures are the
framework's own): every checkpoint it writes is timed, split into those after a model reply (before its calls run)
and those after a tool result. Beside them, the framework time of one tool round trip (a model reply with a call,
the call, its result) measured on the same turn without a session, with the model in process and with the loopback
OpenAI-compatible server over HTTP. Then a turn whose run failed after 20 completed calls is resumed: the time from
`resume()` to the first fragment of the continuation, and to its end.

Goals: under 1 ms per checkpoint on SQLite, and under 5 % of a tool round trip's framework time (reported as the
share of the two checkpoints a round trip writes). Medians of the checkpoints of 5 turns. PostgreSQL is a throwaway
local server (tests/support/postgres.py) with fsync on; it is skipped, saying why, where it is not installed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from _measure import show  # noqa: E402

from chatagent import FnCallAgent, ModelServiceError, ScriptedLLM, Session, tool_call  # noqa: E402
from chatagent.sessions import close_stores  # noqa: E402
from chatagent.sessions.turn import Turn  # noqa: E402

CALLS = 20
TURNS = 5


def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def script(failing: bool = False, calls: int = CALLS) -> list[Any]:
    steps: list[Any] = [tool_call("lookup", {"key": f"k{i}"}) for i in range(calls)]
    return steps + [ModelServiceError(500, "down") if failing else "All looked up."]


def checkpoints(url: str) -> tuple[list[float], list[float]]:
    after_reply: list[float] = []
    after_result: list[float] = []
    original = Turn.flush

    def flush(self: Turn, state: str | None = None, detail: dict | None = None) -> None:
        # which kind, read after the timing and cheaply: building the response's messages here (as this did) made
        # garbage that the collector then reclaimed inside the timed checkpoints
        start = time.perf_counter()
        original(self, state, detail)
        elapsed = time.perf_counter() - start
        (after_result if self._collector._parts[-1].first.role == "function" else after_reply).append(elapsed)

    Turn.flush = flush  # type: ignore[method-assign]
    try:
        for n in range(TURNS):
            bot = FnCallAgent(function_list=[lookup], llm=ScriptedLLM(script()), max_llm_calls=CALLS + 1)
            bot.run_nonstream([{"role": "user", "content": "Look them up."}], session=Session(f"turn-{n}", url))
    finally:
        Turn.flush = original  # type: ignore[method-assign]
    return after_reply, after_result


def round_trip_in_process() -> float:
    """Seconds of framework time per tool round trip, the model in process: the median over 3 x TURNS turns (a
    median, as the checkpoints' are; the best turn, as this was, set a lucky turn against typical checkpoints)."""
    trips = []
    for _ in range(3 * TURNS):
        bot = FnCallAgent(function_list=[lookup], llm=ScriptedLLM(script()), max_llm_calls=CALLS + 1)
        start = time.perf_counter()
        bot.run_nonstream([{"role": "user", "content": "Look them up."}])
        trips.append((time.perf_counter() - start) / CALLS)
    return statistics.median(trips)


def round_trip_http() -> float:
    """Seconds per tool round trip with the loopback OpenAI-compatible server (real HTTP and SSE)."""
    from tests.support.openai_server import OpenAIServer, Reply

    best = float("inf")
    with OpenAIServer().start() as server:
        llm = {"model": "m", "model_server": server.base_url, "api_key": "k"}
        for _ in range(TURNS):
            server.reset()
            for i in range(CALLS):
                server.add(Reply(tool_calls=[("lookup", {"key": f"k{i}"})]))
            server.add("All looked up.")
            bot = FnCallAgent(function_list=[lookup], llm=llm, max_llm_calls=CALLS + 1)
            start = time.perf_counter()
            bot.run_nonstream([{"role": "user", "content": "Look them up."}])
            best = min(best, (time.perf_counter() - start) / CALLS)
    return best


def resume_times(url: str) -> tuple[float, float]:
    """(seconds from resume() to the continuation's first fragment, to its end) for a turn with CALLS completed
    calls, medians of TURNS."""
    first: list[float] = []
    whole: list[float] = []
    for n in range(TURNS):
        s = Session(f"resume-{n}", url)
        bot = FnCallAgent(function_list=[lookup], llm=ScriptedLLM(script(failing=True)), max_llm_calls=CALLS + 1)
        try:
            bot.run_nonstream([{"role": "user", "content": "Look them up."}], session=s)
        except ModelServiceError:
            pass
        pending = s.pending_turn
        assert pending is not None and len(pending.response) == 2 * CALLS
        bot = FnCallAgent(function_list=[lookup], llm=ScriptedLLM(["All looked up."]))
        start = time.perf_counter()
        run = bot.resume(session=s, delta_stream=True)
        got_first = None
        for n_yield, _ in enumerate(run):
            if n_yield == 1:  # the first yield is the completed part, shown again
                got_first = time.perf_counter() - start
        whole.append(time.perf_counter() - start)
        first.append(got_first or 0.0)
        assert s.pending_turn is None
    return statistics.median(first), statistics.median(whole)


def report(name: str, url: str, in_process: float, http: float) -> None:
    after_reply, after_result = checkpoints(url)
    reply_ms = statistics.median(after_reply) * 1e3
    result_ms = statistics.median(after_result) * 1e3
    show(f"{name} checkpoint after a model reply (median, ms)", f"{reply_ms:.4f}")
    show(f"{name} checkpoint after a tool result (median, ms)", f"{result_ms:.4f}")
    per_trip = (reply_ms + result_ms) / 1e3
    show(f"{name} checkpoints per tool round trip vs its framework time, model in process (%)",
         f"{100 * per_trip / in_process:.1f}")  # fmt: skip
    show(f"{name} checkpoints per tool round trip vs its time over loopback HTTP (%)", f"{100 * per_trip / http:.1f}")
    first, whole = resume_times(url)
    show(f"{name} resume of a turn with {CALLS} completed calls: to the first new fragment (ms)", f"{first * 1e3:.2f}")
    show(f"{name} resume of a turn with {CALLS} completed calls: to its end, stored (ms)", f"{whole * 1e3:.2f}")
    close_stores()


def count_turns(variant: str, calls: int, directory: str) -> None:
    """What `--count` does in a child under cachegrind: three turns of `calls` tool calls, `plain` (no session),
    `session` (on SQLite in `directory`) or `unflushed` (on a session whose checkpoints are not written)."""
    if variant == "unflushed":
        Turn.flush = lambda self, state=None, detail=None: None  # type: ignore[method-assign]
    for n in range(3):
        bot = FnCallAgent(function_list=[lookup], llm=ScriptedLLM(script(calls=calls)), max_llm_calls=calls + 1)
        session = {} if variant == "plain" else {"session": Session(f"{variant}-{n}", f"sqlite:///{directory}/c.db")}
        bot.run_nonstream([{"role": "user", "content": "Look them up."}], **session)


def instructions_per_trip(variant: str) -> float | None:
    """CPU instructions of one tool round trip of `variant` (cachegrind: three turns of 20 calls less three of 2,
    over the 54 round trips between); None without valgrind."""
    import re
    import shutil
    import subprocess

    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    counts = []
    with tempfile.TemporaryDirectory(dir=ROOT) as disk:
        for calls in (2, CALLS):
            cmd = [valgrind, "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null", sys.executable,
                   __file__, "--count", variant, str(calls), disk]  # fmt: skip
            env = {**os.environ, "PYTHONHASHSEED": "0"}
            out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=900, env=env)
            found = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
            if found is None:
                raise RuntimeError(f"no instruction count from cachegrind: {out.stderr[-500:]}")
            counts.append(int(found.group(1).replace(",", "")))
    return (counts[1] - counts[0]) / (3 * (CALLS - 2))


def report_instructions() -> None:
    """The checkpoints' share of a round trip in CPU instructions, which a busy machine does not change."""
    trip, session, unflushed = (instructions_per_trip(v) for v in ("plain", "session", "unflushed"))
    if trip is None or session is None or unflushed is None:
        show("sqlite (disk) checkpoints per tool round trip, in instructions", "not measured (no valgrind)")
        return
    show("tool round trip, framework instructions, model in process", f"{trip:,.0f}")
    show("sqlite (disk) checkpoints per tool round trip vs its framework time, in instructions (%)",
         f"{100 * (session - unflushed) / trip:.1f}   ({session - unflushed:,.0f} instructions, both checkpoints)")  # fmt: skip
    show("sqlite (disk) a session's whole cost per tool round trip, in instructions (%)",
         f"{100 * (session - trip) / trip:.1f}   (checkpoints, the turn stored at its end, its bookkeeping)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Durable turns: checkpoint cost and resume time (see the module docstring)."
    )
    parser.add_argument("--count", nargs=3, metavar=("VARIANT", "CALLS", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.count:  # a child of report_instructions, under cachegrind
        count_turns(args.count[0], int(args.count[1]), args.count[2])
        return
    in_process = round_trip_in_process()
    http = round_trip_http()
    show("tool round trip, framework time, model in process (median, ms)", f"{in_process * 1e3:.3f}")
    show("tool round trip over loopback HTTP (ms)", f"{http * 1e3:.3f}")
    with tempfile.TemporaryDirectory(dir=ROOT) as disk:
        report("sqlite (disk)", f"sqlite:///{disk}/durable.db", in_process, http)
    report_instructions()
    if Path("/dev/shm").is_dir():
        with tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
            report("sqlite (tmpfs)", f"sqlite:///{shm}/durable.db", in_process, http)
    from tests.support.postgres import PostgresCluster, unavailable

    reason = unavailable()
    if reason:
        show("postgresql", f"skipped: {reason}")
        return
    with PostgresCluster(fsync=True).start() as cluster:
        report("postgresql", cluster.new_store_url(), in_process, http)


if __name__ == "__main__":
    main()

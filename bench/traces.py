"""What recording traces costs a tool round trip, beside the same turn not recorded, in CPU instructions.

    .venv/bin/python bench/traces.py

A FnCallAgent turn of N tool calls over ScriptedLLM (the model in process, so the figures are the framework's own)
runs in a child under cachegrind, three turns of 20 calls less three of 2 (so what a run costs once, its start and
the store's first write, cancels out), over the 54 round trips between: the framework's instructions per tool
round trip (a model reply with a call, the call, its result), then with the turn recorded (`traces=` a SQLite
store: the recorder's events and steps, and the writer thread's JSON and write, which cachegrind counts as well:
it counts every thread), and with a callback that takes the same events and does nothing (what an observed run
costs without the recorder's work). Goal: recording <= 5 % of the round trip's framework instructions. Then the
same in CPU time (best of 5 turns of 20 calls, beside the unrecorded turn), which a busy machine inflates.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from _measure import show  # noqa: E402

from chatagent import FnCallAgent, ScriptedLLM, tool_call  # noqa: E402
from chatagent.run import traces  # noqa: E402
from chatagent.run.events import Callbacks  # noqa: E402

CALLS = 20


def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


class Nothing(Callbacks):
    """Takes the events the recorder takes, and does nothing with them."""

    def on_run_start(self, event: Any) -> None: ...
    def on_run_end(self, event: Any) -> None: ...
    def on_llm_end(self, event: Any) -> None: ...
    def on_tool_end(self, event: Any) -> None: ...


def bot(variant: str, calls: int, directory: str) -> FnCallAgent:
    script: list[Any] = [tool_call("lookup", {"key": f"k{i}"}) for i in range(calls)] + ["All looked up."]
    options: dict[str, Any] = {}
    if variant == "recorded":
        options["traces"] = f"sqlite:///{directory}/traces.db"
    elif variant == "events":
        options["callbacks"] = [Nothing()]
    return FnCallAgent(function_list=[lookup], llm=ScriptedLLM(script), max_llm_calls=calls + 1, **options)


def count_turns(variant: str, calls: int, directory: str) -> None:
    """What `--count` does in a child under cachegrind: a warm-up turn, then three turns of `calls` tool calls."""
    import gc

    bot(variant, calls, directory).run_nonstream([{"role": "user", "content": "Look them up."}])
    traces.flush_traces(60)
    gc.collect()
    gc.freeze()
    for _ in range(3):
        bot(variant, calls, directory).run_nonstream([{"role": "user", "content": "Look them up."}])
    traces.flush_traces(60)


def instructions_per_trip(variant: str) -> float | None:
    """CPU instructions of one tool round trip of `variant` (three turns of 20 calls less three of 2, over the 54
    round trips between); None without valgrind."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    counts = []
    for calls in (2, CALLS):
        with tempfile.TemporaryDirectory(dir=ROOT) as disk:
            cmd = [valgrind, "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null", sys.executable,
                   __file__, "--count", variant, str(calls), disk]  # fmt: skip
            env = {**os.environ, "PYTHONHASHSEED": "0", "CHATAGENT_WORKSPACE": disk}
            env.pop("CHATAGENT_TRACES", None)
            out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=900, env=env)
        found = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
        if found is None:
            raise RuntimeError(f"no instruction count from cachegrind: {out.stderr[-500:]}")
        counts.append(int(found.group(1).replace(",", "")))
    return (counts[1] - counts[0]) / (3 * (CALLS - 2))


def cpu_per_trip(variant: str, directory: str, repeats: int = 5) -> float:
    """Seconds of this process's CPU per tool round trip, the best of `repeats` turns of CALLS calls."""
    best = float("inf")
    for _ in range(repeats):
        agent = bot(variant, CALLS, directory)
        start = time.process_time()
        agent.run_nonstream([{"role": "user", "content": "Look them up."}])
        traces.flush_traces(60)
        best = min(best, time.process_time() - start)
    return best / CALLS


def main() -> None:
    parser = argparse.ArgumentParser(description="What recording traces costs a tool round trip (see the docstring).")
    parser.add_argument("--count", nargs=3, metavar=("VARIANT", "CALLS", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.count:  # a child of instructions_per_trip, under cachegrind
        count_turns(args.count[0], int(args.count[1]), args.count[2])
        return
    with tempfile.TemporaryDirectory() as disk:
        os.environ["CHATAGENT_WORKSPACE"] = disk
        cpu = {v: cpu_per_trip(v, disk) for v in ("plain", "recorded", "plain", "recorded")}
    show("tool round trip, framework CPU time, model in process (us)", f"{cpu['plain'] * 1e6:.1f}")
    show("recorded, CPU time per round trip (us)",
         f"{cpu['recorded'] * 1e6:.1f}   ({100 * (cpu['recorded'] - cpu['plain']) / cpu['plain']:+.1f} %)")  # fmt: skip
    trip, recorded, events = (instructions_per_trip(v) for v in ("plain", "recorded", "events"))
    if trip is None or recorded is None or events is None:
        show("recording per tool round trip, in instructions", "not measured (valgrind is not installed)")
        return
    show("tool round trip, framework instructions, model in process", f"{trip:,.0f}")
    show("recording per tool round trip vs its framework instructions (%)",
         f"{100 * (recorded - trip) / trip:.1f}   ({recorded - trip:,.0f} instructions; goal <= 5 %)")  # fmt: skip
    show("  of which an observed run's events (a callback doing nothing) (%)",
         f"{100 * (events - trip) / trip:.1f}   ({events - trip:,.0f} instructions)")  # fmt: skip


if __name__ == "__main__":
    main()

"""One framework's side of bench/teams.py, run in its own venv with its adapter, bench/_teams_<name>.py; prints one
JSON line: CPU and wall seconds per task of a 3-task sequential crew, per step of a 10-method flow persisted on
SQLite, and per agent-as-tool round trip (the caller's model asks for the sub-agent, it answers, the caller
answers), each the best of `--repeats` rounds of `--runs` runs after a warm-up run; and the process's peak RSS.

    python _teams_run.py NAME --url URL [--runs 10] [--repeats 5]

An adapter defines `crew(url)`, `flow(db_path)` and `subagent(url)`, each returning a function that does one run.
The loopback server (bench/_loopback.py) answers `stream-16` with a short text and `delegate` with a call of the
first tool offered, then a final text.
"""

from __future__ import annotations

import argparse
import importlib
import json
import resource
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import qa_common

qa_common.guard()


def per_unit(fn: Callable[[], Any], runs: int, repeats: int, units: int) -> tuple[float, float]:
    """(CPU, wall) seconds per unit of work: the best of `repeats` rounds of `runs` calls, each doing `units`."""
    fn()  # warm-up: first-call imports and caches are not the steady cost
    cpus, walls = [], []
    for _ in range(repeats):
        c, w = time.process_time(), time.perf_counter()
        for _ in range(runs):
            fn()
        cpus.append((time.process_time() - c) / runs / units)
        walls.append((time.perf_counter() - w) / runs / units)
    return min(cpus), min(walls)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("--url", required=True)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    adapter = importlib.import_module(f"_teams_{args.name}")
    out: dict[str, Any] = {"version": adapter.version()}
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "flows.db")
        for key, fn, units in (
            ("task", adapter.crew(args.url), 3),
            ("flow_step", adapter.flow(db), 10),
            ("subagent_call", adapter.subagent(args.url), 1),
        ):
            out[f"{key}_cpu_s"], out[f"{key}_wall_s"] = per_unit(fn, args.runs, args.repeats, units)
    made, expected = len(adapter.SUBAGENT_CALLS), 1 + args.runs * args.repeats
    if made != expected:
        raise SystemExit(f"{args.name}: {made} sub-agent calls were made in {expected} runs: the figure is not valid")
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    print(json.dumps(out))


if __name__ == "__main__":
    main()

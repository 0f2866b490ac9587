"""A fresh process's first run: start, import, make a minimal agent, stream its first 8-chunk answer.

    .venv/bin/python bench/first_run.py [--quick] [--peers smolagents,...]

Each framework runs bench/_peer_run.py `first` (its adapter, bench/_peer_<name>.py) in a new process against the
loopback server (bench/_loopback.py, a process of its own): the CPU time of that whole process, best of a few,
and its CPU instructions (cachegrind, which load does not change). Beside chatagent: the bare relay (httpx and
json, the floor), the openai SDK alone (bench/_peer_openai_sdk.py) and the peers (bench/_peers.py, each in its
offline venv). Target (issue 43): <= 0.6 s of CPU on a quiet machine, where the bare relay takes about 0.18 s;
the instructions' ratio to the bare relay's says the same on any machine (<= 3.3x).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from _measure import show  # noqa: E402
from _peers import PEERS  # noqa: E402
from _venv import ReferenceUnavailable, instructions, run_script  # noqa: E402
from peers import Loopback  # noqa: E402

OURS_VENV = ("bare", "openai_sdk", "chatagent")  # run by this venv's interpreter
CHUNKS = 8


def python_of(name: str) -> tuple[Path | str, dict[str, str] | None]:
    if name in OURS_VENV:
        return sys.executable, None
    return PEERS[name].ensure(), PEERS[name].env


def first_run(name: str, url: str, repeats: int) -> tuple[float, int, str]:
    """(best CPU seconds, instructions, version) of `name`'s first run in a fresh process."""
    python, env = python_of(name)
    args = [name, "first", "--url", url, "--chunks", str(CHUNKS)]
    results = [run_script(python, "_peer_run.py", *args, env=env) for _ in range(repeats)]
    if "missing" in results[0]:
        raise ReferenceUnavailable(results[0]["missing"])
    count = instructions(python, "_peer_run.py", *args, env=env)
    return min(r["cpu_s"] for r in results), count, results[0].get("version") or name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repeats, no peers")
    parser.add_argument("--peers", default=",".join(PEERS), help="which peers (default: all; '' for none)")
    args = parser.parse_args()
    peers = [] if args.quick else [p for p in args.peers.split(",") if p]
    repeats = 2 if args.quick else 5
    loopback = Loopback()
    try:
        figures: dict[str, tuple[float, int, str]] = {}
        for name in ("bare", "chatagent", "openai_sdk", *peers):
            try:
                figures[name] = first_run(name, loopback.url, repeats)
            except ReferenceUnavailable as exc:
                show(f"first_run[{name}]", f"missing: {str(exc).strip().splitlines()[-1][:300]}")
    finally:
        loopback.close()
    bare = figures.get("bare")
    for name, (cpu, count, version) in figures.items():
        line = f"{cpu:.3f} s cpu, {count / 1e6:.0f} M instructions ({version})"
        if bare is not None and name != "bare":
            line += f"; bare relay {bare[0]:.3f} s, {bare[1] / 1e6:.0f} M: ratio {cpu / bare[0]:.2f}x cpu, "
            line += f"{count / bare[1]:.2f}x instructions"
        if name == "chatagent":
            line += "  (target <= 0.6 s on a quiet machine, ~3.3x the bare relay)"
        show(f"first_run[{name}]", line)


if __name__ == "__main__":
    main()

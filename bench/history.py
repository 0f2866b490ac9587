"""Checkpoint history: what keeping and listing it costs, in CPU instructions (cachegrind, which a busy machine does
not change), on SQLite.

Flows: a flow whose router runs N steps, with its history kept (`history_limit` 100: each step's record also kept as
a checkpoint, pruned to the newest 100) beside the same flow keeping none (`history_limit = 0`): the instructions
per checkpoint written beside the instructions of a step without history. Listing: `flow.history()` of a flow
with 20 checkpoints, per checkpoint listed.

Turns: a FnCallAgent turn of 20 tool calls on a session (the model: ScriptedLLM, in process) writes its checkpoints
as it always does (the history is those steps, with one time per message); `session.history()` of it, per
checkpoint listed, beside the instructions of one tool round trip of that turn.

Each figure is the difference of two children under cachegrind (20 steps less 2, or 10 listings less none), so the
interpreter's start and the imports cancel out. Without valgrind it says so.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from _measure import show  # noqa: E402

from chatagent import FnCallAgent, ScriptedLLM, Session, tool_call  # noqa: E402
from chatagent.flows.conditions import or_, router, start  # noqa: E402
from chatagent.flows.flow import Flow  # noqa: E402
from chatagent.flows.state import FlowState  # noqa: E402

STEPS = 20
LISTINGS = 10
RUNS = 3


class Loop(FlowState):
    n: int = 0
    goal: int = 2
    note: str = "x" * 200  # a state of some size: each checkpoint holds it


class Looping(Flow[Loop]):
    """A router that runs `goal` times (each run a step: a checkpoint)."""

    @start()
    def begin(self) -> None:
        self.state.n = 0

    @router(or_(begin, "again"))
    def step(self) -> str:
        self.state.n += 1
        return "again" if self.state.n < self.state.goal else "done"


class Bare(Looping):
    history_limit = 0


def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def child(kind: str, n: int, listings: int, directory: str) -> None:
    """What `--count` runs under cachegrind: RUNS flows of `n` router steps (`kind` 'kept' or 'bare'), or RUNS turns
    of `n` calls ('turn'); then `listings` listings of the last one's history."""
    url = f"sqlite:///{directory}/history.db"
    last: Any = None
    for r in range(RUNS):
        if kind == "turn":
            calls: list[Any] = [tool_call("lookup", {"key": f"k{i}"}) for i in range(n)]
            bot = FnCallAgent(function_list=[lookup], llm=ScriptedLLM([*calls, "Done."]), max_llm_calls=n + 1)
            last = Session(f"turn-{n}-{r}", url)
            bot.run_nonstream([{"role": "user", "content": "Look them up."}], session=last)
        else:
            last = (Looping if kind == "kept" else Bare)(store=url)
            last.kickoff({"goal": n})
    for _ in range(listings):
        assert last.history()


def instructions(kind: str, n: int, listings: int) -> int:
    valgrind = shutil.which("valgrind")
    assert valgrind is not None
    with tempfile.TemporaryDirectory(dir=ROOT) as disk:
        cmd = [valgrind, "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null", sys.executable,
               __file__, "--count", kind, str(n), str(listings), disk]  # fmt: skip
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=1800, env=env)
    found = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count from cachegrind: {out.stderr[-500:]}")
    return int(found.group(1).replace(",", ""))


def per_step(kind: str) -> float:
    """Instructions per step (a flow's router step; a turn's tool round trip) of RUNS runs."""
    return (instructions(kind, STEPS, 0) - instructions(kind, 2, 0)) / (RUNS * (STEPS - 2))


def per_listed(kind: str, checkpoints: int) -> float:
    """Instructions per checkpoint listed by one history() of the last run (of STEPS steps)."""
    return (instructions(kind, STEPS, LISTINGS) - instructions(kind, STEPS, 0)) / (LISTINGS * checkpoints)


def main() -> None:
    parser = argparse.ArgumentParser(description="Checkpoint history: its cost (see the module docstring).")
    parser.add_argument("--count", nargs=4, metavar=("KIND", "N", "LISTINGS", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.count:
        child(args.count[0], int(args.count[1]), int(args.count[2]), args.count[3])
        return
    if shutil.which("valgrind") is None:
        show("history instructions", "not measured (valgrind is not installed)")
        return
    kept, bare = per_step("kept"), per_step("bare")
    show("flow step without history (instructions, the reference)", f"{bare:,.0f}")
    show("flow step with its checkpoint kept (instructions)", f"{kept:,.0f}")
    show("flow checkpoint written, per step (instructions; % of a step without history)",
         f"{kept - bare:,.0f}   ({100 * (kept - bare) / bare:.1f} %)")  # fmt: skip
    show("flow history listed, per checkpoint (instructions)", f"{per_listed('kept', STEPS + 2):,.0f}")
    trip = per_step("turn")
    show("turn's tool round trip on a session (instructions, the reference)", f"{trip:,.0f}")
    listed = per_listed("turn", 2 * STEPS + 2)  # its input, then a model and a tools step per call, the answer
    show("turn history listed, per checkpoint (instructions; % of a round trip)", f"{listed:,.0f}   "
         f"({100 * listed / trip:.1f} %)")  # fmt: skip


if __name__ == "__main__":
    main()

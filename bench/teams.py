"""Teams and flows beside CrewAI and LangGraph: framework cost per crew task, per flow step, per sub-agent call.

    .venv/bin/python bench/teams.py

Each framework runs bench/_teams_run.py in its own process (the peers in their own offline venvs: CrewAI's from
bench/_peers.py, LangGraph with its SQLite checkpointer in one made here) against one loopback OpenAI-compatible
server in a process of its own (bench/_loopback.py: instant short answers), so that the CPU time measured is the
framework's (and its HTTP client's), not the model's or the server's:

- task: a 3-task sequential crew, each task one model call (LangGraph: a 3-node StateGraph calling the model);
- flow_step: a 10-method flow, each method started by the previous one, its state persisted on SQLite after
  every method (CrewAI: @persist(SQLiteFlowPersistence); LangGraph: a 10-node StateGraph with SqliteSaver);
- subagent_call: an agent whose model calls another agent as a tool, which answers, then answers itself.

CrewAI's adapter also runs on chatagent with its imports renamed (bench/_teams_chatagent_crewai.py): the
`teams_crewai_program_*` lines put what CrewAI's own program costs on chatagent.crewai beside CrewAI.

Also the peak RSS of each framework's process, and `import chatagent` in a fresh interpreter (it stays lazy). Lower is better; every ratio is chatagent/peer.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from _measure import show  # noqa: E402
from _peers import LANGCHAIN, LANGCHAIN_CORE, LANGCHAIN_OPENAI, LANGGRAPH, PEERS  # noqa: E402
from _venv import ReferenceUnavailable, ReferenceVenv, run_script  # noqa: E402
from peers import Loopback  # noqa: E402

LANGGRAPH_SQLITE = "3.1.2"
LANGGRAPH_VENV = ReferenceVenv(
    "langgraph-teams",
    f"LangGraph {LANGGRAPH} with langgraph-checkpoint-sqlite {LANGGRAPH_SQLITE}",
    [
        f"langchain=={LANGCHAIN}",
        f"langchain-core=={LANGCHAIN_CORE}",
        f"langchain-openai=={LANGCHAIN_OPENAI}",
        f"langgraph=={LANGGRAPH}",
        f"langgraph-checkpoint-sqlite=={LANGGRAPH_SQLITE}",
    ],
    "from langgraph.checkpoint.sqlite import SqliteSaver; from langchain.agents import create_agent",
)
FIGURES = [("task", "per crew task"), ("flow_step", "per flow step (SQLite)"), ("subagent_call", "per sub-agent call")]


def measure(name: str, url: str) -> dict | str:
    args = ("_teams_run.py", name, "--url", url)
    try:
        if name in ("chatagent", "chatagent_crewai"):
            return run_script(sys.executable, *args, timeout=1200)
        venv = PEERS["crewai"] if name == "crewai" else LANGGRAPH_VENV
        return venv.run(*args, timeout=1800)
    except (ReferenceUnavailable, subprocess.TimeoutExpired, OSError, ValueError) as exc:
        lines = str(exc).strip().splitlines()
        return f"missing: {lines[-1] if lines else type(exc).__name__}"[:600]


def import_time(repeats: int = 5) -> float:
    code = "import time; t = time.perf_counter(); import chatagent; print(time.perf_counter() - t)"
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True) for _ in
            range(repeats)]  # fmt: skip
    return min(float(r.stdout.strip()) for r in runs)


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    show("teams_import_chatagent_ms", f"{import_time() * 1000:.1f}")
    loopback = Loopback()
    try:
        names = ("chatagent", "chatagent_crewai", "crewai", "langgraph")
        results = {name: measure(name, loopback.url) for name in names}
    finally:
        loopback.close()
    ours = results["chatagent"]
    for name, result in results.items():
        if isinstance(result, str):
            show(f"teams_{name}", result)
        else:
            show(f"teams_{name}_version", result["version"])
    if isinstance(ours, str):
        raise SystemExit(f"chatagent's side failed: {ours}")
    for key, what in FIGURES:
        for clock in ("cpu", "wall"):
            figure = f"{key}_{clock}_s"
            line = [f"chatagent {ours[figure] * 1e6:.0f}"]
            for peer in ("crewai", "langgraph"):
                theirs = results[peer]
                if isinstance(theirs, dict):
                    line.append(
                        f"{peer} {theirs[figure] * 1e6:.0f} (chatagent/{peer} {ours[figure] / theirs[figure]:.2f}x)"
                    )
            show(f"teams_{key}_{clock}_us ({what})", ", ".join(line))
    face, crewai = results["chatagent_crewai"], results["crewai"]
    if isinstance(face, dict):  # CrewAI's own program, imports renamed, on chatagent: beside CrewAI running it
        for key, what in FIGURES:
            figure = f"{key}_cpu_s"
            line = [f"chatagent.crewai {face[figure] * 1e6:.0f}"]
            if isinstance(crewai, dict):
                line.append(
                    f"crewai {crewai[figure] * 1e6:.0f} (crewai/chatagent.crewai {crewai[figure] / face[figure]:.1f}x)"
                )
            show(f"teams_crewai_program_{key}_cpu_us ({what}, CrewAI's code)", ", ".join(line))
    line = [f"chatagent {ours['peak_rss_mb']:.0f}"]
    line += [f"{peer} {results[peer]['peak_rss_mb']:.0f}" for peer in ("crewai", "langgraph") if isinstance(
        results[peer], dict)]  # fmt: skip
    show("teams_peak_rss_mb (the process, after the three workloads)", ", ".join(line))


if __name__ == "__main__":
    started = time.perf_counter()
    main()
    show("teams_bench_total_s", f"{time.perf_counter() - started:.0f}")

"""chatagent's side of bench/teams.py (see bench/_teams_run.py)."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from chatagent import Crew, Flow, FnCallAgent, Task, __version__, listen, start

SUBAGENT_CALLS: list[str] = []  # the sub-agent calls made, to check that a run really made one


def version() -> str:
    return f"chatagent {__version__}"


def _cfg(url: str, model: str) -> dict[str, Any]:
    return {"model": model, "model_server": url, "api_key": "bench", "generate_cfg": {"max_retries": 0}}


def crew(url: str) -> Callable[[], Any]:
    agents = [FnCallAgent(llm=_cfg(url, "stream-16"), name=f"agent{i}") for i in range(3)]
    team = Crew(agents=agents, tasks=[Task(f"Step {i} of the work", "a short text", agent=agents[i]) for i in range(3)])
    return lambda: team.kickoff().raw


def flow(db_path: str) -> Callable[[], Any]:
    def body(ns: dict[str, Any]) -> None:
        ns["store"] = db_path
        ns["m0"] = start()(lambda self: 0)
        for i in range(1, 10):
            ns[f"m{i}"] = listen(f"m{i - 1}")(lambda self, x: x + 1)

    ten = types.new_class("Ten", (Flow,), exec_body=body)
    return lambda: ten().kickoff()


def subagent(url: str) -> Callable[[], Any]:
    researcher = FnCallAgent(llm=_cfg(url, "stream-16"), name="researcher", description="Finds facts.")
    boss = FnCallAgent(llm=_cfg(url, "delegate"), name="boss", function_list=[researcher])

    def run() -> Any:
        response = boss.run_nonstream([{"role": "user", "content": "Ask the researcher."}])
        SUBAGENT_CALLS.extend(m["content"] for m in response if m["role"] == "function")
        return response

    return run

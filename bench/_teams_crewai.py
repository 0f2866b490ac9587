"""CrewAI's side of bench/teams.py (see bench/_teams_run.py): a Crew of 3 tasks (made per run: it holds the run's
state), a Flow of 10 methods under @persist(SQLiteFlowPersistence), an Agent whose tool kicks off another Agent."""

from __future__ import annotations

import types
from collections.abc import Callable
from importlib import metadata
from typing import Any

from crewai import LLM, Agent, Crew, Task
from crewai.flow.flow import Flow, listen, start
from crewai.flow.persistence import SQLiteFlowPersistence, persist
from crewai.tools import BaseTool

SUBAGENT_CALLS: list[str] = []  # the sub-agent calls made, to check that a run really made one


def version() -> str:
    return f"crewai {metadata.version('crewai')}"


def _llm(url: str, model: str) -> LLM:
    return LLM(model=f"openai/{model}", base_url=url, api_key="bench", max_retries=0)


def crew(url: str) -> Callable[[], Any]:
    llm = _llm(url, "stream-16")

    def run() -> Any:
        agents = [Agent(role=f"agent{i}", goal="answer", backstory="helpful", llm=llm, verbose=False) for i in range(3)]
        tasks = [Task(description=f"Step {i} of the work", expected_output="a short text", agent=agents[i])
                 for i in range(3)]  # fmt: skip
        return Crew(agents=agents, tasks=tasks, verbose=False).kickoff().raw

    return run


def flow(db_path: str) -> Callable[[], Any]:
    def body(ns: dict[str, Any]) -> None:
        ns["m0"] = start()(lambda self: 0)
        for i in range(1, 10):
            ns[f"m{i}"] = listen(f"m{i - 1}")(lambda self, x: x + 1)

    ten = persist(SQLiteFlowPersistence(db_path=db_path))(types.new_class("Ten", (Flow,), exec_body=body))
    return lambda: ten().kickoff()


def subagent(url: str) -> Callable[[], Any]:
    researcher = Agent(role="researcher", goal="find facts", backstory="careful", llm=_llm(url, "stream-16"),
                       verbose=False)  # fmt: skip

    class AskResearcher(BaseTool):
        name: str = "researcher"
        description: str = "Ask the researcher to do a task."

        def _run(self, task: str) -> str:
            SUBAGENT_CALLS.append(task)
            return str(researcher.kickoff(task).raw)

    boss = Agent(role="boss", goal="answer", backstory="delegates", llm=_llm(url, "delegate"),
                 tools=[AskResearcher()], verbose=False)  # fmt: skip
    return lambda: boss.kickoff("Ask the researcher.")

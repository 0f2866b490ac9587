"""CrewAI's side of bench/peers.py (see bench/_peer_run.py): one Agent, one Task, a Crew over LLM("openai/...")
with a base_url; streaming with `Crew(stream=True)` (`kickoff()` sync, `akickoff()` native async); telemetry off
(bench/_peers.py sets its environment). A Crew is made per run: it holds the run's state."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import metadata

from crewai import LLM, Agent, Crew, Task
from crewai.tools import tool

IMPORT = "from crewai import Agent, Crew, Task, LLM"
QUESTION = "Tell me a long story."


def version() -> str:
    return f"crewai {metadata.version('crewai')}"


def _crew(url: str, model: str, tools: list | None = None, stream: bool = False, question: str = QUESTION) -> Crew:
    llm = LLM(model=f"openai/{model}", base_url=url, api_key="bench", stream=stream, max_retries=0)
    agent = Agent(role="assistant", goal="answer", backstory="helpful", llm=llm, tools=tools or [], verbose=False)
    task = Task(description=question, expected_output="the answer", agent=agent)
    return Crew(agents=[agent], tasks=[task], stream=stream, verbose=False)


def stream(url: str, model: str) -> Callable[[], str]:
    def run() -> str:
        return "".join(chunk.content for chunk in _crew(url, model, stream=True).kickoff() if chunk.content)

    return run


def astream(url: str, model: str) -> Callable[[], AsyncIterator[str]]:
    async def run() -> AsyncIterator[str]:
        async for chunk in await _crew(url, model, stream=True).akickoff():
            if chunk.content:
                yield chunk.content

    return run


def tool_loop(url: str, tools: list[Callable[..., str]]) -> Callable[[], str]:
    crew_tools = [tool(t.__name__)(t) for t in tools]

    def run() -> str:
        return _crew(url, "tools", crew_tools, question="Please look these up for me.").kickoff().raw

    return run


def atool_loop(url: str, tools: list[Callable[..., str]]) -> Callable[[], Awaitable[str]]:
    crew_tools = [tool(t.__name__)(t) for t in tools]

    async def run() -> str:
        return (await _crew(url, "tools", crew_tools, question="Please look these up for me.").akickoff()).raw

    return run

"""smolagents' side of bench/peers.py (see bench/_peer_run.py): ToolCallingAgent over OpenAIServerModel, logs off.
A run ends with its `final_answer` tool, which the loopback server calls after the text. smolagents has no async
API, so it has no async figures."""

from __future__ import annotations

from collections.abc import Callable
from importlib import metadata

from smolagents import LogLevel, OpenAIServerModel, ToolCallingAgent, tool
from smolagents.models import ChatMessageStreamDelta

IMPORT = "from smolagents import ToolCallingAgent, OpenAIServerModel"
QUESTION = "Tell me a long story."


def version() -> str:
    return f"smolagents {metadata.version('smolagents')}"


def _agent(url: str, model: str, tools: list | None = None, stream: bool = False) -> ToolCallingAgent:
    llm = OpenAIServerModel(model_id=model, api_base=url, api_key="bench", client_kwargs={"max_retries": 0})
    return ToolCallingAgent(
        tools=[tool(t) for t in tools or []], model=llm, stream_outputs=stream, verbosity_level=LogLevel.OFF
    )


def stream(url: str, model: str) -> Callable[[], str]:
    agent = _agent(url, model, stream=True)

    def run() -> str:
        return "".join(
            event.content
            for event in agent.run(QUESTION, stream=True)
            if isinstance(event, ChatMessageStreamDelta) and event.content
        )

    return run


def tool_loop(url: str, tools: list[Callable[..., str]]) -> Callable[[], str]:
    agent = _agent(url, "tools", tools)

    def run() -> str:
        return str(agent.run("Please look these up for me."))

    return run

"""The OpenAI Agents SDK's side of bench/peers.py (see bench/_peer_run.py): Agent over OpenAIChatCompletionsModel
(the loopback server speaks Chat Completions), tracing off (it would export to api.openai.com). It streams only
asynchronously (`Runner.run_streamed`); the tool loop runs with `Runner.run_sync`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import metadata

from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI
from openai.types.responses import ResponseTextDeltaEvent

IMPORT = "from agents import Agent, Runner, OpenAIChatCompletionsModel; from openai import AsyncOpenAI"
QUESTION = "Tell me a long story."

set_tracing_disabled(True)


def version() -> str:
    return f"openai-agents {metadata.version('openai-agents')}"


def _agent(url: str, model: str, tools: list | None = None) -> Agent:
    client = AsyncOpenAI(base_url=url, api_key="bench", max_retries=0)
    chat = OpenAIChatCompletionsModel(model=model, openai_client=client)
    return Agent(name="bench", instructions="", model=chat, tools=[function_tool(t) for t in tools or []])


def astream(url: str, model: str) -> Callable[[], AsyncIterator[str]]:
    agent = _agent(url, model)

    async def run() -> AsyncIterator[str]:
        result = Runner.run_streamed(agent, QUESTION)
        async for event in result.stream_events():
            if event.type == "raw_response_event" and isinstance(event.data, ResponseTextDeltaEvent):
                yield event.data.delta

    return run


def tool_loop(url: str, tools: list[Callable[..., str]]) -> Callable[[], str]:
    agent = _agent(url, "tools", tools)

    def run() -> str:
        return Runner.run_sync(agent, "Please look these up for me.").final_output

    return run


def atool_loop(url: str, tools: list[Callable[..., str]]) -> Callable[[], Awaitable[str]]:
    agent = _agent(url, "tools", tools)

    async def run() -> str:
        return (await Runner.run(agent, "Please look these up for me.")).final_output

    return run

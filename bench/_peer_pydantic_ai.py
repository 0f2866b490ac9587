"""pydantic-ai's side of bench/peers.py (see bench/_peer_run.py): Agent over OpenAIChatModel, run_stream_sync,
run_stream, run_sync. Text is read with `stream_text(delta=True, debounce_by=None)`: every chunk, none grouped."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import metadata

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

IMPORT = "from pydantic_ai import Agent; from pydantic_ai.models.openai import OpenAIChatModel"
QUESTION = "Tell me a long story."


def version() -> str:
    return f"pydantic-ai {metadata.version('pydantic-ai-slim')}"


def _agent(url: str, model: str, tools: list | None = None) -> Agent:
    return Agent(OpenAIChatModel(model, provider=OpenAIProvider(base_url=url, api_key="bench")), tools=tools or [])


def stream(url: str, model: str) -> Callable[[], str]:
    agent = _agent(url, model)

    def run() -> str:
        return "".join(agent.run_stream_sync(QUESTION).stream_text(delta=True, debounce_by=None))

    return run


def astream(url: str, model: str) -> Callable[[], AsyncIterator[str]]:
    agent = _agent(url, model)

    async def run() -> AsyncIterator[str]:
        async with agent.run_stream(QUESTION) as result:
            async for text in result.stream_text(delta=True, debounce_by=None):
                yield text

    return run


def tool_loop(url: str, tools: list[Callable[..., str]]) -> Callable[[], str]:
    agent = _agent(url, "tools", tools)

    def run() -> str:
        return agent.run_sync("Please look these up for me.").output

    return run


def atool_loop(url: str, tools: list[Callable[..., str]]) -> Callable[[], Awaitable[str]]:
    agent = _agent(url, "tools", tools)

    async def run() -> str:
        return (await agent.run("Please look these up for me.")).output

    return run

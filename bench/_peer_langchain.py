"""LangChain's side of bench/peers.py (see bench/_peer_run.py): `langchain.agents.create_agent` (a LangGraph graph)
over ChatOpenAI, streamed with stream_mode="messages" (`stream` / `astream`), `invoke` for the tool loop."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import metadata
from typing import Any

from langchain.agents import create_agent
from langchain_openai import ChatOpenAI

IMPORT = "from langchain.agents import create_agent; from langchain_openai import ChatOpenAI"
QUESTION = {"messages": [{"role": "user", "content": "Tell me a long story."}]}


def version() -> str:
    names = ("langchain", "langchain-core", "langchain-openai", "langgraph")
    return ", ".join(f"{n} {metadata.version(n)}" for n in names)


def _agent(url: str, model: str, tools: list | None = None) -> Any:
    llm = ChatOpenAI(model=model, base_url=url, api_key="bench", streaming=True, max_retries=0)
    return create_agent(llm, tools=tools or [])


def stream(url: str, model: str) -> Callable[[], str]:
    agent = _agent(url, model)

    def run() -> str:
        return "".join(chunk.content for chunk, _ in agent.stream(QUESTION, stream_mode="messages") if chunk.content)

    return run


def astream(url: str, model: str) -> Callable[[], AsyncIterator[str]]:
    agent = _agent(url, model)

    async def run() -> AsyncIterator[str]:
        async for chunk, _ in agent.astream(QUESTION, stream_mode="messages"):
            if chunk.content:
                yield chunk.content

    return run


def tool_loop(url: str, tools: list[Callable[..., str]]) -> Callable[[], str]:
    agent = _agent(url, "tools", tools)
    question = {"messages": [{"role": "user", "content": "Please look these up for me."}]}

    def run() -> str:
        return agent.invoke(question)["messages"][-1].content

    return run


def atool_loop(url: str, tools: list[Callable[..., str]]) -> Callable[[], Awaitable[str]]:
    agent = _agent(url, "tools", tools)
    question = {"messages": [{"role": "user", "content": "Please look these up for me."}]}

    async def run() -> str:
        return (await agent.ainvoke(question))["messages"][-1].content

    return run

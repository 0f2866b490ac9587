"""LangGraph's side of bench/teams.py (see bench/_teams_run.py): a StateGraph of 3 model-calling nodes, a StateGraph
of 10 nodes checkpointed by SqliteSaver, a create_agent whose tool invokes another create_agent."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable
from importlib import metadata
from typing import Any, TypedDict

from langchain.agents import create_agent
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

SUBAGENT_CALLS: list[str] = []  # the sub-agent calls made, to check that a run really made one


def version() -> str:
    return f"langgraph {metadata.version('langgraph')} (langchain {metadata.version('langchain')})"


def _llm(url: str, model: str) -> ChatOpenAI:
    return ChatOpenAI(model=model, base_url=url, api_key="bench", max_retries=0)


class Text(TypedDict):
    text: str


class Count(TypedDict):
    n: int


def crew(url: str) -> Callable[[], Any]:
    llm = _llm(url, "stream-16")
    graph = StateGraph(Text)
    for i in range(3):
        graph.add_node(f"task{i}", lambda s, i=i: {"text": llm.invoke(f"Step {i} of the work\n{s['text']}").content})
    graph.add_edge(START, "task0")
    graph.add_edge("task0", "task1")
    graph.add_edge("task1", "task2")
    graph.add_edge("task2", END)
    app = graph.compile()
    return lambda: app.invoke({"text": ""})


def flow(db_path: str) -> Callable[[], Any]:
    saver = SqliteSaver(sqlite3.connect(db_path, check_same_thread=False))
    graph = StateGraph(Count)
    for i in range(10):
        graph.add_node(f"m{i}", lambda s: {"n": s["n"] + 1})
    graph.add_edge(START, "m0")
    for i in range(1, 10):
        graph.add_edge(f"m{i - 1}", f"m{i}")
    graph.add_edge("m9", END)
    app = graph.compile(checkpointer=saver)
    return lambda: app.invoke({"n": 0}, {"configurable": {"thread_id": uuid.uuid4().hex}})


def subagent(url: str) -> Callable[[], Any]:
    researcher = create_agent(_llm(url, "stream-16"), tools=[])

    @tool
    def ask_researcher(task: str) -> str:
        """Ask the researcher to do a task."""
        SUBAGENT_CALLS.append(task)
        return researcher.invoke({"messages": [("user", task)]})["messages"][-1].content

    boss = create_agent(_llm(url, "delegate"), tools=[ask_researcher])
    return lambda: boss.invoke({"messages": [("user", "Ask the researcher.")]})

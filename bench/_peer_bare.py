"""The bare relay, the floor of every figure: httpx and json, no framework (see bench/_peer_run.py)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import metadata

import httpx

IMPORT = "import httpx, json"
QUESTION = [{"role": "user", "content": "Tell me a long story."}]


def version() -> str:
    return f"httpx {metadata.version('httpx')}"


def _text(line: str) -> str:
    if not line.startswith("data: ") or line == "data: [DONE]":
        return ""
    choices = json.loads(line[6:])["choices"]
    return (choices[0]["delta"].get("content") or "") if choices else ""


def stream(url: str, model: str) -> Callable[[], str]:
    client = httpx.Client(timeout=60)
    body = {"model": model, "messages": QUESTION, "stream": True}

    def run() -> str:
        with client.stream("POST", url + "/chat/completions", json=body) as r:
            return "".join(_text(line) for line in r.iter_lines())

    return run


def astream(url: str, model: str, client: httpx.AsyncClient | None = None) -> Callable[[], AsyncIterator[str]]:
    client = client or httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=1000))
    body = {"model": model, "messages": QUESTION, "stream": True}

    async def run() -> AsyncIterator[str]:
        async with client.stream("POST", url + "/chat/completions", json=body) as r:
            async for line in r.aiter_lines():
                text = _text(line)
                if text:
                    yield text

    return run


def _schemas(names: list[str]) -> list[dict]:
    props = {"query": {"type": "string"}, "limit": {"type": "integer"}, "exact": {"type": "boolean"}}
    parameters = {"type": "object", "properties": props, "required": ["query"]}
    return [
        {"type": "function", "function": {"name": n, "description": "Look something up.", "parameters": parameters}}
        for n in names
    ]


def _step(messages: list[dict], reply: dict, tools: dict[str, Callable[..., str]]) -> str | None:
    """After the model's reply: its answer, or None after running its calls and appending their results."""
    calls = reply.get("tool_calls") or []
    if not calls:
        return reply["content"]
    messages.append(reply)
    for call in calls:
        result = tools[call["function"]["name"]](**json.loads(call["function"]["arguments"]))
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    return None


def tool_loop(url: str, tools: list[Callable[..., str]], model: str = "tools") -> Callable[[], str]:
    """The same HTTP exchanges as an agent's: the 20 schemas sent each time, the calls run, results sent back."""
    client = httpx.Client(timeout=60)
    by_name = {t.__name__: t for t in tools}
    schemas = _schemas(list(by_name))

    def run() -> str:
        messages: list[dict] = [{"role": "user", "content": "Please look these up for me."}]
        while True:
            body = {"model": model, "messages": messages, "tools": schemas}
            answer = _step(
                messages, client.post(url + "/chat/completions", json=body).json()["choices"][0]["message"], by_name
            )
            if answer is not None:
                return answer

    return run


def atool_loop(url: str, tools: list[Callable[..., str]], model: str = "tools") -> Callable[[], Awaitable[str]]:
    client = httpx.AsyncClient(timeout=60)
    by_name = {t.__name__: t for t in tools}
    schemas = _schemas(list(by_name))

    async def run() -> str:
        messages: list[dict] = [{"role": "user", "content": "Please look these up for me."}]
        while True:
            body = {"model": model, "messages": messages, "tools": schemas}
            response = await client.post(url + "/chat/completions", json=body)
            answer = _step(messages, response.json()["choices"][0]["message"], by_name)
            if answer is not None:
                return answer

    return run

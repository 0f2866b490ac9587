"""The bare relay, the floor of every figure: httpx and json, no framework (see bench/_peer_run.py)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
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


def astream(url: str, model: str) -> Callable[[], AsyncIterator[str]]:
    client = httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=1000))
    body = {"model": model, "messages": QUESTION, "stream": True}

    async def run() -> AsyncIterator[str]:
        async with client.stream("POST", url + "/chat/completions", json=body) as r:
            async for line in r.aiter_lines():
                text = _text(line)
                if text:
                    yield text

    return run


def tool_loop(url: str, tools: list[Callable[..., str]]) -> Callable[[], str]:
    """The same HTTP exchanges as an agent's: the 20 schemas sent each time, the calls run, results sent back."""
    client = httpx.Client(timeout=60)
    by_name = {t.__name__: t for t in tools}
    props = {"query": {"type": "string"}, "limit": {"type": "integer"}, "exact": {"type": "boolean"}}
    schemas = [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": "Look something up.",
                "parameters": {"type": "object", "properties": props, "required": ["query"]},
            },
        }
        for name in by_name
    ]

    def run() -> str:
        messages: list[dict] = [{"role": "user", "content": "Please look these up for me."}]
        while True:
            body = {"model": "tools", "messages": messages, "tools": schemas}
            reply = client.post(url + "/chat/completions", json=body).json()["choices"][0]["message"]
            calls = reply.get("tool_calls") or []
            if not calls:
                return reply["content"]
            messages.append(reply)
            for call in calls:
                result = by_name[call["function"]["name"]](**json.loads(call["function"]["arguments"]))
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})

    return run

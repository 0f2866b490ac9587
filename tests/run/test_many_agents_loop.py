"""What 50 tool-using agents started at once cost the event loop (issue 43.20: a 10 ms heartbeat late < 50 ms).

Counted, never timed: the work an agent's build and its first model call repeat for tools another agent already
made of the same functions, and the connection pools' bookkeeping per request.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import httpx

from chatagent import FnCallAgent
from chatagent.llm import budget, http_pool
from chatagent.llm.http_pool import ShardedTransport
from chatagent.tools import from_function
from tests.support.openai_server import OpenAIServer, Reply

DEADLINE = 20


def lookup(query: str, limit: int = 5) -> str:
    """Look something up.

    Args:
        query: What to look for.
        limit: How many results.
    """
    return "ok"


def find(name: str) -> str:
    """Find someone by name."""
    return "found"


def test_agents_made_of_the_same_functions_work_out_their_tools_once(monkeypatch) -> None:
    """Each agent made its tools' schemas again: the functions' signatures, docstrings and type hints (string
    annotations compiled), then at its first model call the JSON of every schema, counted for the prompt's budget:
    50 FnCallAgents with 20 tools, built at once on an event loop, held it for a quarter of a second. A function's
    tool is worked out once, each tool still has its parameters of its own, and the counted JSON is found again
    for equal schemas."""
    hints: list[Any] = []
    real_hints = from_function.get_type_hints
    monkeypatch.setattr(from_function, "get_type_hints", lambda *a, **k: hints.append(a) or real_hints(*a, **k))
    llm = {"model": "m", "model_server": "http://127.0.0.1:9/v1", "api_key": "k"}
    first = FnCallAgent(llm=llm, function_list=[lookup, find])
    worked_out = len(hints)
    second = FnCallAgent(llm=llm, function_list=[lookup, find])
    assert worked_out > 0 and len(hints) == worked_out  # nothing resolved again for the second agent

    one: Any = first.function_map["lookup"]
    two: Any = second.function_map["lookup"]
    assert one.parameters == two.parameters and one.parameters is not two.parameters
    one.parameters["properties"]["query"]["description"] = "changed"  # one agent's tool changed
    assert two.parameters["properties"]["query"]["description"] == "What to look for."

    dumped: list[Any] = []
    real_dumps = json.dumps
    monkeypatch.setattr(budget.json, "dumps", lambda *a, **k: dumped.append(a) or real_dumps(*a, **k))
    counted = [t.function for t in second.function_map.values()]
    budget._TOOL_JSON.clear()
    assert budget._tool_json(counted[0]) and len(dumped) == 1
    copy = {**counted[0], "parameters": json.loads(json.dumps(counted[0]["parameters"]))}
    dumped.clear()
    assert budget._tool_json(copy) == budget._tool_json(counted[0]) and dumped == []  # equal: found again
    changed = {**copy, "parameters": {**copy["parameters"], "required": []}}
    budget._tool_json(changed)
    assert len(dumped) == 1  # a changed schema is counted anew


def test_concurrent_requests_go_to_pools_of_eight(openai_server: OpenAIServer) -> None:
    """httpcore's pool looks at every connection it holds at each request's start and end (and counts the idle ones
    for each idle one): with 50 agents at once, the pools of 32 took a third of the loop's work. Pools hold 8."""
    barrier = threading.Barrier(20)

    def gated(request):
        barrier.wait(DEADLINE)  # all twenty in flight at once
        return Reply(text="hi")

    openai_server.add(*[gated] * 20)
    transport = ShardedTransport()
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}

    async def one(client: httpx.AsyncClient) -> bytes:
        async with client.stream("POST", openai_server.base_url + "/chat/completions", json=body) as r:
            return await r.aread()

    async def go() -> int:
        async with httpx.AsyncClient(transport=transport) as client:
            await asyncio.gather(*(one(client) for _ in range(20)))
            return len(transport._pools)

    assert asyncio.run(asyncio.wait_for(go(), DEADLINE)) == 3  # 8 + 8 + 4


def test_an_idle_connection_is_checked_on_its_socket_without_anyio_lookups(openai_server: OpenAIServer) -> None:
    """At each request's start and end the pool asks every idle connection whether the server closed it; anyio
    answered by making a dict of all the stream's attributes each time. The stream keeps its socket."""
    openai_server.add(Reply(text="hi"))
    transport = ShardedTransport()
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}

    async def go() -> tuple[Any, bool]:
        async with httpx.AsyncClient(transport=transport) as client:
            async with client.stream("POST", openai_server.base_url + "/chat/completions", json=body) as r:
                await r.aread()
            pool: Any = transport._pools[0]._pool
            stream = pool.connections[0]._connection._network_stream
            return stream, stream.get_extra_info("is_readable")

    stream, readable = asyncio.run(asyncio.wait_for(go(), DEADLINE))
    assert isinstance(stream, http_pool._Stream) and readable is False  # open, nothing to read

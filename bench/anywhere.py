"""Any agent, anywhere: what the MCP and A2A surfaces of `chatagent serve` cost, and how soon a streamed object
shows its first field.

    .venv/bin/python bench/anywhere.py

- A tool-call round trip through `serve --mcp` (the official `mcp` client calling `ask_<agent>`, and an agent's
  own tool exposed with `--expose-tools`) against the same question through the OpenAI endpoint (httpx, one
  keep-alive connection), on one AgentServer on loopback; the agent answers at once (ScriptedLLM), so what is
  measured is the surface.
- An A2A task round trip (the `a2a-sdk` client's SendMessage: a new task and context each, so a stored
  conversation each) on the same server.
- Streaming structured output: against the loopback OpenAI-compatible server streaming a JSON object in chunks
  10 ms apart, the time to the first partial object (`extra['parsed']` with a field) against the time to the
  whole, validated answer.

Medians of sequential calls, in milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
from _measure import show  # noqa: E402
from a2a.client import ClientConfig, create_client  # noqa: E402
from a2a.types import a2a_pb2 as pb  # noqa: E402
from mcp import Client  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from chatagent import BasicAgent, FnCallAgent, ScriptedLLM, tool  # noqa: E402
from chatagent.server import AgentServer  # noqa: E402
from tests.support.openai_server import OpenAIServer, Reply  # noqa: E402

CALLS = 200
A2A_CALLS = 100
OBJECT_RUNS = 5
QUESTION = "What is the capital of France?"


@tool
def capital(country: str) -> str:
    """The capital of a country."""
    return "Paris" if country == "France" else "unknown"


def _ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:.2f} ms (p90 {sorted(samples)[int(len(samples) * 0.9)] * 1000:.2f})"


def openai_round_trips(url: str, stored: bool = False) -> list[float]:
    out = []
    body = {"model": "clerk", "messages": [{"role": "user", "content": QUESTION}]}
    if stored:  # each a new stored conversation, as each A2A task is
        body["session_id"] = "new"
    with httpx.Client() as http:
        for _ in range(CALLS):
            start = time.perf_counter()
            reply = http.post(f"{url}/chat/completions", json=body).json()
            out.append(time.perf_counter() - start)
            assert reply["choices"][0]["message"]["content"] == "Paris."
    return out


async def mcp_round_trips(url: str) -> tuple[list[float], list[float]]:
    asks, tools = [], []
    async with Client(url) as client:
        for _ in range(CALLS):
            start = time.perf_counter()
            result = await client.call_tool("ask_clerk", {"message": QUESTION})
            asks.append(time.perf_counter() - start)
            assert result.content[0].text == "Paris."
        for _ in range(CALLS):
            start = time.perf_counter()
            result = await client.call_tool("capital", {"country": "France"})
            tools.append(time.perf_counter() - start)
            assert result.content[0].text == "Paris"
    return asks, tools


async def a2a_round_trips(url: str) -> list[float]:
    out = []
    async with httpx.AsyncClient() as http:
        client = await create_client(url, ClientConfig(httpx_client=http, streaming=False))
        for _ in range(A2A_CALLS):
            message = pb.Message(message_id=uuid.uuid4().hex, role=pb.ROLE_USER)
            message.parts.append(pb.Part(text=QUESTION))
            start = time.perf_counter()
            events = [e async for e in client.send_message(pb.SendMessageRequest(message=message))]
            out.append(time.perf_counter() - start)
            assert events[-1].task.artifacts[0].parts[0].text == "Paris."
    return out


def a2a_raw_round_trips(url: str) -> list[float]:
    """The same task as plain JSON-RPC over httpx: the server's part without the a2a-sdk client's."""
    out = []
    with httpx.Client() as http:
        for i in range(A2A_CALLS):
            message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": QUESTION}]}
            body = {"jsonrpc": "2.0", "id": i, "method": "SendMessage", "params": {"message": message}}
            start = time.perf_counter()
            reply = http.post(f"{url}/a2a/clerk", json=body).json()
            out.append(time.perf_counter() - start)
            assert reply["result"]["task"]["artifacts"][0]["parts"][0]["text"] == "Paris."
    return out


class City(BaseModel):
    name: str
    country: str
    population: int
    landmarks: list[str]


ANSWER = '{"name": "Paris", "country": "France", "population": 2102650, "landmarks": ["Eiffel Tower", "Louvre", ' \
    '"Notre-Dame", "Sacre-Coeur", "Arc de Triomphe"]}'  # fmt: skip


def partial_object_times(base_url: str) -> tuple[list[float], list[float]]:
    firsts, wholes = [], []
    bot = BasicAgent(llm={"model": "m", "model_server": base_url, "api_key": "bench"}, response_format=City)
    for _ in range(OBJECT_RUNS):
        start = time.perf_counter()
        first = None
        for response in bot.run([{"role": "user", "content": "Paris?"}]):
            parsed = (response[-1].get("extra") or {}).get("parsed")
            if first is None and parsed:
                first = time.perf_counter() - start
        wholes.append(time.perf_counter() - start)
        assert parsed == City.model_validate_json(ANSWER).model_dump() and first is not None
        firsts.append(first)
    return firsts, wholes


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    agent = FnCallAgent(llm=ScriptedLLM([lambda m, f: "Paris."] * (4 * CALLS + 2 * A2A_CALLS + 10)),
                        function_list=[capital], name="clerk", description="Answers questions.")  # fmt: skip
    store = f"sqlite:///{tempfile.mkdtemp(prefix='chatagent-bench-')}/sessions.db"
    with AgentServer(agent, port=0, mcp=True, expose_tools=True, a2a=True, store=store) as server:
        openai_rt = openai_round_trips(server.url)
        openai_stored = openai_round_trips(server.url, stored=True)[:A2A_CALLS]
        asks, tools = asyncio.run(mcp_round_trips(server.mcp_url))
        a2a_rt = asyncio.run(a2a_round_trips(server.a2a_url))
        a2a_raw = a2a_raw_round_trips(server.a2a_url)
    show("openai_round_trip (reference: the same question over the OpenAI endpoint)", _ms(openai_rt))
    show("mcp_ask_round_trip (serve --mcp, ask_<agent>, official mcp client)", _ms(asks))
    show("mcp_exposed_tool_round_trip (--expose-tools, the agent's own tool)", _ms(tools))
    show("mcp_ask_over_openai", f"{statistics.median(asks) / statistics.median(openai_rt):.2f}x")
    show("a2a_task_round_trip (serve --a2a, SendMessage, a2a-sdk client)", _ms(a2a_rt))
    show("a2a_task_round_trip_plain_jsonrpc (the same over httpx: the server's part)", _ms(a2a_raw))
    show("openai_stored_round_trip (reference: the OpenAI endpoint, session_id 'new')", _ms(openai_stored))
    show("a2a_task_over_openai_stored", f"{statistics.median(a2a_rt) / statistics.median(openai_stored):.2f}x")
    with OpenAIServer() as upstream:
        upstream.add(Reply(text=ANSWER, chunk_size=6, interval=0.01, repeat=True))
        firsts, wholes = partial_object_times(upstream.base_url)
    chunks = -(-len(ANSWER) // 6)
    show(f"first_partial_object ({chunks} chunks 10 ms apart)", _ms(firsts))
    show("whole_validated_object (reference)", _ms(wholes))
    show("first_partial_object_share", f"{statistics.median(firsts) / statistics.median(wholes):.0%} of the time")


if __name__ == "__main__":
    main()

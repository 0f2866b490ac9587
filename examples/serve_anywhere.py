"""One agent, three protocols: the OpenAI API, MCP and A2A from one `chatagent serve`, each used by its own client.

    python examples/serve_anywhere.py "What is the capital of France?"

The agent is served on a free loopback port (as `chatagent serve --mcp --a2a` would serve it), then asked once
over MCP (the `mcp` package's client calls the tool `ask_assistant`) and once over A2A (the `a2a-sdk` client sends
a message); both answers come from the same agent under the same rules.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import uuid

import httpx
from a2a.client import ClientConfig, create_client
from a2a.types import a2a_pb2 as pb
from mcp import Client

from chatagent import BasicAgent
from chatagent.server import AgentServer


async def over_mcp(url: str, question: str) -> str:
    async with Client(url) as client:
        result = await client.call_tool("ask_assistant", {"message": question})
        return result.content[0].text


async def over_a2a(url: str, question: str) -> str:
    message = pb.Message(message_id=uuid.uuid4().hex, role=pb.ROLE_USER)
    message.parts.append(pb.Part(text=question))
    async with httpx.AsyncClient() as http:
        client = await create_client(url, ClientConfig(httpx_client=http, streaming=False))
        async for event in client.send_message(pb.SendMessageRequest(message=message)):
            task = event.task
        return task.artifacts[0].parts[0].text


def main() -> None:
    question = " ".join(sys.argv[1:]) or "What is the capital of France?"
    agent = BasicAgent(llm=None, name="assistant", description="Answers questions briefly.")
    store = f"sqlite:///{tempfile.mkdtemp(prefix='chatagent-serve-')}/sessions.db"  # A2A contexts are stored
    with AgentServer(agent, port=0, mcp=True, a2a=True, store=store) as server:
        print(f"serving on {server.url} (OpenAI), {server.mcp_url} (MCP), {server.a2a_url} (A2A)")
        print("mcp:", asyncio.run(over_mcp(server.mcp_url, question)))
        print("a2a:", asyncio.run(over_a2a(server.a2a_url, question)))


if __name__ == "__main__":
    main()

"""`chatagent serve --a2a`: the `a2a-sdk` client against the served agents on loopback, and two chatagent servers
talking A2A (`A2AAgent` as a tool). Cards, tasks (send, stream, get, cancel), a paused approval as `input-required`,
identity and ownership as on the OpenAI endpoint."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("a2a")

from a2a.client import ClientConfig, create_client  # noqa: E402
from a2a.types import a2a_pb2 as pb  # noqa: E402

from chatagent import A2AAgent, FnCallAgent, ScriptedLLM, Session, tool_call  # noqa: E402
from chatagent.server import AgentServer  # noqa: E402
from tests.support import mcp_agents  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


@pytest.fixture
def bank(tmp_path: Path, runs: Path) -> Iterator[AgentServer]:
    with AgentServer(mcp_agents.bank(), port=0, a2a=True, store=f"sqlite:///{tmp_path}/s.db") as server:
        yield server


def message(text: str, *, task: str = "", context: str = "", approval: Any = None) -> pb.Message:
    m = pb.Message(message_id=uuid.uuid4().hex, role=pb.ROLE_USER, task_id=task, context_id=context)
    m.parts.append(pb.Part(text=text))
    if approval is not None:
        m.metadata.update({"approval": approval})
    return m


async def send(url: str, m: pb.Message, *, streaming: bool = False, key: str | None = None) -> list:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx.AsyncClient(headers=headers) as http:
        client = await create_client(url, ClientConfig(httpx_client=http, streaming=streaming),
                                     resolver_http_kwargs={"headers": headers})  # fmt: skip
        return [event async for event in client.send_message(pb.SendMessageRequest(message=m))]


def test_the_card_says_what_the_agent_is_and_does(bank: AgentServer) -> None:
    card = httpx.get(bank.a2a_url + "/.well-known/agent-card.json").json()
    assert card["name"] == "bank" and card["description"] == "A bank clerk."
    assert card["capabilities"]["streaming"] is True
    assert {s["id"] for s in card["skills"]} == {"pay", "refund", "balance"}
    assert card["supportedInterfaces"][0]["url"] == bank.a2a_url + "/a2a/bank"
    assert httpx.get(bank.a2a_url + "/a2a/bank/.well-known/agent-card.json").json() == card


def test_a_paused_approval_is_input_required_and_the_same_task_goes_on(bank: AgentServer, runs: Path) -> None:
    async def main() -> tuple:
        first = (await send(bank.a2a_url, message("Pay Bob 10.")))[-1].task
        ran_before = runs.read_text()
        done = await send(bank.a2a_url, message("", task=first.id, context=first.context_id, approval=True))
        return first, ran_before, done[-1].task

    first, ran_before, done = asyncio.run(main())
    assert first.status.state == pb.TASK_STATE_INPUT_REQUIRED and ran_before == ""
    waiting = [p for p in first.status.message.parts if p.HasField("data")][0].data.struct_value
    assert waiting["pending_approval"][0]["name"] == "pay"
    assert done.id == first.id and done.status.state == pb.TASK_STATE_COMPLETED
    assert done.artifacts[0].parts[0].text == "Paid Bob 10."
    assert runs.read_text() == "pay Bob 10\n"


def test_a_tools_question_is_input_required_and_its_answer_goes_on_only_for_its_owner(tmp_path: Path) -> None:
    from chatagent import ask_user, tool

    @tool
    def book(city: str) -> str:
        """Book a trip."""
        return f"booked {city} on {ask_user(f'Which date for {city}?')}"

    agent = FnCallAgent(llm=ScriptedLLM([tool_call("book", {"city": "Rome"}), "Booked."]), function_list=[book],
                        name="trips")  # fmt: skip
    keys = {"alice": "key-alice-0123456789", "bob": "key-bob-0123456789ab"}
    with AgentServer(agent, port=0, a2a=True, api_key=keys, store=f"sqlite:///{tmp_path}/s.db") as server:

        def answer(first: pb.Task, answers: Any) -> pb.Message:
            m = message("", task=first.id, context=first.context_id)
            m.metadata.update({"answers": answers})
            return m

        async def main() -> tuple:
            first = (await send(server.a2a_url, message("Book Rome."), key=keys["alice"]))[-1].task
            (q,) = [p for p in first.status.message.parts if p.HasField("data")][0].data.struct_value[
                "pending_questions"]  # fmt: skip
            with pytest.raises(Exception, match="no such task"):  # another principal: not their task
                await send(server.a2a_url, answer(first, {q["id"]: "May 3"}), key=keys["bob"])
            done = await send(server.a2a_url, answer(first, {q["id"]: "May 3"}), key=keys["alice"])
            return first, q, done[-1].task

        first, q, done = asyncio.run(main())
    assert first.status.state == pb.TASK_STATE_INPUT_REQUIRED
    assert first.status.message.parts[0].text == "The agent asks: Which date for Rome?"
    assert q["question"] == "Which date for Rome?"
    assert done.id == first.id and done.status.state == pb.TASK_STATE_COMPLETED
    assert done.artifacts[0].parts[0].text == "Booked."


def test_a_file_part_is_refused_not_dropped(bank: AgentServer, runs: Path) -> None:
    m = message("Pay whoever this invoice names.")
    m.parts.append(pb.Part(url="https://example.com/invoice.pdf", media_type="application/pdf"))
    with pytest.raises(Exception, match="only text and data parts are taken, not url"):
        asyncio.run(send(bank.a2a_url, m))
    assert runs.read_text() == ""


def test_streaming_get_and_the_conversation_of_a_context(tmp_path: Path) -> None:
    with AgentServer(mcp_agents.echo(), port=0, a2a=True, store=f"sqlite:///{tmp_path}/s.db") as server:

        async def main() -> tuple:
            events = await send(server.a2a_url, message("remember 42"), streaming=True)
            task = events[0].task
            async with httpx.AsyncClient() as http:
                client = await create_client(server.a2a_url, ClientConfig(httpx_client=http, streaming=False))
                got = await client.get_task(pb.GetTaskRequest(id=task.id))
            later = (await send(server.a2a_url, message("and now?", context=task.context_id)))[-1].task
            return events, task, got, later

        events, task, got, later = asyncio.run(main())
    # the task (working), the answer's chunks (appended), the whole answer (last chunk), the final status
    assert task.status.state == pb.TASK_STATE_WORKING
    chunks = [e.artifact_update for e in events if e.HasField("artifact_update")]
    assert len(chunks) >= 3 and chunks[0].append is False and all(c.append for c in chunks[1:-1])
    streamed = "".join(c.artifact.parts[0].text for c in chunks[:-1])
    assert chunks[-1].last_chunk and chunks[-1].artifact.parts[0].text == streamed
    assert streamed.startswith("I have seen 1 user message(s)")
    assert events[-1].status_update.status.state == pb.TASK_STATE_COMPLETED
    assert got.id == task.id and got.status.state == pb.TASK_STATE_COMPLETED
    assert got.artifacts[0].parts[0].text == streamed
    assert later.context_id == task.context_id and "seen 2 user message(s)" in later.artifacts[0].parts[0].text


def test_tasks_and_contexts_belong_to_their_principal(tmp_path: Path) -> None:
    keys = {"alice": "key-alice-0123456789", "bob": "key-bob-0123456789"}
    with AgentServer(mcp_agents.echo(), port=0, a2a=True, api_key=keys, store=f"sqlite:///{tmp_path}/s.db") as srv:
        assert httpx.get(srv.a2a_url + "/.well-known/agent-card.json").status_code == 401

        async def main() -> tuple:
            mine = (await send(srv.a2a_url, message("secret 42"), key=keys["alice"]))[-1].task
            headers = {"Authorization": f"Bearer {keys['bob']}"}
            async with httpx.AsyncClient(headers=headers) as http:
                client = await create_client(srv.a2a_url, ClientConfig(httpx_client=http),
                                             resolver_http_kwargs={"headers": headers})  # fmt: skip
                try:
                    await client.get_task(pb.GetTaskRequest(id=mine.id))
                    stolen = "read"
                except Exception as e:
                    stolen = str(e)
            theirs = await send(srv.a2a_url, message("what was it?", context=mine.context_id), key=keys["bob"])
            return mine, stolen, theirs[-1].task

        mine, stolen, theirs = asyncio.run(main())
    assert "no such task" in stolen
    assert theirs.context_id == mine.context_id  # bob named alice's context: his own, new conversation
    assert "seen 1 user message(s)" in theirs.artifacts[0].parts[0].text


def test_cancel_stops_the_running_task(tmp_path: Path) -> None:
    agent, started, cancelled = mcp_agents.waiter()
    with AgentServer(agent, port=0, a2a=True, store=f"sqlite:///{tmp_path}/s.db") as server:

        async def main() -> Any:
            async with httpx.AsyncClient(timeout=60) as http:
                client = await create_client(server.a2a_url, ClientConfig(httpx_client=http, streaming=True))
                stream = client.send_message(pb.SendMessageRequest(message=message("wait")))
                first = await anext(stream)
                while not started.is_set():
                    await asyncio.sleep(0.02)
                cancelled_task = await client.cancel_task(pb.CancelTaskRequest(id=first.task.id))
                rest = [e async for e in stream]
                return cancelled_task, rest

        task, rest = asyncio.run(main())
    assert task.status.state == pb.TASK_STATE_CANCELED and cancelled.wait(30)
    assert rest[-1].status_update.status.state == pb.TASK_STATE_CANCELED


def test_two_chatagent_servers_one_calls_the_other_as_a_tool(tmp_path: Path, runs: Path) -> None:
    with AgentServer(mcp_agents.echo(), port=0, a2a=True, store=f"sqlite:///{tmp_path}/a.db") as remote:
        helper = A2AAgent(remote.a2a_url)
        assert helper.name == "echo" and helper.description.startswith("Says what it has seen.")
        llm = ScriptedLLM([tool_call("echo", {"message": "first"}), "asked once",
                           tool_call("echo", {"message": "second"}), "asked twice"])  # fmt: skip
        local = FnCallAgent(llm=llm, function_list=[helper], name="front")
        with AgentServer(local, port=0, store=f"sqlite:///{tmp_path}/b.db") as front:
            ask = {"model": "front", "messages": [{"role": "user", "content": "ask it"}], "session_id": "new"}
            one = httpx.post(f"{front.url}/chat/completions", json=ask, timeout=60).json()
            sid = one["choices"][0]["message"]["chatagent"]["session_id"]
            again = {"model": "front", "messages": [{"role": "user", "content": "again"}], "session_id": sid}
            two = httpx.post(f"{front.url}/chat/completions", json=again, timeout=60).json()
            stored = Session(sid, f"sqlite:///{tmp_path}/b.db", user="serve:anonymous").messages()
    results = [m["content"] for m in stored if m["role"] == "function"]
    assert results[0] == "I have seen 1 user message(s); the last: first"
    assert results[1] == "I have seen 2 user message(s); the last: second"  # one A2A context per session
    assert one["choices"][0]["message"]["content"] == "asked once"
    assert two["choices"][0]["message"]["content"] == "asked twice"

"""`chatagent serve --mcp` and `chatagent mcp`: the official `mcp` client package against the served agents, over
streamable HTTP (AgentServer on loopback) and over stdio (the real command in a child process).

What must hold: each agent is a tool `ask_<name>`, multi-turn through `session_id`; progress while it works; a
cancelled call closes the run; the OpenAI endpoint's identity, ownership and approval rules (a tool that needs
approval never runs without it, whatever the client sends)."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("mcp")

import httpx2  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from chatagent.server import AgentServer  # noqa: E402
from tests.support import mcp_agents  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def bank_server(tmp_path: Path, runs: Path) -> Iterator[AgentServer]:
    agent = mcp_agents.bank()
    with AgentServer(agent, port=0, mcp=True, expose_tools=True, store=f"sqlite:///{tmp_path}/s.db") as server:
        yield server


def client(url: str, key: str | None = None) -> Client:
    if key is None:
        return Client(url)
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"})
    return Client(streamable_http_client(url, http_client=http))


def with_client(url: str, body: Callable[[Client], Awaitable[Any]], key: str | None = None) -> Any:
    async def main() -> Any:
        async with client(url, key) as c:
            return await body(c)

    return asyncio.run(main())


def test_each_agent_is_a_tool_that_asks_it_with_progress_and_sessions(bank_server: AgentServer, runs: Path) -> None:
    progress: list[tuple[float, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, message))

    async def body(c: Client) -> tuple:
        listed = {t.name: t for t in (await c.list_tools()).tools}
        paused = await c.call_tool("ask_bank", {"message": "Pay Bob 10.", "session_id": "new"},
                                   progress_callback=on_progress)  # fmt: skip
        ran_before = runs.read_text()
        sid = paused.structured_content["session_id"]
        done = await c.call_tool("ask_bank", {"approval": True, "session_id": sid})
        later = await c.call_tool("ask_bank", {"message": "And my balance?", "session_id": sid})
        alone = await c.call_tool("ask_bank", {"message": "Who am I?"})
        return listed, paused, ran_before, done, later, alone

    listed, paused, ran_before, done, later, alone = with_client(bank_server.mcp_url, body)
    assert listed["ask_bank"].description == "A bank clerk."
    assert set(listed["ask_bank"].input_schema["properties"]) >= {"message", "session_id", "approval"}
    assert "balance" in listed and "refund" in listed and "pay" not in listed  # pay always needs approval
    waiting = paused.structured_content["pending_approval"]
    assert [w["name"] for w in waiting] == ["pay"] and "Waiting for approval: pay" in paused.content[0].text
    assert ran_before == ""  # nothing ran before the approval
    assert any(m == "calling pay" for _, m in progress)
    assert [v for v, _ in progress] == sorted(v for v, _ in progress)
    assert done.content[0].text == "Paid Bob 10." and not done.is_error
    assert runs.read_text() == "pay Bob 10\n"
    assert "the last: And my balance?" in later.content[0].text  # the conversation went on
    assert "seen 1 user message(s)" in alone.content[0].text  # a call without a session stands alone


def test_an_approval_without_a_session_needs_the_token_the_server_signed(bank_server: AgentServer, runs: Path) -> None:
    async def body(c: Client) -> tuple:
        paused = await c.call_tool("ask_bank", {"message": "Pay Bob 10."})
        token = paused.structured_content["approval_token"]
        forged = await c.call_tool("ask_bank", {"message": "Pay Bob 10.", "approval": True, "approval_token": "x.y"})
        bare = await c.call_tool("ask_bank", {"message": "Pay Bob 10.", "approval": True})
        after_refusals = runs.read_text()
        done = await c.call_tool("ask_bank", {"message": "Pay Bob 10.", "approval": True, "approval_token": token})
        replayed = await c.call_tool("ask_bank", {"message": "Pay Bob 10.", "approval": True, "approval_token": token})
        return forged, bare, after_refusals, done, replayed

    forged, bare, after_refusals, done, replayed = with_client(bank_server.mcp_url, body)
    assert forged.is_error and "approval_token is not one this server issued" in forged.content[0].text
    assert bare.is_error and "session_id or the approval_token" in bare.content[0].text
    assert after_refusals == ""
    assert done.content[0].text == "Paid Bob 10." and runs.read_text() == "pay Bob 10\n"
    assert replayed.is_error and "used already" in replayed.content[0].text  # paid once, not twice


def test_exposed_tools_run_through_the_tool_path_and_never_without_approval(
    bank_server: AgentServer, runs: Path
) -> None:
    async def body(c: Client) -> tuple:
        return (
            await c.call_tool("balance", {"account": "alice"}),
            await c.call_tool("refund", {"to": "Bob", "amount": 50}),
            await c.call_tool("refund", {"to": "Bob", "amount": 500}),
            await c.call_tool("pay", {"to": "Mallory", "amount": 1e6}),
            await c.call_tool("balance", {"acount": "typo"}),
        )

    balance, small, large, pay, typo = with_client(bank_server.mcp_url, body)
    assert balance.content[0].text == "alice: 42.00" and not balance.is_error
    assert small.content[0].text == "refunded 50 to Bob"
    assert large.is_error and "needs a person's approval" in large.content[0].text
    assert pay.is_error and "no tool 'pay'" in pay.content[0].text
    assert typo.is_error and "account" in typo.content[0].text
    assert runs.read_text() == "balance alice\nrefund Bob 50\n"


def test_keys_conversations_and_mcp_sessions_belong_to_their_principal(tmp_path: Path, runs: Path) -> None:
    keys = {"alice": "key-alice-0123456789", "bob": "key-bob-0123456789"}
    with AgentServer(mcp_agents.echo(), port=0, mcp=True, api_key=keys, store=f"sqlite:///{tmp_path}/s.db") as server:
        url = server.mcp_url
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip
        accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        assert httpx.post(url, json=hello, headers=accept).status_code == 401
        opened = httpx.post(url, json=hello, headers={**accept, "Authorization": f"Bearer {keys['alice']}"})
        assert opened.status_code == 200
        mcp_session = opened.headers["mcp-session-id"]
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        stolen = httpx.post(url, json=ping, headers={
            **accept, "Authorization": f"Bearer {keys['bob']}", "mcp-session-id": mcp_session})  # fmt: skip
        assert stolen.status_code == 404

        async def alice(c: Client) -> Any:
            return await c.call_tool("ask_echo", {"message": "my secret is 42", "session_id": "new"})

        sid = with_client(url, alice, keys["alice"]).structured_content["session_id"]

        async def bob(c: Client) -> Any:
            return await c.call_tool("ask_echo", {"message": "what did I say?", "session_id": sid})

        taken = with_client(url, bob, keys["bob"])

        async def alice_again(c: Client) -> Any:
            return await c.call_tool("ask_echo", {"message": "and now?", "session_id": sid})

        mine = with_client(url, alice_again, keys["alice"])
    assert "seen 1 user message(s)" in taken.content[0].text  # bob's own new conversation, not alice's
    assert "seen 2 user message(s)" in mine.content[0].text


def test_cancelling_the_call_closes_the_agents_run(tmp_path: Path) -> None:
    agent, started, cancelled = mcp_agents.waiter()
    with AgentServer(agent, port=0, mcp=True, store=f"sqlite:///{tmp_path}/s.db") as server:

        async def body(c: Client) -> None:
            call = asyncio.ensure_future(c.call_tool("ask_waiter", {"message": "wait"}))
            while not started.is_set():
                assert not call.done(), call.result()
                await asyncio.sleep(0.02)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call

        with_client(server.mcp_url, body)
        assert cancelled.wait(30), "the tool was not cancelled with the call"


def mcp_command(tmp_path: Path, agent: str) -> StdioServerParameters:
    """`chatagent mcp --expose-tools` serving `tests.support.mcp_agents:<agent>`, as a desktop client starts it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CHATAGENT_WORKSPACE": str(tmp_path / "ws")}
    args = ["-m", "chatagent", "mcp", "--agent", f"tests.support.mcp_agents:{agent}", "--expose-tools", "--store",
            f"sqlite:///{tmp_path}/s.db"]  # fmt: skip
    return StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(ROOT))


def test_chatagent_mcp_serves_an_agent_over_stdio(tmp_path: Path, runs: Path) -> None:
    params = mcp_command(tmp_path, "bank")

    async def main() -> tuple:
        async with Client(params) as c:
            names = sorted(t.name for t in (await c.list_tools()).tools)
            paused = await c.call_tool("ask_bank", {"message": "Pay Bob 10.", "session_id": "new"})
            ran_before = runs.read_text()
            sid = paused.structured_content["session_id"]
            done = await c.call_tool("ask_bank", {"approval": True, "session_id": sid})
            balance = await c.call_tool("balance", {"account": "bob"})
            return names, paused, ran_before, done, balance

    names, paused, ran_before, done, balance = asyncio.run(main())
    assert names == ["ask_bank", "balance", "refund"]
    assert paused.structured_content["pending_approval"][0]["name"] == "pay" and ran_before == ""
    assert done.content[0].text == "Paid Bob 10."
    assert balance.content[0].text == "bob: 42.00"
    assert runs.read_text() == "pay Bob 10\nbalance bob\n"


def test_chatagent_mcp_asks_before_running_code(tmp_path: Path, runs: Path) -> None:
    """As `serve` and `gui` do, `chatagent mcp` makes a tool that runs code ask a person first: not exposed as a tool
    of its own, and an ask_ call pauses on it."""
    params = mcp_command(tmp_path, "coder")

    async def main() -> tuple:
        async with Client(params) as c:
            names = sorted(t.name for t in (await c.list_tools()).tools)
            paused = await c.call_tool("ask_coder", {"message": "Tidy my disk."})
            return names, paused

    names, paused = asyncio.run(main())
    assert names == ["ask_coder", "balance"]
    assert paused.structured_content["pending_approval"][0]["name"] == "run_python"
    assert runs.read_text() == ""


def _trip_agent() -> Any:
    from chatagent import FnCallAgent, ScriptedLLM, ask_user, tool, tool_call

    @tool
    def book(city: str) -> str:
        """Book a trip."""
        nights = ask_user(f"How many nights in {city}?", {"type": "integer", "minimum": 1})
        return f"booked {nights} nights in {city}"

    script = [tool_call("book", {"city": "Rome"}), "Booked.", tool_call("book", {"city": "Oslo"}), "Booked too."]
    return FnCallAgent(llm=ScriptedLLM(script), function_list=[book], name="trips")


def test_a_tools_question_is_asked_by_elicitation_and_the_run_goes_on(tmp_path: Path) -> None:
    from mcp import types

    asked: list[tuple[str, dict]] = []

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append((params.message, params.requested_schema))
        return types.ElicitResult(action="accept", content={"answer": 3})

    async def decline(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    with AgentServer(_trip_agent(), port=0, mcp=True, store=f"sqlite:///{tmp_path}/s.db") as server:

        async def main() -> tuple:
            async with Client(server.mcp_url, elicitation_callback=answer) as c:
                done = await c.call_tool("ask_trips", {"message": "Book Rome.", "session_id": "new"})
            async with Client(server.mcp_url, elicitation_callback=decline) as c:
                paused = await c.call_tool("ask_trips", {"message": "Book Oslo.", "session_id": "new"})
                sid = paused.structured_content["session_id"]
                (q,) = paused.structured_content["pending_questions"]
                wrong = await c.call_tool("ask_trips", {"answers": {q["id"]: 0}, "session_id": sid})
                later = await c.call_tool("ask_trips", {"answers": {q["id"]: 2}, "session_id": sid})
            return done, paused, wrong, later

        done, paused, wrong, later = asyncio.run(main())
    assert asked == [("How many nights in Rome?", {"type": "object", "properties": {"answer": {
        "type": "integer", "minimum": 1}}, "required": ["answer"]})]  # fmt: skip
    assert done.structured_content["answer"] == "Booked." and "pending_questions" not in done.structured_content
    assert "The agent asks: How many nights in Oslo?" in paused.content[0].text
    assert wrong.is_error and "does not fit its question's schema" in wrong.content[0].text
    assert later.structured_content["answer"] == "Booked too."

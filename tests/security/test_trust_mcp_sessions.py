"""One principal filling `serve --mcp`'s sessions (issue 36, item 15), by raw HTTP and the official MCP client
against a real server on loopback. Before the fix one API key opened sessions it never used (an `initialize` each)
until the SDK's server-wide cap of 10,000, and then every principal got 503. Now a principal holds at most
`mcp_sessions` open sessions (then 429), and a session that never listed or called a tool is closed after
`mcp_unused_timeout` seconds, when the next one is opened; without keys the limit holds per client address."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest

pytest.importorskip("mcp")

import httpx2  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from chatagent.server import AgentServer  # noqa: E402
from chatagent.server.mcp_sessions import DEFAULT_PER_PRINCIPAL  # noqa: E402
from tests.support import mcp_agents  # noqa: E402

pytestmark = pytest.mark.timeout(180)

KEYS = {"mallory": "key-mallory-0123456789", "alice": "key-alice-0123456789"}
HELLO = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def open_session(http: httpx.Client, url: str, key: str | None) -> httpx.Response:
    auth = {"Authorization": f"Bearer {key}"} if key else {}
    return http.post(url, json=HELLO, headers={**ACCEPT, **auth})


def use(http: httpx.Client, url: str, key: str, sid: str) -> int:
    """List the tools in session `sid`: its status."""
    headers = {**ACCEPT, "Authorization": f"Bearer {key}", "mcp-session-id": sid, "mcp-protocol-version": "2025-06-18"}
    http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    return http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=headers).status_code


def ask_as(url: str, key: str) -> str:
    async def main() -> str:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"})
        async with Client(streamable_http_client(url, http_client=http)) as c:
            done = await c.call_tool("ask_echo", {"message": "hello"})
            return done.content[0].text

    return asyncio.run(main())


def test_one_principal_cannot_take_every_session(tmp_path: Path) -> None:
    with AgentServer(mcp_agents.echo(), port=0, mcp=True, api_key=KEYS, store=f"sqlite:///{tmp_path}/s.db") as server, \
            httpx.Client(timeout=30) as http:  # fmt: skip
        codes = [
            open_session(http, server.mcp_url, KEYS["mallory"]).status_code for _ in range(DEFAULT_PER_PRINCIPAL + 8)
        ]
        assert codes[:DEFAULT_PER_PRINCIPAL] == [200] * DEFAULT_PER_PRINCIPAL
        assert set(codes[DEFAULT_PER_PRINCIPAL:]) == {429}, f"one key opened {codes.count(200)} sessions"
        refused = open_session(http, server.mcp_url, KEYS["mallory"])
        assert "too_many_sessions" in refused.text and "DELETE" in refused.text
        assert ask_as(server.mcp_url, KEYS["alice"]), "another principal was shut out"


def test_sessions_never_used_are_closed_and_free_their_place(tmp_path: Path) -> None:
    with AgentServer(mcp_agents.echo(), port=0, mcp=True, api_key=KEYS, store=f"sqlite:///{tmp_path}/s.db",
                     mcp_sessions=3, mcp_unused_timeout=1.0) as server, httpx.Client(timeout=30) as http:  # fmt: skip
        url, key = server.mcp_url, KEYS["mallory"]
        kept = open_session(http, url, key).headers["mcp-session-id"]
        assert use(http, url, key, kept) == 200
        idle = [open_session(http, url, key).headers["mcp-session-id"] for _ in range(2)]
        assert open_session(http, url, key).status_code == 429
        time.sleep(1.5)  # past the unused sessions' timeout (a wait, not a measurement)
        assert open_session(http, url, key).status_code == 200, "sessions never used kept their place"
        assert use(http, url, key, idle[0]) == 404, "a closed session still answered"
        assert use(http, url, key, kept) == 200, "a session in use was closed"


def test_without_keys_the_limit_holds_per_client_address(tmp_path: Path) -> None:
    with AgentServer(mcp_agents.echo(), port=0, mcp=True, store=f"sqlite:///{tmp_path}/s.db", mcp_sessions=2) as server:
        one = httpx.Client(timeout=30, transport=httpx.HTTPTransport(local_address="127.0.0.1"))
        two = httpx.Client(timeout=30, transport=httpx.HTTPTransport(local_address="127.0.0.2"))
        with one, two:
            assert [open_session(one, server.mcp_url, None).status_code for _ in range(3)] == [200, 200, 429]
            assert open_session(two, server.mcp_url, None).status_code == 200, "one address shut out another"

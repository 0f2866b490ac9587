"""`serve --traces` as two API keys, each through another surface (the OpenAI API, MCP with the official client):
a served run's trace, with the runs nested in it (an agent used as a tool), is its own principal's, read from the run's trust (`RunContext.trust`, issue 36): each key lists and reads only its own.
(Jobs' traces, and a flow's, are attacked in test_trust_jobs.py.)
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import orjson
import pytest

pytest.importorskip("mcp")

import httpx2  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from chatagent import FnCallAgent, ScriptedLLM, tool_call  # noqa: E402
from chatagent.run.traces import flush_traces  # noqa: E402
from chatagent.server.runner import AgentServer  # noqa: E402

pytestmark = pytest.mark.timeout(120)
KEYS = {"alice": "key-alice-0123456789", "bob": "key-bob-9876543210"}


def agents() -> FnCallAgent:
    helper = FnCallAgent(llm=ScriptedLLM(default="The helper says 9:15."), name="helper")

    def model(messages, functions):  # noqa: ANN001, ANN202
        if not any(m.role == "function" for m in messages):
            return tool_call("helper", {"task": "ferry times"})
        return "The ferry leaves at 9:15."

    return FnCallAgent(llm=ScriptedLLM(default=model), function_list=[helper], name="ferry")


def test_each_key_reads_only_its_own_traces_nested_runs_included(tmp_path: Path) -> None:
    with AgentServer(agents(), "127.0.0.1", 0, api_key=KEYS, store=f"sqlite:///{tmp_path}/s.db", traces=True,
                     mcp=True) as server:  # fmt: skip
        http = httpx.Client(base_url=server.url[: -len("/v1")], timeout=60)

        def get(key: str, path: str) -> httpx.Response:
            return http.get(path, headers={"Authorization": f"Bearer {key}"})

        r = http.post("/v1/chat/completions", headers={"Authorization": f"Bearer {KEYS['alice']}"},
                      json={"model": "ferry", "messages": [{"role": "user", "content": "Ferry times?"}]})  # fmt: skip
        assert r.status_code == 200, r.text

        async def over_mcp() -> None:
            client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {KEYS['bob']}"})
            async with Client(streamable_http_client(server.mcp_url, http_client=client)) as c:
                await c.call_tool("ask_ferry", {"message": "Ferry times?"})

        asyncio.run(over_mcp())
        flush_traces()
        mine, theirs = get(KEYS["alice"], "/v1/traces").json()["data"], get(KEYS["bob"], "/v1/traces").json()["data"]
        assert len(mine) == 1 and len(theirs) == 1, (mine, theirs)  # one trace each: the nested runs are in it
        for key, (trace,) in ((KEYS["alice"], mine), (KEYS["bob"], theirs)):
            body = orjson.dumps(get(key, f"/v1/traces/{trace['id']}").json()).decode()
            assert '"name":"helper"' in body  # the agent used as a tool: its run is in the principal's trace
        assert get(KEYS["bob"], f"/v1/traces/{mine[0]['id']}").status_code == 404
        assert get(KEYS["alice"], f"/v1/traces/{theirs[0]['id']}").status_code == 404
        http.close()

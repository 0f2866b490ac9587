"""An agent's own tools over `serve --mcp --expose-tools` (issue 36, item 7), attacked with the official `mcp`
client over streamable HTTP: a direct call goes through the agent's input checks and output redaction as a turn
does (before the fix a `DROP TABLE` its InputGuardrail blocks ran, and a key its TextPolicy redacts came back
whole), and an agent whose checks cannot see a direct call (an `after_model` hook) is not exposed unless the
operator names it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402

from chatagent import FnCallAgent, Plugin, ScriptedLLM, tool  # noqa: E402
from chatagent.plugins.guardrails import InputGuardrail, TextPolicy  # noqa: E402
from chatagent.server import AgentServer  # noqa: E402

pytestmark = pytest.mark.timeout(120)

KEY = "sk-live-abcdefghijklmnopqrstuvwx"


def dba(ran: list, *extra: Any) -> FnCallAgent:
    @tool
    def run_sql(query: str) -> str:
        """Run a SQL statement."""
        ran.append(query)
        return "ok"

    @tool
    def read_config(name: str) -> str:
        """Read a configuration value."""
        return f"{name} = {KEY}"

    plugins = [
        InputGuardrail(lambda text: "a destructive statement" if "DROP TABLE" in text.upper() else None),
        TextPolicy(redact=[r"sk-[A-Za-z0-9-]{20,}"]),
        *extra,
    ]
    return FnCallAgent(llm=ScriptedLLM(["ok"]), function_list=[run_sql, read_config], name="dba", plugins=plugins)


def call(url: str, name: str, args: dict) -> Any:
    async def main() -> Any:
        async with Client(url) as c:
            return await c.call_tool(name, args)

    return asyncio.run(main())


@pytest.fixture
def ran() -> list:
    return []


@pytest.fixture
def server(ran: list, tmp_path) -> Iterator[AgentServer]:
    with AgentServer(dba(ran), port=0, mcp=True, expose_tools=True, store=f"sqlite:///{tmp_path}/s.db") as s:
        yield s


def test_a_direct_call_goes_through_the_agents_input_checks(server: AgentServer, ran: list) -> None:
    result = call(server.mcp_url, "run_sql", {"query": "drop table customers"})
    assert ran == [], "the blocked statement ran"
    assert result.is_error
    assert call(server.mcp_url, "run_sql", {"query": "select 1"}).content[0].text == "ok"
    assert ran == ["select 1"]


def test_a_direct_calls_result_goes_through_the_agents_output_redaction(server: AgentServer) -> None:
    text = call(server.mcp_url, "read_config", {"name": "stripe"}).content[0].text
    assert KEY not in text, "the redacted key came back whole"
    assert text == "stripe = [redacted]"


class Watcher(Plugin):
    """An output check on the model's replies, which a direct call has none of."""

    def after_model(self, agent: Any, call: Any, reply: list) -> None:
        pass


def test_an_agent_whose_checks_cannot_see_a_direct_call_is_exposed_only_by_name(ran: list, tmp_path) -> None:
    with pytest.raises(ValueError, match=r"expose_tools=\['dba'\]"):
        AgentServer(dba(ran, Watcher()), port=0, mcp=True, expose_tools=True).start()
    opted = AgentServer(dba(ran, Watcher()), port=0, mcp=True, expose_tools=["dba"], store=f"sqlite:///{tmp_path}/s.db")
    with opted as s:
        assert call(s.mcp_url, "read_config", {"name": "stripe"}).content[0].text == "stripe = [redacted]"

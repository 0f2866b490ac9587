"""Fixtures of the tests of the servers (`chatagent serve`: OpenAI-compatible, MCP, A2A). `runs`: the file the
tools of `tests.support.mcp_agents` append each run to (named by $CHATAGENT_TEST_RUNS, which child processes
inherit), so that a test sees from outside what ran. `agui_serve`: starts `serve --ag-ui` for the given agents
on loopback, keys `AGUI_KEYS` (Alice's and Bob's), its store `tmp_path/s.db`; stopped after the test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from chatagent.server import AgentServer

AGUI_KEYS = {"alice": "key-alice", "bob": "key-bob"}


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "runs.txt"
    path.write_text("")
    monkeypatch.setenv("CHATAGENT_TEST_RUNS", str(path))
    return path


@pytest.fixture
def agui_serve(tmp_path: Path) -> Iterator[Callable[..., AgentServer]]:
    servers: list[AgentServer] = []

    def start(*agents: Any) -> AgentServer:
        store = f"sqlite:///{tmp_path}/s.db"
        server = AgentServer(list(agents), port=0, api_key=AGUI_KEYS, ag_ui=True, store=store)
        servers.append(server.start())
        return server

    yield start
    for s in servers:
        s.close()

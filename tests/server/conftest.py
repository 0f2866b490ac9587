"""Fixtures of the tests of the servers (`chatagent serve`: OpenAI-compatible, MCP, A2A). `runs`: the file the
tools of `tests.support.mcp_agents` append each run to (named by $CHATAGENT_TEST_RUNS, which child processes
inherit), so that a test sees from outside what ran."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "runs.txt"
    path.write_text("")
    monkeypatch.setenv("CHATAGENT_TEST_RUNS", str(path))
    return path

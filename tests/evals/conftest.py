"""Fixtures of the trace and evaluation tests: `store_url` runs a test on SQLite and on a real PostgreSQL server (one
throwaway cluster for the run, a schema per test; skipped, saying why, where PostgreSQL is not installed); each test
has its own workspace, and whatever records traces globally is stopped after it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from chatagent.run import traces
from chatagent.sessions import close_stores


@pytest.fixture(autouse=True)
def _workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    workspace = tmp_path / "workspace"
    monkeypatch.setenv("CHATAGENT_WORKSPACE", str(workspace))
    monkeypatch.delenv("CHATAGENT_SESSION_STORE", raising=False)
    monkeypatch.delenv("CHATAGENT_TRACES", raising=False)
    yield workspace
    traces.stop_recording()
    assert traces.flush_traces(30)
    close_stores()


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return "sqlite:///" + str(tmp_path / "traces.db")
    return request.getfixturevalue("postgres").new_store_url()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return "sqlite:///" + str(tmp_path / "traces.db")

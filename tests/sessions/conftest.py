"""Fixtures of the session tests: every test that takes `store_url` runs on SQLite and on a real PostgreSQL server.

The PostgreSQL server is one throwaway cluster for the whole test run (tests/support/postgres.py), each test in a
schema of its own; the tests skip PostgreSQL, saying why, where it is not installed. Each test has its own
workspace (where attached files are copied back) and closes the stores it opened.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from chatagent.sessions import close_stores
from tests.support.durable import Child


@pytest.fixture(autouse=True)
def _workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    workspace = tmp_path / "workspace"
    monkeypatch.setenv("CHATAGENT_WORKSPACE", str(workspace))
    monkeypatch.delenv("CHATAGENT_SESSION_STORE", raising=False)
    yield workspace
    close_stores()


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return "sqlite:///" + str(tmp_path / "sessions.db")
    return request.getfixturevalue("postgres").new_store_url()


@pytest.fixture
def children() -> Iterator[Callable[..., Child]]:
    """Start tests/support/durable_child.py processes (`children(*args)`); those still running at the end are killed."""
    made: list[Child] = []

    def make(*args: str) -> Child:
        made.append(Child(*args))
        return made[-1]

    yield make
    for c in made:
        if c.p.poll() is None:
            c.kill()

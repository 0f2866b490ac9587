"""Shared fixtures.

`openai_server`: the loopback OpenAI-compatible server (tests/support/openai_server.py), one per test
session, emptied before each test. Its module docstring documents the API.

The suite never touches the user's workspace (~/.cache/chatagent: parsed documents, indexes, sessions): before any
test module is imported, CHATAGENT_WORKSPACE names a temporary directory, removed when the session ends, and
CHATAGENT_SESSION_STORE is unset. Every process a test starts inherits both.

Search by meaning is off for the suite (CHATAGENT_EMBEDDER=none, inherited by the processes tests start):
embedding every test's documents would cost minutes of the 2 shared cores. The tests of hybrid retrieval and
memory (tests/rag/test_rag_dense.py, tests/memory/) turn it on for themselves, on small texts.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

from tests.support.openai_server import OpenAIServer
from tests.support.postgres import PostgresCluster, unavailable

os.environ.setdefault("CHATAGENT_EMBEDDER", "none")

WORKSPACE = tempfile.mkdtemp(prefix="chatagent-tests-workspace-")
os.environ["CHATAGENT_WORKSPACE"] = WORKSPACE  # read where it is used (workspace_root), never cached at import
os.environ.pop("CHATAGENT_SESSION_STORE", None)


def pytest_configure(config: pytest.Config) -> None:
    """Browser assertions wait up to 30 s, not Playwright's 5: on a busy 2-core machine (the suite beside other
    work) a streamed reply took longer than 5 s to show its sixth word. Waits end as soon as the page matches."""
    try:
        from playwright.sync_api import expect
    except ImportError:  # the browser tests skip themselves, saying why
        return
    expect.set_options(timeout=30_000)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    shutil.rmtree(WORKSPACE, ignore_errors=True)


@pytest.fixture(scope="session")
def _openai_server_session() -> Iterator[OpenAIServer]:
    with OpenAIServer().start() as server:
        yield server


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresCluster]:
    """One throwaway PostgreSQL server for the whole run (tests/support/postgres.py); skipped, saying why, where
    PostgreSQL is not installed. Each test takes a schema of its own: `postgres.new_store_url()`."""
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    with PostgresCluster().start() as cluster:
        yield cluster


@pytest.fixture
def openai_server(_openai_server_session: OpenAIServer) -> Iterator[OpenAIServer]:
    """The loopback server with no queued replies and no recorded requests."""
    _openai_server_session.reset()
    yield _openai_server_session
    _openai_server_session.reset()


@pytest.fixture(autouse=True)
def _fresh_retry_budgets():
    """Each test starts with full retry budgets (chatagent.llm.retry: shared per server in a process, and the suite's
    loopback servers are shared by many tests: one test's retries must not spend another's)."""
    from chatagent.llm import retry  # the model layer: loaded by the tests that call models anyway

    retry._budgets.clear()
    yield


@pytest.fixture(autouse=True)
def _process_wide_tables_restored():
    """What a test adds to the process-wide tables goes when it ends: the keys masked in every error (a test's key
    `sk-upstream-...` masked the word "upstream" in later tests' errors) and the model prices (a test that re-priced a
    model without its cache prices changed a later test's costs)."""
    from chatagent.llm import prices
    from chatagent.utils import keys

    known, priced = set(keys._known), dict(prices.PRICES)
    yield
    with keys._lock:
        keys._known.intersection_update(known)
    with prices._lock:
        prices.PRICES.clear()
        prices.PRICES.update(priced)
        prices._found.clear()

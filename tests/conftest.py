"""Shared fixtures.

`openai_server`: the loopback OpenAI-compatible server (tests/support/openai_server.py), one per test
session, emptied before each test. Its module docstring documents the API.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.openai_server import OpenAIServer


@pytest.fixture(scope="session")
def _openai_server_session() -> Iterator[OpenAIServer]:
    with OpenAIServer().start() as server:
        yield server


@pytest.fixture
def openai_server(_openai_server_session: OpenAIServer) -> Iterator[OpenAIServer]:
    """The loopback server with no queued replies and no recorded requests."""
    _openai_server_session.reset()
    yield _openai_server_session
    _openai_server_session.reset()

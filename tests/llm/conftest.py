"""Fixtures of the model backend tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.anthropic_server import AnthropicServer
from tests.support.dashscope_server import DashScopeServer
from tests.support.gemini_server import GeminiServer
from tests.support.responses_server import ResponsesServer


@pytest.fixture(scope="module")
def _dashscope_server_module() -> Iterator[DashScopeServer]:
    with DashScopeServer().start() as server:
        yield server


@pytest.fixture
def dashscope_server(_dashscope_server_module: DashScopeServer) -> Iterator[DashScopeServer]:
    """The loopback DashScope server (tests/support/dashscope_server.py), emptied before and after the test."""
    _dashscope_server_module.reset()
    yield _dashscope_server_module
    _dashscope_server_module.reset()


@pytest.fixture(scope="module")
def _anthropic_server_module() -> Iterator[AnthropicServer]:
    with AnthropicServer().start() as server:
        yield server


@pytest.fixture
def anthropic_server(_anthropic_server_module: AnthropicServer) -> Iterator[AnthropicServer]:
    """The loopback Anthropic Messages API (tests/support/anthropic_server.py), emptied before and after the test."""
    _anthropic_server_module.reset()
    yield _anthropic_server_module
    _anthropic_server_module.reset()


@pytest.fixture(scope="module")
def _responses_server_module() -> Iterator[ResponsesServer]:
    with ResponsesServer().start() as server:
        yield server


@pytest.fixture
def responses_server(_responses_server_module: ResponsesServer) -> Iterator[ResponsesServer]:
    """The loopback OpenAI Responses API (tests/support/responses_server.py), emptied before and after the test."""
    _responses_server_module.reset()
    yield _responses_server_module
    _responses_server_module.reset()


@pytest.fixture(scope="module")
def _gemini_server_module() -> Iterator[GeminiServer]:
    with GeminiServer().start() as server:
        yield server


@pytest.fixture
def gemini_server(_gemini_server_module: GeminiServer) -> Iterator[GeminiServer]:
    """The loopback Gemini API (tests/support/gemini_server.py), emptied before and after the test."""
    _gemini_server_module.reset()
    _gemini_server_module.cached_tokens = 0
    yield _gemini_server_module
    _gemini_server_module.reset()

"""Fixtures of the model backend tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.anthropic_server import AnthropicServer
from tests.support.bedrock_server import BedrockServer
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


@pytest.fixture(scope="module")
def _bedrock_server_module() -> Iterator[BedrockServer]:
    with BedrockServer().start() as server:
        yield server


@pytest.fixture
def bedrock_server(_bedrock_server_module: BedrockServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[BedrockServer]:
    """The loopback Bedrock runtime (tests/support/bedrock_server.py), emptied before and after the test, its keys in
    the AWS environment variables (and no instance metadata service to ask: nothing leaves the machine)."""
    key, secret = _bedrock_server_module.access_key
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
    _bedrock_server_module.reset()
    yield _bedrock_server_module
    _bedrock_server_module.reset()

"""The OpenAI-compatible backend's two paths send the same requests, without the openai SDK."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from pathlib import Path

import pytest

from chatagent import ModelServiceError, get_chat_model
from chatagent.schema import to_messages
from tests.support import processes
from tests.support.openai_server import OpenAIServer, Reply

ROOT = Path(__file__).resolve().parents[2]
USER = to_messages([{"role": "user", "content": "hi"}])
CFG = {
    "temperature": 0.2,
    "stop": ["END"],
    "top_k": 20,  # not a parameter of the SDK: into the body
    "extra_body": {"top_k": 5, "repetition_penalty": 1.1},  # has the last word
    "extra_headers": {"X-Trace": "t-1"},
    "max_retries": 0,
}
WEATHER = {"name": "weather", "description": "Weather", "parameters": {"type": "object", "properties": {}}}


def test_async_requests_equal_the_sync_ones(openai_server: OpenAIServer) -> None:
    openai_server.add(*["Hello"] * 4)
    llm = get_chat_model({"model": "m", "model_server": openai_server.base_url, "api_key": "k", "generate_cfg": CFG})
    list(llm.chat(USER, [WEATHER]))
    llm.chat(USER, [WEATHER], stream=False)

    async def go():
        [_ async for _ in llm.achat(USER, [WEATHER])]
        await llm.achat(USER, [WEATHER], stream=False)

    asyncio.run(go())
    sync_stream, sync_once, async_stream, async_once = openai_server.requests
    assert async_stream.json == sync_stream.json and async_once.json == sync_once.json
    assert sync_stream.json["top_k"] == 5 and sync_stream.json["repetition_penalty"] == 1.1
    assert sync_stream.json["temperature"] == 0.2 and sync_stream.json["stream"] is True
    assert "stream" not in sync_once.json
    assert all(r.headers["x-trace"] == "t-1" for r in openai_server.requests)
    assert "extra_headers" not in async_stream.json and "max_retries" not in async_stream.json


def test_neither_run_nor_arun_imports_the_openai_sdk() -> None:
    """`import openai` takes most of a second of CPU and ~40 MB (its types build pydantic classes for the whole API):
    a fresh process's first answer would pay it, and on the async path it would stall the event loop."""
    code = textwrap.dedent(
        """
        import asyncio, sys
        from chatagent import BasicAgent
        from tests.support.openai_server import OpenAIServer, Reply

        with OpenAIServer() as server:
            server.add("Hello there", "Hello again", "Hi", "Hi once")
            bot = BasicAgent(llm={"model": "m", "model_server": server.base_url, "api_key": "k"})

            async def go():
                out = [r async for r in bot.arun([{"role": "user", "content": "hi"}])]
                out.append(await bot.arun_nonstream([{"role": "user", "content": "hi"}]))
                return out

            out = asyncio.run(go())
            out += list(bot.run([{"role": "user", "content": "hi"}]))
            out.append(bot.run_nonstream([{"role": "user", "content": "hi"}]))
        assert out[-2][-1]["content"] == "Hi" and out[-1][-1]["content"] == "Hi once", out
        assert "openai" not in sys.modules, "a run imported the openai SDK"
        """
    )
    done = processes.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]


def test_azure_deployment_on_both_paths(openai_server: OpenAIServer) -> None:
    """Azure's URL, `api-version` and `api-key` on the sync and on the async path alike."""
    openai_server.add("sync", "async")
    root = openai_server.base_url.removesuffix("/v1")
    llm = get_chat_model(
        {
            "model_type": "azure",
            "model": "dep-4o",
            "azure_endpoint": root,
            "api_key": "az-key",
            "api_version": "2024-10-21",
        }
    )
    assert llm.chat(USER, stream=False)[0].content == "sync"
    assert asyncio.run(llm.achat(USER, stream=False))[0].content == "async"
    for request in openai_server.chat_requests:
        assert request.path == "/openai/deployments/dep-4o/chat/completions?api-version=2024-10-21"
        assert request.headers["api-key"] == "az-key" and request.json["model"] == "dep-4o"


ERRORS = [
    Reply(status=400, error={"message": "prompt is too long", "code": "context_length_exceeded"}),
    Reply(
        status=422,
        body=json.dumps({"detail": [{"loc": ["body", "stream_options"], "msg": "Extra inputs are not permitted"}]}),
        content_type="application/json",
    ),
    Reply(status=401, error={"message": "invalid key k-secret-key-value"}),
    Reply(status=404, body='{"error": "model m not found"}', content_type="application/json"),
    Reply(status=429, error={"message": "slow down"}, headers={"Retry-After": "7"}),
    Reply(status=502, body="<html><body><h1>502 Bad Gateway</h1></body></html>", content_type="text/html"),
]


@pytest.mark.parametrize("reply", ERRORS, ids=lambda r: str(r.status))
def test_async_errors_equal_the_sync_ones(openai_server: OpenAIServer, reply: Reply) -> None:
    """An HTTP error becomes the same ModelServiceError on both paths (the sync one reads it through the SDK)."""
    llm = get_chat_model(
        {"model": "m", "model_server": openai_server.base_url, "api_key": "k-secret-key-value",
         "generate_cfg": {"max_retries": 0}}
    )  # fmt: skip

    def sync_error() -> ModelServiceError:
        openai_server.add(reply)
        with pytest.raises(ModelServiceError) as caught:
            llm.chat(USER, stream=False)
        return caught.value

    async def async_error() -> ModelServiceError:
        openai_server.add(reply)
        with pytest.raises(ModelServiceError) as caught:
            await llm.achat(USER, stream=False)
        return caught.value

    want, got = sync_error(), asyncio.run(async_error())
    assert (got.code, got.message, got.retryable, got.retry_after) == (
        want.code, want.message, want.retryable, want.retry_after
    ), reply  # fmt: skip
    assert "k-secret-key-value" not in got.message

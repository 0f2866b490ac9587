"""DashScopeModel.achat() on the SDK's async API (aiohttp) against the loopback DashScope server.

The async path must answer exactly as the sync one (the same replies, retries and errors), run on the event loop
itself (no worker thread per stream), and close the HTTP stream when the caller stops reading.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import gc
import json
import logging
import threading

import pytest

from chatagent import BasicAgent, ModelServiceError, Usage, get_chat_model
from chatagent.llm.dashscope.chat import DashScopeModel
from chatagent.schema import to_messages
from tests.support.dashscope_server import DashScopeServer, Reply

pytestmark = pytest.mark.timeout(60)

KEY = "sk-async-0123456789abcdef"
USER = to_messages([{"role": "user", "content": "hi"}])  # Messages in, Messages out
WEATHER = {
    "name": "get_weather",
    "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
TIME = {"name": "get_time", "description": "The time now", "parameters": {"type": "object", "properties": {}}}
DEADLINE = 20  # seconds any single wait may take before it counts as a failure


@pytest.fixture
def server(dashscope_server: DashScopeServer) -> DashScopeServer:
    dashscope_server.api_key = KEY
    return dashscope_server


def model(server: DashScopeServer, name: str = "qwen-plus", key: str = KEY, **generate_cfg: object) -> DashScopeModel:
    cfg = {"model": name, "model_server": "dashscope", "api_key": key, "base_url": server.base_url}
    llm = get_chat_model({**cfg, "generate_cfg": {"retry_delay": 0.01, **generate_cfg}})
    assert isinstance(llm, DashScopeModel)
    return llm


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, DEADLINE))


async def astream(llm: DashScopeModel, messages=USER, **kw) -> list:
    return [copy.deepcopy(r) async for r in llm.achat(messages, **kw)]


# ---- the same answers as the sync path ----------------------------------------------------------------------

REPLIES = {
    "text": lambda: Reply(text="Hello there, world!", chunk_size=3, usage={"input_tokens": 7, "output_tokens": 3}),
    "reasoning": lambda: Reply(reasoning="Let me think.", text="42"),
    "one call": lambda: Reply(text="Let me look.", tool_calls=[("get_weather", {"city": "Paris"})], chunk_size=2),
    "parallel calls": lambda: Reply(tool_calls=[("get_weather", {"city": "Oslo"}), ("get_time", {})]),
    "cut by max_tokens": lambda: Reply(text="partial answ", finish_reason="length"),
}


@pytest.mark.parametrize("delta", [False, True])
@pytest.mark.parametrize("kind", list(REPLIES))
def test_achat_yields_what_chat_yields(server: DashScopeServer, kind: str, delta: bool) -> None:
    server.add(REPLIES[kind](), REPLIES[kind](), REPLIES[kind](), REPLIES[kind]())
    llm = model(server, "qwen3-235b-a22b")
    sync_usage, async_usage = Usage(), Usage()
    expected = [copy.deepcopy(r) for r in llm.chat(USER, [WEATHER, TIME], delta_stream=delta, usage=sync_usage)]
    got = run(astream(llm, USER, functions=[WEATHER, TIME], delta_stream=delta, usage=async_usage))
    assert got == expected and len(got) >= 2
    assert run(llm.achat(USER, [WEATHER, TIME], stream=False)) == llm.chat(USER, [WEATHER, TIME], stream=False)
    assert async_usage == sync_usage and async_usage.calls == 1 and async_usage.completion_tokens > 0
    first, second = server.generation_requests[:2]
    assert second.json == first.json  # the same request body, parameters and tools
    assert {k: second.headers[k] for k in ("authorization", "x-dashscope-sse")} == {
        "authorization": f"Bearer {KEY}",
        "x-dashscope-sse": "enable",
    }
    assert "x-dashscope-sse" not in server.generation_requests[2].headers


def test_a_tool_call_streams_complete(server: DashScopeServer) -> None:
    server.add(Reply(text="Let me look.", tool_calls=[("get_weather", {"city": "Paris"})], chunk_size=2))
    deltas = run(astream(model(server), functions=[WEATHER], delta_stream=True))
    calls = [f for d in deltas for f in d if f.function_call is not None]
    assert len(calls) == 1 and deltas[-1] == [calls[0]]
    assert calls[0].index == 1 and calls[0].extra == {"function_id": "call_0_get_weather"}
    assert json.loads(calls[0].function_call.arguments) == {"city": "Paris"}
    assert "".join(f.content for d in deltas[:-1] for f in d) == "Let me look."


def test_vl_model_uploads_and_uses_the_multimodal_api(server: DashScopeServer, tmp_path) -> None:
    image = tmp_path / "cat.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(64)))
    server.add(Reply(text="A cat."), Reply(text="Still a cat."))
    llm = model(server, "qwen-vl-max")
    msgs = to_messages([{"role": "user", "content": [{"image": str(image)}, {"text": "What is this?"}]}])
    assert run(astream(llm, msgs))[-1][0].content == "A cat."
    assert run(llm.achat(msgs, stream=False))[0].content == "Still a cat."
    gen = server.generation_requests
    assert all(r.path.endswith("/multimodal-generation/generation") for r in gen)
    (key,) = server.uploads
    assert gen[0].messages[0]["content"][0] == gen[1].messages[0]["content"][0] == {"image": f"oss://{key}"}


def test_through_the_agent_arun_equals_run(server: DashScopeServer) -> None:
    server.add("Hi! How can I help?", "Hi! How can I help?")
    llm = {"model": "qwen-plus", "model_server": "dashscope", "api_key": KEY, "base_url": server.base_url}
    question = [{"role": "user", "content": "hi"}]
    expected = [copy.deepcopy(r) for r in BasicAgent(llm=llm, name="bot").run(question)]

    async def go():
        return [copy.deepcopy(r) async for r in BasicAgent(llm=llm, name="bot").arun(question)]

    assert run(go()) == expected
    assert expected[-1] == [{"role": "assistant", "content": "Hi! How can I help?", "name": "bot"}]


# ---- on the event loop, connections pooled ----------------------------------------------------------------


def test_streams_run_on_the_loop_not_in_worker_threads(server: DashScopeServer) -> None:
    """Three streams, and a loop with ONE worker thread: the server answers none until all three requests
    arrived, which a stream read in a worker thread (the generic fallback) would never let happen."""
    barrier = threading.Barrier(3)

    def gated(request):
        try:
            barrier.wait(DEADLINE)
        except threading.BrokenBarrierError:
            return Reply(status=400, code="NotConcurrent", message="the three requests never met")
        return Reply(text="met", chunk_size=1)

    server.add(gated, gated, gated)
    llm = model(server, max_retries=0)

    async def go():
        asyncio.get_running_loop().set_default_executor(concurrent.futures.ThreadPoolExecutor(max_workers=1))
        return await asyncio.gather(*(astream(llm) for _ in range(3)))

    outs = run(go())
    assert [out[-1][0].content for out in outs] == ["met"] * 3


def test_the_pool_closes_with_its_loop(server: DashScopeServer, caplog: pytest.LogCaptureFixture) -> None:
    """A pool left open when its loop ends makes aiohttp log 'Unclosed connector' at garbage collection."""
    server.add("one", "two")
    llm = model(server)
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        for _ in range(2):  # two loops, one after the other: a pool each
            assert run(astream(llm))[-1][0].content in ("one", "two")
        del llm
        gc.collect()
    assert not [r for r in caplog.records if "Unclosed" in r.getMessage()]


def test_connections_are_reused_on_a_loop(server: DashScopeServer) -> None:
    server.add("one", "two", "three")
    llm = model(server)

    async def go():
        await astream(llm)
        await llm.achat(USER, stream=False)
        await astream(llm)

    run(go())
    assert len({r.peer for r in server.generation_requests}) == 1


# ---- errors and retries, as on the sync path --------------------------------------------------------------


def test_throttling_and_server_errors_are_retried(server: DashScopeServer) -> None:
    server.add(Reply(status=429, headers={"Retry-After": "0.05"}), Reply(status=503), "finally")
    assert run(astream(model(server, max_retries=3)))[-1][0].content == "finally"
    assert len(server.generation_requests) == 3
    server.reset()
    server.api_key = KEY
    server.add(*[Reply(status=500, code="InternalError", message="boom")] * 5)
    with pytest.raises(ModelServiceError) as info:
        run(astream(model(server, max_retries=2)))
    assert len(server.generation_requests) == 3
    assert info.value.code == "InternalError" and info.value.retryable and "boom" in info.value.message


def test_gateway_html_error_is_retried_and_shortened(server: DashScopeServer) -> None:
    page = "<html>" + "Bad gateway. " * 500 + "</html>"
    server.add(Reply(status=502, body=page), "through", Reply(status=502, body=page))
    assert run(model(server).achat(USER, stream=False))[0].content == "through"
    with pytest.raises(ModelServiceError) as info:
        run(astream(model(server, max_retries=0)))
    assert info.value.code == "502" and info.value.retryable and info.value.message.startswith("<html>Bad gateway.")
    assert len(info.value.message) < 1100


def test_invalid_key_is_not_retried_and_never_shown(server: DashScopeServer) -> None:
    bad = "sk-wrong-key-987654321"
    with pytest.raises(ModelServiceError) as info:
        run(astream(model(server, key=bad)))
    assert len(server.generation_requests) == 1
    assert info.value.code == "InvalidApiKey" and not info.value.retryable
    assert bad not in str(info.value) and bad not in repr(info.value.args)


def test_context_too_long_is_not_retried(server: DashScopeServer) -> None:
    server.add(Reply(status=400, code="InvalidParameter", message="Range of input length should be [1, 129024]"))
    with pytest.raises(ModelServiceError) as info:
        run(astream(model(server)))
    assert info.value.code == "context_too_long" and not info.value.retryable
    assert len(server.generation_requests) == 1


def test_error_event_in_the_stream(server: DashScopeServer) -> None:
    server.add(Reply(text="abcdefgh", error_after=1, code="InternalError.Algo", message="model crashed"))
    with pytest.raises(ModelServiceError) as info:
        run(astream(model(server)))
    assert info.value.partial and info.value.code == "InternalError.Algo" and info.value.retryable
    assert info.value.message == "model crashed (in the stream, request r-1)"
    server.add(Reply(text="x", error_after=0, code="Throttling.AllocationQuota"), "after throttling")
    assert run(astream(model(server)))[-1][0].content == "after throttling"


def test_dropped_streams(server: DashScopeServer) -> None:
    server.add(Reply(text="lost", drop_after=0), "second try")
    assert run(astream(model(server)))[-1][0].content == "second try"
    assert len(server.generation_requests) == 2
    server.add(Reply(text="abcdefghijkl", drop_after=2), "never replayed")
    seen = []

    async def go():
        async for rsp in model(server).achat(USER):
            seen.append(rsp[0].content)

    with pytest.raises(ModelServiceError) as info:
        run(go())
    assert seen == ["abcd", "abcdefgh"]
    assert info.value.partial and info.value.code == "connection_error" and info.value.retryable
    assert len(server.generation_requests) == 3 and server.pending == 1


def test_a_stalled_stream_times_out(server: DashScopeServer) -> None:
    server.add(Reply(text="abcdefgh", interval=3.0))
    with pytest.raises(ModelServiceError) as info:
        run(astream(model(server, request_timeout=0.3, max_retries=0)))
    assert info.value.code == "timeout" and info.value.retryable and info.value.partial


def test_connection_refused_is_retryable_and_bounded() -> None:
    with DashScopeServer() as gone:
        llm = model(gone, max_retries=1)
    with pytest.raises(ModelServiceError) as info:
        run(llm.achat(USER, stream=False))
    assert info.value.code == "connection_error" and info.value.retryable and KEY not in str(info.value)


# ---- the caller stops reading: the HTTP stream closes -----------------------------------------------------


def test_closing_the_stream_closes_the_connection(server: DashScopeServer) -> None:
    server.add(Reply(text="x" * 400, chunk_size=1, interval=0.02))

    async def go():
        stream = model(server).achat(USER)
        first = await stream.__anext__()
        await stream.aclose()
        # the server sees the abort while this loop still runs (not only when asyncio.run() ends it)
        return first, await asyncio.to_thread(server.wait_done, 0, DEADLINE)

    first, outcome = run(go())
    assert first[0].content == "x" and outcome == "aborted"


def test_cancelling_the_task_closes_the_connection(server: DashScopeServer) -> None:
    server.add(Reply(text="y" * 400, chunk_size=1, interval=0.02))
    bot = BasicAgent(
        llm={"model": "qwen-plus", "model_server": "dashscope", "api_key": KEY, "base_url": server.base_url}
    )

    async def go():
        got_one = asyncio.Event()

        async def consume():
            async for _ in bot.arun([{"role": "user", "content": "hi"}]):
                got_one.set()

        task = asyncio.create_task(consume())
        await got_one.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await asyncio.to_thread(server.wait_done, 0, DEADLINE)

    assert run(go()) == "aborted"

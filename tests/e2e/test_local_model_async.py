"""The embedded model under `arun()`: llama.cpp's server in this process, spoken to over httpx.AsyncClient."""

from __future__ import annotations

import asyncio
import logging

import pytest

from chatagent import BasicAgent
from chatagent.llm.local import LocalModel, LocalServer, get_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

GREEDY = {"temperature": 0, "max_tokens": 24}
QUESTION = [{"role": "user", "content": "Who wrote Romeo and Juliet?"}]
SYSTEM = "You are a helpful assistant. Answer the question directly and briefly."


@pytest.fixture(scope="module")
def local_server() -> LocalServer:
    return get_server()


def test_arun_streams_the_same_answer_as_run(local_server: LocalServer) -> None:
    bot = BasicAgent(llm={"model_type": "local", "generate_cfg": GREEDY}, system_message=SYSTEM)
    assert isinstance(bot.llm, LocalModel) and bot.llm.server is local_server
    expected = list(bot.run(QUESTION))[-1]

    async def go():
        run = bot.arun(QUESTION)
        texts = [rsp[-1]["content"] async for rsp in run]
        return texts, run.usage

    texts, usage = asyncio.run(asyncio.wait_for(go(), 90))
    print("arun answer:", texts[-1])
    assert len(texts) > 3, "the answer should arrive in pieces"
    assert all(texts[i + 1].startswith(texts[i]) for i in range(len(texts) - 1))
    assert texts[-1] == expected[-1]["content"] and "Shakespeare" in texts[-1]
    assert 0 < usage.completion_tokens <= GREEDY["max_tokens"] and usage.prompt_tokens > 0


def test_back_to_back_async_requests_need_no_retries(
    local_server: LocalServer, caplog: pytest.LogCaptureFixture
) -> None:
    """llama.cpp may close a connection after a stream: no request may land on a dead one (no retry warnings)."""
    llm = LocalModel({"generate_cfg": {"max_tokens": 3}})

    async def go():
        for _ in range(4):
            async for _ in llm.achat([{"role": "user", "content": "hi"}]):
                pass
            reply = await llm.achat([{"role": "user", "content": "hi"}], stream=False)
            assert reply[0]["role"] == "assistant"  # a Message or (dicts in) a dict

    with caplog.at_level(logging.WARNING, logger="chatagent"):
        asyncio.run(asyncio.wait_for(go(), 90))
    assert [r.getMessage() for r in caplog.records] == []


LOOPING = [{"role": "user", "content": "Write the word 'hello' one hundred times."}]
LOOPS = {"temperature": 0, "max_tokens": 200, "dry_multiplier": 0}  # greedy, no DRY: "Hello, hello, hello, ..."


def test_a_looping_answer_is_ended_under_arun_and_achat_as_under_run_and_chat(local_server: LocalServer) -> None:
    bot = BasicAgent(llm={"model_type": "local", "generate_cfg": LOOPS})
    llm = bot.llm
    assert isinstance(llm, LocalModel) and llm.server is local_server
    ran = list(bot.run(LOOPING))[-1][-1]
    assert ran["extra"]["stop_reason"] == "repetition", ran["content"][-80:]
    assert llm.chat(LOOPING, stream=False)[-1]["extra"]["stop_reason"] == "repetition"

    async def go():
        arun = [rsp async for rsp in bot.arun(LOOPING)][-1][-1]
        streamed = [rsp async for rsp in llm.achat(LOOPING)][-1][-1]
        whole = (await llm.achat(LOOPING, stream=False))[-1]
        return arun, streamed, whole

    arun, streamed, whole = asyncio.run(asyncio.wait_for(go(), 90))
    for answer in (arun, streamed, whole):
        assert answer["extra"]["stop_reason"] == "repetition", answer["content"][-80:]
    assert arun["content"] == ran["content"]

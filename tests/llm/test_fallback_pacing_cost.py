"""Models that never leave a run stuck: `llm=[a, b]` (FallbackModel) moves to the next model when one fails for
good, per call, streaming included (a reply already under way is never restarted elsewhere); `max_rpm` paces the
requests to a model across threads and tasks (counted per window on the loopback server, no timing assertion on
how fast anything was); `Usage` carries the cost where the model's prices are known, per run and per session."""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import threading
import time

import pytest

from chatagent import BasicAgent, ModelServiceError, Session, get_chat_model
from chatagent.llm.fallback import FallbackModel
from chatagent.llm.prices import PRICES, Price, price_of, set_price
from tests.support import processes
from tests.support.openai_server import OpenAIServer, Reply

HI = [{"role": "user", "content": "hi"}]


@pytest.fixture
def backup():
    with OpenAIServer().start() as server:
        yield server


def cfg(server: OpenAIServer, model: str = "m", **generate: object) -> dict:
    return {"model": model, "model_server": server.base_url, "api_key": "k",
            "generate_cfg": {"max_retries": 1, "retry_delay": 0.0, **generate}}  # fmt: skip


def text(reply: list) -> str:
    return "".join(m.get("content") or "" for m in reply)


def test_a_failure_for_good_moves_the_call_to_the_next_model(openai_server: OpenAIServer, backup) -> None:
    llm = get_chat_model([cfg(openai_server), cfg(backup)])
    assert isinstance(llm, FallbackModel)
    openai_server.add(Reply(status=400, error={"message": "unsupported parameter"}))  # not retryable
    backup.add("From the backup.")
    assert text(llm.chat(HI, stream=False)) == "From the backup."
    openai_server.add(Reply(status=503), Reply(status=503))  # retryable, retries used up
    backup.add(Reply(text="Streamed from the backup.", chunk_size=3))
    assert text(list(llm.chat(HI, stream=True))[-1]) == "Streamed from the backup."
    assert len(openai_server.chat_requests) == 3 and len(backup.chat_requests) == 2
    openai_server.add("The first one is back.")  # per call: the next call starts at the first model again
    assert text(llm.chat(HI, stream=False)) == "The first one is back."


def test_a_stream_that_sent_text_is_not_restarted_elsewhere(openai_server: OpenAIServer, backup) -> None:
    llm = get_chat_model([cfg(openai_server), cfg(backup)])
    openai_server.add(Reply(text="The answer is forty", chunk_size=4, drop_after=3))
    seen = []
    with pytest.raises(ModelServiceError) as failed:
        for part in llm.chat(HI, stream=True, delta_stream=True):
            seen += part
    assert failed.value.partial and seen and not backup.chat_requests  # it fails, marked partial
    openai_server.add(Reply(status=500), Reply(status=500))
    backup.add(Reply(status=401, error={"message": "bad key"}))
    with pytest.raises(ModelServiceError, match="bad key"):  # the last model's error
        llm.chat(HI, stream=False)


def test_achat_moves_the_call_and_keeps_a_started_stream_as_chat_does(openai_server: OpenAIServer, backup) -> None:
    llm = get_chat_model([cfg(openai_server), cfg(backup)])
    openai_server.add(Reply(status=400, error={"message": "unsupported parameter"}))  # not retryable
    backup.add("From the backup.")
    openai_server.add(Reply(text="The answer is forty", chunk_size=4, drop_after=3))

    async def both() -> tuple[list, list, ModelServiceError]:
        whole = await llm.achat(HI, stream=False)
        seen: list = []
        with pytest.raises(ModelServiceError) as failed:
            async for part in llm.achat(HI, stream=True, delta_stream=True):
                seen += part
        return whole, seen, failed.value

    whole, seen, error = asyncio.run(both())
    assert text(whole) == "From the backup."
    assert error.partial and seen and len(backup.chat_requests) == 1  # the started stream was not restarted


def test_fallback_under_threads_and_tasks_and_in_an_agent(openai_server: OpenAIServer, backup) -> None:
    openai_server.add(Reply(status=400, error={"message": "down for good"}, repeat=True))
    backup.add(Reply(text="ok", repeat=True))
    bot = BasicAgent(llm=[cfg(openai_server), cfg(backup)])
    answers: list[str] = []
    failures: list[BaseException] = []

    def one() -> None:
        try:
            answers.append(bot.run_nonstream(HI)[-1]["content"])
        except BaseException as e:  # shown by the assertion below rather than lost in a thread
            failures.append(e)

    threads = [threading.Thread(target=one) for _ in range(6)]
    for t in threads:
        t.start()

    async def tasks() -> list:
        async def ask() -> str:
            return (await bot.arun_nonstream(HI))[-1]["content"]

        return await asyncio.gather(*(ask() for _ in range(6)))

    answers += asyncio.run(tasks())
    for t in threads:
        t.join(60)
    assert not failures, failures
    assert answers == ["ok"] * 12  # every call answered by the backup (a connection reset may add a retry)
    assert len(openai_server.chat_requests) >= 12 and len(backup.chat_requests) >= 12


def test_max_rpm_paces_requests_across_threads_and_tasks(openai_server: OpenAIServer) -> None:
    openai_server.add(Reply(text="ok", repeat=True))
    rpm = 600  # one request every 0.1 s
    models = [get_chat_model(cfg(openai_server, max_rpm=rpm)) for _ in range(2)]  # two objects, one model: one pace
    started = time.monotonic()

    def one(k: int) -> None:
        models[k % 2].chat(HI, stream=False)

    threads = [threading.Thread(target=one, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()

    async def tasks() -> None:
        await asyncio.gather(*(models[k % 2].achat(HI, stream=False) for k in range(6)))

    asyncio.run(tasks())
    for t in threads:
        t.join(60)
    arrived = sorted(r.at for r in openai_server.chat_requests)
    assert len(arrived) == 12
    # each request takes its own 0.1 s slot and none is sent before it, so the k-th to arrive came no sooner than
    # k slots after the start (a loaded machine only delays requests: it cannot make this fail)
    early = [k for k, at in enumerate(arrived) if at < started + k * 60 / rpm - 1e-3]
    assert not early, f"requests {early} arrived before their slot"


def test_cost_per_run_per_session_and_overrides(openai_server: OpenAIServer, tmp_path) -> None:
    assert price_of("gpt-4o-mini-2024-07-18") == PRICES["gpt-4o-mini"] and price_of("openai/gpt-4o") == PRICES["gpt-4o"]
    assert price_of("my-own-model") is None
    usage = {"prompt_tokens": 1000, "completion_tokens": 500}
    openai_server.add(Reply(text="a", usage=usage, repeat=True))
    bot = BasicAgent(llm=cfg(openai_server, "gpt-4o-mini"))
    session = Session("costs", f"sqlite:///{tmp_path}/s.db")
    for _ in range(2):
        run = bot.run(HI, session=session)
        list(run)
        assert run.usage.cost == pytest.approx((1000 * 0.15 + 500 * 0.6) / 1e6)
    assert session.usage.cost == pytest.approx(2 * (1000 * 0.15 + 500 * 0.6) / 1e6)
    assert session.usage.prompt_tokens == 2000 and session.usage.calls == 2
    priced = BasicAgent(llm=cfg(openai_server, "my-own-model", price={"input": 1.0, "output": 2.0}))
    run = priced.run(HI)
    list(run)
    assert run.usage.cost == pytest.approx(2000 / 1e6)
    unpriced = BasicAgent(llm=cfg(openai_server, "my-own-model"))
    run = unpriced.run(HI)
    list(run)
    assert run.usage.cost is None and run.usage.prompt_tokens == 1000
    set_price("my-own", input=3.0, output=0.0)
    gpt_4o_mini = PRICES["gpt-4o-mini"]
    try:
        run = unpriced.run(HI)
        list(run)
        assert run.usage.cost == pytest.approx(3000 / 1e6)
    finally:
        PRICES.pop("my-own")
        set_price("gpt-4o-mini", **dataclasses.asdict(gpt_4o_mini))  # as it was, cache prices too (clears the lookups)
    with pytest.raises(ValueError, match="a price is"):
        BasicAgent(llm=cfg(openai_server, "x", price={"input": -1})).run_nonstream(HI)
    assert Price(1, 1).cost(10**6, 0) == 1.0


def test_the_http_stack_is_loaded_with_the_model_not_by_its_first_callers() -> None:
    """Threads and tasks making a model's first calls at once imported httpx from several threads, and CPython's
    import locks handed one of them a half-initialised module (the test above failed ~1 run in 20 under load):
    the model's maker imports it."""
    code = (
        "import sys\n"
        "from chatagent.llm import get_chat_model\n"
        "assert 'httpx' not in sys.modules\n"
        "get_chat_model({'model': 'm', 'model_server': 'http://127.0.0.1:9/v1', 'api_key': 'k'})\n"
        "assert 'httpx' in sys.modules and hasattr(sys.modules['httpx'], 'Timeout')\n"
    )
    done = processes.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]

"""Bursts: many runs at once against one server. Retries share a budget per backend and their warnings are few;
connections are made a few at a time, the others waiting their turn without their connect timeout running."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest

from chatagent import BasicAgent, ModelServiceError
from chatagent.llm import retry
from chatagent.llm.http_pool import CONNECTING, ShardedTransport
from tests.support.openai_server import OpenAIServer, Reply

pytestmark = pytest.mark.timeout(120)
RUNS = 60
USER = [{"role": "user", "content": "hi"}]


@pytest.fixture
def failing_server():
    """A server of its own (its own retry budget) that answers every request with a 503."""
    with OpenAIServer() as server:
        server.add(Reply(status=503, error={"message": "overloaded"}, repeat=True))
        yield server


def test_a_burst_of_failures_spends_the_backends_retry_budget_not_max_retries_each(
    failing_server: OpenAIServer, monkeypatch, caplog
) -> None:
    """60 runs at once against a server that fails them all made 60 * (1 + 3) requests and logged a warning per
    retry (180 lines); now the retries come out of the server's budget (its reserve, and a fifth of a retry per
    request) and past a few warnings the lines are held back."""
    monkeypatch.setattr(retry.RetryBudget, "__init__", _no_refill(retry.RetryBudget.__init__))
    monkeypatch.setattr(retry, "LOG_PER_SECOND", 0.0)  # what the test counts does not depend on how long it took
    bot = BasicAgent(
        llm={
            "model": "m",
            "model_server": failing_server.base_url,
            "api_key": "k",
            "generate_cfg": {"max_retries": 3, "retry_delay": 0.001},
        }  # fmt: skip
    )

    async def one() -> BaseException | None:
        try:
            await bot.arun_nonstream(USER)
        except ModelServiceError as e:
            return e
        return None

    async def burst() -> list[BaseException | None]:
        return await asyncio.gather(*(one() for _ in range(RUNS)))

    with caplog.at_level(logging.WARNING, logger="chatagent.llm"):
        errors = asyncio.run(asyncio.wait_for(burst(), 100))
    assert all(isinstance(e, ModelServiceError) and e.code == 503 for e in errors), errors
    budget = retry.RetryBudget()
    most = RUNS + budget.reserve + RUNS * budget.ratio
    assert RUNS < len(failing_server.chat_requests) <= most < RUNS * 4
    warnings = [r for r in caplog.records if r.name == "chatagent.llm" and "overloaded" in r.getMessage()]
    assert 0 < len(warnings) <= retry.LOG_BURST + 1  # the burst's first few, and one standing for the rest
    assert warnings[-1].args[-1] > 1, warnings[-1].getMessage()  # (how many failures it stands for)


def _no_refill(init):
    def without_refill(self, reserve: float = 20.0, per_second: float = 10.0, ratio: float = 0.2) -> None:
        init(self, reserve, 0.0, ratio)

    return without_refill


class CountedConnects(ShardedTransport):
    """Counts the TCP connections being made at once, under the transport's gate."""

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self.now = self.peak = self.made = 0

    def add_pool(self) -> None:
        super().add_pool()
        gate = self._pools[-1]._pool._network_backend  # the gate around httpcore's backend
        inner = gate._backend
        outer = self

        class Counting:
            async def connect_tcp(self, *args, **kwargs):
                outer.now += 1
                outer.peak = max(outer.peak, outer.now)
                try:
                    await asyncio.sleep(0.005)  # a connection that takes a moment, as on a busy machine
                    return await inner.connect_tcp(*args, **kwargs)
                finally:
                    outer.now -= 1
                    outer.made += 1

            def __getattr__(self, name):
                return getattr(inner, name)

        gate._backend = Counting()


def test_a_burst_of_requests_makes_its_connections_a_few_at_a_time(openai_server: OpenAIServer) -> None:
    """200 requests at once opened 200 connections at once, each connect timeout running while the busy event
    loop got round to it (1,000 runs: 974 failed with 'no answer in time'); now at most CONNECTING are being made
    at any moment and the others wait their turn, every request answered."""
    openai_server.add(Reply(text="hello", repeat=True))
    transport = CountedConnects()
    body = {"model": "m", "messages": USER, "stream": True}

    async def burst() -> list[str]:
        async with httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(60, connect=10)) as client:

            async def one() -> str:
                async with client.stream("POST", openai_server.base_url + "/chat/completions", json=body) as r:
                    return (await r.aread()).decode()

            return await asyncio.gather(*(one() for _ in range(200)))

    answers = asyncio.run(asyncio.wait_for(burst(), 100))
    assert len(answers) == 200 and all(a.rstrip().endswith("data: [DONE]") for a in answers)
    assert transport.made >= CONNECTING * 2  # a burst, not a few connections reused
    assert transport.peak <= CONNECTING, transport.peak

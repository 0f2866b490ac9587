"""ShardedTransport: concurrent requests spread over small connection pools; one at a time reuses one connection."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest

from chatagent.llm.http_pool import ShardedTransport
from tests.support.openai_server import OpenAIServer, Reply

DEADLINE = 20
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, DEADLINE))


async def stream_text(client: httpx.AsyncClient, url: str, tag: str = "") -> str:
    async with client.stream("POST", url + "/chat/completions", json=BODY, headers={"x-tag": tag}) as r:
        return (await r.aread()).decode()


class PoolOfTag(ShardedTransport):
    """Records which pool served each request, by its `x-tag` header."""

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self.pool_of: dict[str, int] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        self.pool_of[request.headers["x-tag"]] = response.stream._pool  # type: ignore[attr-defined]
        return response


def test_concurrent_requests_fill_pools_in_turn_and_are_counted_off(openai_server: OpenAIServer) -> None:
    barrier = threading.Barrier(5)

    def gated(request):
        barrier.wait(DEADLINE)  # all five are in flight at once
        return Reply(text="hello", chunk_size=100)

    openai_server.add(*[gated] * 5, *[Reply(text="after", chunk_size=100)] * 2)
    transport = PoolOfTag(per_pool=2)

    async def go():
        async with httpx.AsyncClient(transport=transport) as client:
            bodies = await asyncio.gather(*(stream_text(client, openai_server.base_url, f"c{i}") for i in range(5)))
            pools, busy = len(transport._pools), list(transport._busy)
            later = [await stream_text(client, openai_server.base_url, f"l{i}") for i in range(2)]
            return bodies, pools, busy, later, list(transport._busy)

    bodies, pools, busy, later, busy_after = run(go())
    assert all("hello" in b for b in bodies) and all("after" in b for b in later)
    assert pools == 3 and busy == [0, 0, 0] and busy_after == [0, 0, 0]
    peer = {r.headers["x-tag"]: r.peer for r in openai_server.requests}
    pool_of = transport.pool_of
    assert sorted(pool_of[f"c{i}"] for i in range(5)) == [0, 0, 1, 1, 2]  # at most two per pool
    assert len({peer[f"c{i}"] for i in range(5)}) == 5  # five connections
    first_pool = {peer[f"c{i}"] for i in range(5) if pool_of[f"c{i}"] == 0}
    assert pool_of["l0"] == pool_of["l1"] == 0  # one at a time: the first pool's connection, reused
    assert peer["l0"] == peer["l1"] and peer["l0"] in first_pool


def test_a_failed_request_is_counted_off() -> None:
    with OpenAIServer() as gone:
        url = gone.base_url
    transport = ShardedTransport(per_pool=1)

    async def go():
        async with httpx.AsyncClient(transport=transport) as client:
            for _ in range(3):
                with pytest.raises(httpx.ConnectError):
                    await stream_text(client, url)
        return len(transport._pools), transport._busy

    assert run(go()) == (1, [0])

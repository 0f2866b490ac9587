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


# -- shared clients: what a new agent costs the event loop ---------------------------------------------------------

CA_LOADS = {"load_verify_locations", "load_default_certs", "set_default_verify_paths"}


class LoopWork:
    """Counts, per thread, the CA-bundle loads (C calls) and `httpx.AsyncClient`s made while installed: on the
    calling thread (the event loop's) and on the threads started meanwhile (the workers)."""

    def __init__(self) -> None:
        self.loop_thread = threading.get_ident()
        self.counts: dict[tuple[bool, str], int] = {}
        self._lock = threading.Lock()

    def _profile(self, frame, event, arg) -> None:
        if event == "c_call" and getattr(arg, "__name__", "") in CA_LOADS:
            what = "ca_load"
        elif event == "call" and frame.f_code is httpx.AsyncClient.__init__.__code__:
            what = "client"
        else:
            return
        key = (threading.get_ident() == self.loop_thread, what)
        with self._lock:
            self.counts[key] = self.counts.get(key, 0) + 1

    def on_loop(self, what: str) -> int:
        return self.counts.get((True, what), 0)

    def anywhere(self, what: str) -> int:
        return self.on_loop(what) + self.counts.get((False, what), 0)

    def __enter__(self) -> LoopWork:
        import sys

        threading.setprofile(self._profile)
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc) -> None:
        import sys

        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


def test_fifty_new_agents_build_no_client_and_load_no_certificates_on_the_loop(openai_server: OpenAIServer) -> None:
    """Each model used to build an httpx.AsyncClient, so an SSL context (~20 ms of CPU loading the CA bundle), on
    the event loop at its first call: 50 new agents stalled the loop for about a second. Now the models of one
    endpoint share one client per loop, built in a worker thread."""
    from chatagent import BasicAgent

    openai_server.add(Reply(text="hello", repeat=True))

    async def first_call(i: int) -> str:
        bot = BasicAgent(llm={"model": "m", "model_server": openai_server.base_url, "api_key": f"key-{i}"})
        out = ""
        async for rsp in bot.arun([{"role": "user", "content": "hi"}]):
            out = rsp[-1]["content"]
        return out

    async def fifty() -> list[str]:
        return await asyncio.gather(*(first_call(i) for i in range(50)))

    with LoopWork() as work:
        answers = run(fifty())
    assert answers == ["hello"] * 50
    assert work.on_loop("client") == 0 and work.on_loop("ca_load") == 0, work.counts
    assert work.anywhere("client") == 1, work.counts  # one client for the 50 models, made off the loop
    keys = {r.headers["authorization"] for r in openai_server.requests}
    assert keys == {f"Bearer key-{i}" for i in range(50)}  # each model still sends its own key


def test_shared_clients_keep_no_cookies_and_each_loop_has_its_own(openai_server: OpenAIServer) -> None:
    """A cookie one model's server sets never reaches another model (another key) calling the same endpoint, and a
    client is never used on another event loop (asyncio.run twice)."""
    from chatagent import get_chat_model

    openai_server.add(
        Reply(text="one", headers={"Set-Cookie": "session=alice; Path=/"}), Reply(text="two"), Reply(text="three")
    )
    alice = get_chat_model({"model": "m", "model_server": openai_server.base_url, "api_key": "alice"})
    bob = get_chat_model({"model": "m", "model_server": openai_server.base_url, "api_key": "bob"})

    async def ask(llm) -> str:
        return (await llm.achat([{"role": "user", "content": "hi"}], stream=False))[-1]["content"]

    async def alice_then_bob() -> list[str]:
        return [await ask(alice), await ask(bob)]  # one loop: one client for both

    assert run(alice_then_bob()) == ["one", "two"]
    assert run(ask(alice)) == "three"  # another asyncio.run: another loop, another client
    assert [r.headers.get("cookie") for r in openai_server.requests] == [None, None, None]

"""Three `chatagent serve` replicas on one PostgreSQL behind HAProxy (tests/support/replicas.py), through real
processes: 300 concurrent streaming clients spread across them; one replica killed with SIGKILL while every
stream is open; its clients reconnect with `"resume": true` through the balancer and get their whole answers from
the stored checkpoints (each tool call ran once, no answer lost or doubled); a rolling restart (SIGTERM, one
replica after another, each started again) loses no request; a call paused on one replica is approved on
another. The model is the loopback OpenAI-compatible server, holding every stream open at a gate until the kill.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from chatagent.sessions import Session
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.postgres import PostgresCluster
from tests.support.replicas import Replicas, unavailable

CLIENTS = 300
DEADLINE = 300.0  # seconds any one phase may take (a loaded 2-core machine runs 300 streams slowly)
KEY = "replica-key"
PRINCIPAL = "key:" + hashlib.sha256(KEY.encode()).hexdigest()[:16]  # the principal serve makes of the key

pytestmark = [pytest.mark.skipif(unavailable() is not None, reason=unavailable() or ""), pytest.mark.timeout(1200)]


def answer(i: int) -> str:
    return f"Answer for client {i}: " + " ".join(f"w{i}x{k}" for k in range(12)) + "."


class Model:
    """Replies computed from each request: a call of `note` first, then the client's answer, held after its
    first events at `gate` (set once the replica is killed)."""

    def __init__(self, server: OpenAIServer) -> None:
        self.server, self.gate = server, threading.Event()

    def __call__(self, request: Any) -> Reply | str:
        msgs = request.json["messages"]
        asked = next(m["content"] for m in msgs if m["role"] == "user")
        kind, *rest = asked.split()
        if kind == "rolling":
            return Reply(text=f"Rolling answer {' '.join(rest)}.", chunk_size=6, interval=0.05)
        if kind == "refund":
            return Reply(tool_calls=[("refund", {"order": rest[0]})]) if msgs[-1]["role"] != "tool" else "Refunded."
        i = int(rest[0])
        if msgs[-1]["role"] != "tool":
            return Reply(tool_calls=[("note", {"client": f"c{i}"})])
        return Reply(text=answer(i), chunk_size=16, gate=self.gate, gate_after=2, stall=DEADLINE)

    def queue(self, n: int) -> None:
        self.server.add(*[self] * n)


@pytest.fixture(scope="module")
def cluster(postgres: PostgresCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Replicas, Model]]:
    server = OpenAIServer().start()
    directory = tmp_path_factory.mktemp("replicas")
    env = {"REPLICA_MODEL_URL": server.base_url, "REPLICA_LEDGER": str(directory / "ledger")}
    replicas = Replicas(postgres.new_store_url(), "tests.support.replica_agent:make", directory, env)
    try:
        yield replicas.start(), Model(server)
    finally:
        replicas.close()
        server.close()


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def _stream(
    http: httpx.AsyncClient, body: dict, started: asyncio.Event | None = None
) -> tuple[int, str, bool, str]:
    """(status, the text streamed, whether the stream ended with [DONE], the replica that answered); status 0 when
    the connection failed before an answer began."""
    text: list[str] = []
    status, replica = 0, ""
    try:
        async with http.stream("POST", "/v1/chat/completions", json=body) as r:
            status, replica = r.status_code, r.headers.get("x-replica", "")
            if status != 200:
                await r.aread()
                return status, "", False, replica
            async for line in r.aiter_lines():
                if not line.startswith("data: "):
                    continue
                if line == "data: [DONE]":
                    return status, "".join(text), True, replica
                delta = orjson.loads(line[6:])["choices"][0]["delta"].get("content") or ""
                if delta:
                    text.append(delta)
                    if started is not None and not started.is_set():
                        started.set()
    except (httpx.RemoteProtocolError, httpx.ReadError, httpx.ConnectError) as e:
        text.append(f" <{type(e).__name__}>")
    return status, "".join(text), False, replica


async def _resumed(http: httpx.AsyncClient, session_id: str) -> str:
    """The whole answer of a session's turn, asked again with "resume" until a replica gives it (a 409 while the
    killed replica's lock on the conversation is being released, a refused connection while the balancer learns)."""
    body = {"model": "replica", "session_id": session_id, "resume": True, "stream": True}
    end = asyncio.get_running_loop().time() + DEADLINE
    while True:
        status, text, done, _ = await _stream(http, body)
        if status == 200 and done:
            return text
        assert status in (0, 409, 502, 503), (status, text)
        assert asyncio.get_running_loop().time() < end, f"{session_id} was not resumed within {DEADLINE} s"
        await asyncio.sleep(0.2)


def test_300_streams_one_replica_killed_mid_stream_its_clients_resume_through_the_balancer(cluster) -> None:
    replicas, model = cluster
    model.gate.clear()
    model.queue(CLIENTS * 3)

    async def main() -> tuple[list[tuple[int, str, bool, str]], dict[int, str]]:
        limits = httpx.Limits(max_connections=CLIENTS * 2, max_keepalive_connections=0)
        headers = {"Authorization": f"Bearer {KEY}"}
        async with httpx.AsyncClient(base_url=replicas.url, headers=headers, limits=limits,
                                     timeout=httpx.Timeout(DEADLINE)) as http:  # fmt: skip
            started = [asyncio.Event() for _ in range(CLIENTS)]
            firsts = [asyncio.ensure_future(_stream(http, {"model": "replica", "session_id": f"s{i}", "stream": True,
                      "messages": [{"role": "user", "content": f"client {i}"}]}, started[i])) for i in range(CLIENTS)]  # fmt: skip
            await asyncio.wait_for(asyncio.gather(*(e.wait() for e in started)), DEADLINE)  # every stream is open
            await asyncio.to_thread(replicas.kill, 0)  # SIGKILL, mid-stream for about a third of them
            model.gate.set()
            first = await asyncio.wait_for(asyncio.gather(*firsts), DEADLINE)
            cut = [i for i, (_, _, done, _) in enumerate(first) if not done]
            again = await asyncio.wait_for(asyncio.gather(*(_resumed(http, f"s{i}") for i in cut)), DEADLINE)
            return first, dict(zip(cut, again, strict=True))

    try:
        first, resumed = asyncio.run(main())
    finally:
        model.gate.set()
    assert [f[0] for f in first] == [200] * CLIENTS, [f[:1] + f[2:] for f in first if f[0] != 200][:5]
    served = {replica for _, _, _, replica in first}
    assert served == {"r0", "r1", "r2"}  # the balancer spread them
    cut = set(resumed)
    assert cut and cut == {i for i, (_, _, _, replica) in enumerate(first) if replica == "r0"}  # the killed one's
    for i, (status, text, _, _) in enumerate(first):
        assert status == 200
        got = resumed[i] if i in cut else text
        assert got == answer(i), (i, got)  # whole: the resumed stream is the turn as if uninterrupted, once
        if i in cut:
            assert answer(i).startswith(text.split(" <")[0])  # what it had seen before the cut was the beginning
    ledger = Path(replicas.env["REPLICA_LEDGER"])
    assert sorted(line.split()[0] for line in _lines(ledger)) == sorted(f"c{i}" for i in range(CLIENTS))
    assert len(_lines(Path(str(ledger) + ".attempts"))) == CLIENTS  # no tool call ran twice
    for i in sorted(cut)[:20]:
        s = Session(f"s{i}", replicas.store, user=PRINCIPAL)
        assert s.pending_turn is None
        assert [m["role"] for m in s.messages()] == ["user", "assistant", "function", "assistant"]
    replicas.restart(0)


def test_a_rolling_restart_loses_no_request(cluster) -> None:
    replicas, model = cluster
    model.queue(20_000)  # 30 clients ask until the restarts are done: ~75 each on a quiet machine, more when faster
    stop = threading.Event()

    async def client(http: httpx.AsyncClient, k: int, results: list[tuple[str, str, bool, int]]) -> None:
        n = 0
        while not stop.is_set():
            body = {"model": "replica", "stream": True, "messages": [{"role": "user", "content": f"rolling {k} {n}"}]}
            status, text, done, _ = await _stream(http, body)
            results.append((f"Rolling answer {k} {n}.", text, done, status))
            n += 1

    async def main() -> list[tuple[str, str, bool, int]]:
        results: list[tuple[str, str, bool, int]] = []
        async with httpx.AsyncClient(base_url=replicas.url, headers={"Authorization": f"Bearer {KEY}"},
                                     timeout=httpx.Timeout(DEADLINE)) as http:  # fmt: skip
            clients = [asyncio.ensure_future(client(http, k, results)) for k in range(30)]
            for i in range(replicas.n):
                assert await asyncio.to_thread(replicas.terminate, i) == 0  # drained, then stopped by itself
                await asyncio.to_thread(replicas.restart, i)
            stop.set()
            await asyncio.wait_for(asyncio.gather(*clients), DEADLINE)
        return results

    results = asyncio.run(main())
    assert len(results) > 30
    lost = [r for r in results if r[3] != 200 or not r[2] or r[0] != r[1]]
    assert not lost, lost[:5]


def test_a_call_paused_on_one_replica_is_approved_on_another(cluster) -> None:
    replicas, model = cluster
    model.queue(40)
    headers = {"Authorization": f"Bearer {KEY}"}
    for k in range(6):
        sid = f"refund-{k}"
        paused = httpx.post(f"{replicas.url}/v1/chat/completions", headers=headers, timeout=DEADLINE,
                            json={"model": "replica", "session_id": sid,
                                  "messages": [{"role": "user", "content": f"refund R{k}"}]})  # fmt: skip
        assert (
            paused.status_code == 200
            and paused.json()["choices"][0]["message"]["chatagent"]["pending_approval"][0]["name"] == "refund"
        )
        here = int(paused.headers["x-replica"][1:])
        other = replicas.replica_url((here + 1) % replicas.n)  # another replica, straight
        decision = {"role": "user", "content": "", "extra": {"approval": True}}
        done = httpx.post(f"{other}/v1/chat/completions", headers=headers, timeout=DEADLINE,
                          json={"model": "replica", "session_id": sid, "messages": [decision]})  # fmt: skip
        assert done.status_code == 200, done.text
        assert done.json()["choices"][0]["message"]["content"] == "Refunded."
    refunds = _lines(Path(replicas.env["REPLICA_LEDGER"] + ".refunds"))
    assert refunds == [f"R{k}" for k in range(6)]  # each approved call ran once, on the replica that was asked


def test_a_replica_told_to_stop_is_unready_at_once_still_alive_and_exits_0_once_drained(cluster) -> None:
    replicas, _ = cluster
    proc = replicas.procs[1]
    assert proc is not None
    url = replicas.replica_url(1)
    assert httpx.get(f"{url}/readyz", timeout=DEADLINE).json() == {"status": "ready"}
    proc.terminate()  # SIGTERM: the balancer is told at once, the replica stops taking connections after its drain
    ready = httpx.get(f"{url}/readyz", timeout=DEADLINE)
    assert ready.status_code == 503 and ready.json() == {"status": "draining"}
    assert httpx.get(f"{url}/healthz", timeout=DEADLINE).json() == {"status": "ok"}  # alive: not to be restarted
    assert proc.wait(DEADLINE) == 0
    replicas.restart(1)
    assert httpx.get(f"{url}/readyz", timeout=DEADLINE).status_code == 200

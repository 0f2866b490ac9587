"""Readiness when the session store is down (issue 41), through real processes: two `chatagent serve` replicas on one
PostgreSQL behind HAProxy (tests/support/replicas.py), replica 0 reaching it through a TCP relay the test cuts.

Cut from its database, replica 0 answers `/readyz` 503 (alive on `/healthz`), the balancer sends every request to
replica 1, and a turn sent to replica 0 meanwhile gets a 503 `session_store_unavailable` at once, naming neither the
database's address nor its password; once the relay listens again replica 0 is ready and answers, the same process.
With the database server itself stopped, both replicas are unready and a turn gets the same error; started again,
both serve again, and the conversations stored before go on. A database that keeps the connections open but stops
answering (the relay holding every byte) makes the replica unready too, once its ping has waited 10 s (or its
store's answer_timeout, 5 s here, ended it), a turn sent to it then gets the same 503 once answer_timeout has
passed (rather than waiting as long as the database does), and it is ready again when the database answers. A replica told its store by $CHATAGENT_SESSION_STORE alone is unready while that store is
down, before any request has opened it. Every wait has a deadline.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import postgres as pg_support
from tests.support.openai_server import OpenAIServer
from tests.support.postgres import PostgresCluster
from tests.support.replicas import Replicas, unavailable, wait_until
from tests.support.tcp_relay import TcpRelay

KEY = "store-down-key"
PASSWORD = "pw-7f3a9c-secret"  # in the replicas' store URLs (the test server trusts loopback: it is not checked)
DEADLINE = 120.0  # seconds any one wait may take
ANSWER_TIMEOUT_S = 5  # replica 0's store URL: a call its database does not answer fails after this long

_why = unavailable() or pg_support.unavailable()
pytestmark = [pytest.mark.skipif(_why is not None, reason=_why or ""), pytest.mark.timeout(900)]


class Setup:
    def __init__(self, pg: PostgresCluster, relay: TcpRelay, replicas: Replicas, model: OpenAIServer) -> None:
        self.pg, self.relay, self.replicas, self.model = pg, relay, replicas, model


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    pg = PostgresCluster().start()  # a server of its own: these tests stop it
    model = OpenAIServer().start()
    relay = TcpRelay(pg.port).start()
    directory = tmp_path_factory.mktemp("store-down")
    direct = pg.new_store_url().replace("postgres@", f"postgres:{PASSWORD}@")
    relayed = direct.replace(f":{pg.port}/", f":{relay.port}/") + f"&answer_timeout={ANSWER_TIMEOUT_S}"
    env = {"REPLICA_MODEL_URL": model.base_url, "REPLICA_LEDGER": str(directory / "ledger")}
    replicas = Replicas(direct, "tests.support.replica_agent:make", directory, env, n=2, api_key=KEY,
                        stores=(relayed, direct))  # fmt: skip
    try:
        yield Setup(pg, relay, replicas.start(), model)
    finally:
        replicas.close()
        relay.cut()
        model.close()
        pg.stop()


def _echo(request: Any) -> str:
    asked = [m["content"] for m in request.json["messages"] if m["role"] == "user"]
    return f"Answer to {asked[-1]} ({len(asked)} asked)."


def _turn(url: str, session: str, text: str, stream: bool = False) -> httpx.Response:
    """One turn; a server that hangs fails it (the client's timeout)."""
    body = {
        "model": "replica",
        "session_id": session,
        "stream": stream,
        "messages": [{"role": "user", "content": text}],
    }
    return httpx.post(f"{url}/v1/chat/completions", headers={"Authorization": f"Bearer {KEY}"}, json=body,
                      timeout=DEADLINE)  # fmt: skip


def _until(check: Callable[[], bool], what: str) -> None:
    wait_until(check, DEADLINE, what)


def _ready(url: str) -> httpx.Response:
    return httpx.get(f"{url}/readyz", timeout=DEADLINE)


def _assert_store_unavailable(got: httpx.Response, setup: Setup) -> None:
    assert got.status_code == 503, got.text
    assert got.json()["error"]["code"] == "session_store_unavailable", got.text
    for secret in (PASSWORD, "postgresql", str(setup.pg.port), str(setup.relay.port), "search_path"):
        assert secret not in got.text and secret not in str(got.headers), (secret, got.text)


def _assert_answered(got: httpx.Response, text: str, asked: int) -> None:
    assert got.status_code == 200, got.text
    assert got.json()["choices"][0]["message"]["content"] == f"Answer to {text} ({asked} asked)."


def _logs_hold_no_password(replicas: Replicas) -> None:
    for i in range(replicas.n):
        log = (replicas.dir / f"replica{i}.log").read_text()
        assert PASSWORD not in log, log[-2000:]


def test_a_replica_cut_from_its_database_is_unready_its_requests_go_elsewhere_and_it_recovers_in_place(setup) -> None:
    replicas, relay = setup.replicas, setup.relay
    setup.model.add(*[_echo] * 40)
    r0, r1 = replicas.replica_url(0), replicas.replica_url(1)
    pid = replicas.procs[0].pid  # type: ignore[union-attr]
    _assert_answered(_turn(r0, "cut-before", "first"), "first", 1)

    relay.cut()  # the replica's connections end and its database's port refuses
    _until(lambda: _ready(r0).status_code == 503, "replica 0 unready")
    assert _ready(r0).json() == {"status": "unavailable"}
    assert httpx.get(f"{r0}/healthz", timeout=DEADLINE).json() == {"status": "ok"}  # alive: not to be restarted
    assert _ready(r1).json() == {"status": "ready"}
    _assert_store_unavailable(_turn(r0, "cut-during", "lost"), setup)
    _assert_store_unavailable(_turn(r0, "cut-during", "lost", stream=True), setup)

    # the balancer sees it (two failed checks) and sends everything to replica 1
    seen: list[tuple[int, str]] = []

    def only_replica_1() -> bool:
        got = _turn(replicas.url, f"cut-lb-{len(seen)}", "balanced")
        seen.append((got.status_code, got.headers.get("x-replica", "")))
        assert got.status_code == 200 or seen[-1] == (503, "r0"), (got.status_code, got.text)
        return [s for s in seen[-5:] if s == (200, "r1")] == [(200, "r1")] * 5

    _until(only_replica_1, "the balancer sending to replica 1 alone")
    for k in range(6):
        got = _turn(replicas.url, f"cut-after-{k}", "balanced")
        _assert_answered(got, "balanced", 1)
        assert got.headers["x-replica"] == "r1"

    relay.restore()
    _until(lambda: _ready(r0).status_code == 200, "replica 0 ready again")
    assert replicas.procs[0].pid == pid and replicas.procs[0].poll() is None  # type: ignore[union-attr]
    _assert_answered(_turn(r0, "cut-before", "second"), "second", 2)  # the conversation goes on
    _until(lambda: {_turn(replicas.url, "x", "y").headers.get("x-replica") for _ in range(4)} == {"r0", "r1"},
           "the balancer sending to replica 0 again")  # fmt: skip
    _logs_hold_no_password(replicas)


def test_the_database_stopped_every_replica_is_unready_and_both_serve_again_when_it_is_back(setup) -> None:
    replicas, pg = setup.replicas, setup.pg
    setup.model.add(*[_echo] * 40)
    urls = [replicas.replica_url(i) for i in range(replicas.n)]
    pids = [p.pid for p in replicas.procs if p is not None]
    _assert_answered(_turn(urls[1], "stopped-before", "first"), "first", 1)

    pg.halt()
    for url in urls:
        _until(lambda url=url: _ready(url).status_code == 503, f"{url} unready")
        assert _ready(url).json() == {"status": "unavailable"}
        assert httpx.get(f"{url}/healthz", timeout=DEADLINE).json() == {"status": "ok"}
        _assert_store_unavailable(_turn(url, "stopped-during", "lost"), setup)
        _assert_store_unavailable(_turn(url, "stopped-during", "lost", stream=True), setup)
    _until(lambda: _ready(replicas.url).status_code == 503, "the balancer with no replica up")

    pg.resume()
    for url in urls:
        _until(lambda url=url: _ready(url).status_code == 200, f"{url} ready again")
    assert [p.pid for p in replicas.procs if p is not None] == pids
    _assert_answered(_turn(urls[0], "stopped-before", "second"), "second", 2)  # stored before: goes on elsewhere
    _until(lambda: _ready(replicas.url).status_code == 200, "the balancer with replicas up")
    _assert_answered(_turn(replicas.url, "stopped-after", "third"), "third", 1)
    _logs_hold_no_password(replicas)


def test_a_replica_whose_database_stops_answering_is_unready_until_it_answers_again(setup) -> None:
    replicas, relay = setup.replicas, setup.relay
    setup.model.add(*[_echo] * 10)
    r0 = replicas.replica_url(0)
    _until(lambda: _ready(r0).status_code == 200, "replica 0 ready")
    _assert_answered(_turn(r0, "frozen-before", "first"), "first", 1)
    relay.freeze()  # connections stay open, nothing comes back: the replica's ping waits on it
    try:
        _until(lambda: _ready(r0).status_code == 503, "replica 0 unready while its database does not answer")
        assert _ready(r0).json() == {"status": "unavailable"}
        assert httpx.get(f"{r0}/healthz", timeout=DEADLINE).json() == {"status": "ok"}
        assert _ready(replicas.replica_url(1)).status_code == 200
        _assert_store_unavailable(_turn(r0, "frozen-during", "held"), setup)  # after answer_timeout, not never
        _assert_store_unavailable(_turn(r0, "frozen-during", "held", stream=True), setup)
    finally:
        relay.thaw()
    _until(lambda: _ready(r0).status_code == 200, "replica 0 ready again")
    _assert_answered(_turn(r0, "frozen-before", "second"), "second", 2)
    _logs_hold_no_password(replicas)


def test_a_replica_told_its_store_by_the_environment_is_unready_while_it_is_down_before_any_request(
    setup, tmp_path: Path
) -> None:
    pg = setup.pg
    setup.model.add(*[_echo] * 4)
    env = {"REPLICA_MODEL_URL": setup.model.base_url, "REPLICA_LEDGER": str(tmp_path / "ledger")}
    replicas = Replicas(pg.new_store_url(), "tests.support.replica_agent:make", tmp_path, env, n=1, api_key=KEY,
                        store_from_env=True)  # fmt: skip
    try:
        url = replicas.start().replica_url(0)  # no request yet: nothing has opened its store
        pg.halt()
        try:
            _until(lambda: _ready(url).status_code == 503, "the replica unready")
            _assert_store_unavailable(_turn(url, "env-during", "lost"), setup)
        finally:
            pg.resume()
        _until(lambda: _ready(url).status_code == 200, "the replica ready again")
        _assert_answered(_turn(url, "env-after", "first"), "first", 1)
    finally:
        replicas.close()

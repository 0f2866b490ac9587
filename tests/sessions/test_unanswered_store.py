"""A PostgreSQL server that keeps its connections open and answers nothing (chatagent.utils.sql_watch): a session
store's call, a run lock and a memory store's call each fail after the URL's `answer_timeout`, saying so without
the server's address or password; the next call, once the server answers again, works on a new connection; a turn
whose memory store stops answering is answered without memories. The database is a real PostgreSQL reached through
a TCP relay that holds every byte (tests/support/tcp_relay.py); every wait has a deadline."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from chatagent import Assistant, ScriptedLLM, Session
from chatagent.memories import LongTermMemory
from chatagent.memories.store import MemoryStore, MemoryStoreError
from chatagent.sessions.errors import SessionStoreError
from chatagent.utils.sql_watch import answer_timeout
from tests.support.postgres import PostgresCluster
from tests.support.tcp_relay import TcpRelay
from tests.support.threads import raised_within

PASSWORD = "pw-unanswered-9d2"


@pytest.fixture
def relayed(postgres: PostgresCluster) -> Iterator[tuple[str, TcpRelay]]:
    """A new store URL of `postgres` through a relay, with a password and answer_timeout=2; and the relay."""
    relay = TcpRelay(postgres.port).start()
    url = postgres.new_store_url().replace("postgres@", f"postgres:{PASSWORD}@")
    with relay:
        yield url.replace(f":{postgres.port}/", f":{relay.port}/") + "&answer_timeout=2", relay


def _says_unanswered(e: BaseException | None, kind: type[Exception]) -> None:
    assert isinstance(e, kind), repr(e)
    assert "no answer in 2 s" in str(e), str(e)
    assert PASSWORD not in str(e), str(e)  # (the URL is named, without its password, as every store error does)


def test_a_session_store_call_and_a_run_lock_fail_when_the_server_stops_answering_and_work_when_it_answers(
    relayed: tuple[str, TcpRelay],
) -> None:
    from chatagent.sessions.postgres import PostgresStore

    url, relay = relayed
    store = PostgresStore(url)
    assert store.answer_timeout == 2.0
    Session("before", user="alice", store=store).append([{"role": "user", "content": "hi"}])
    release = store.lock("alice", "held")  # the lock connection is open: the next lock asks the server
    relay.freeze()
    try:
        _says_unanswered(raised_within(lambda: store.count("alice")), SessionStoreError)
        _says_unanswered(raised_within(lambda: store.lock("alice", "other")), SessionStoreError)
    finally:
        relay.thaw()
    assert store.count("alice") == 1  # a new connection: the conversation is there
    release()
    store.lock("alice", "other")()
    store.close()


def test_a_memory_store_that_stops_answering_costs_the_turn_its_memories_not_the_answer(
    relayed: tuple[str, TcpRelay],
) -> None:
    url, relay = relayed
    mem = LongTermMemory(store=url, embedder=None)
    mem.for_user("alice").remember("Alice is allergic to peanuts.")
    llm = ScriptedLLM(["Apple slices."])
    bot = Assistant(llm=llm, memory=mem)
    events: list[Any] = []
    alice = Session("fri", user="alice")
    asked = [{"role": "user", "content": "Any peanut-free snack ideas?"}]
    relay.freeze()
    try:
        answered: list[Any] = []
        raised = raised_within(
            lambda: answered.append(bot.run_nonstream(asked, session=alice, callbacks=[events.append]))
        )
    finally:
        relay.thaw()
    assert raised is None, repr(raised)
    assert answered[0][-1]["content"] == "Apple slices."
    assert llm.calls[-1].messages[-1].text == "Any peanut-free snack ideas?"  # no memories came in
    failures = [e for e in events if e.kind == "progress" and e.error]
    assert failures and failures[0].data["memory"] == "recall", failures
    store = MemoryStore(url)
    _says_unanswered(raised_within(lambda: (relay.freeze(), store.version("alice"))), MemoryStoreError)
    relay.thaw()
    assert store.version("alice") >= 1  # the next call reconnects


def test_answer_timeout_is_taken_off_the_url_and_a_bad_one_is_a_clear_error() -> None:
    assert answer_timeout("postgresql://h/db") == ("postgresql://h/db", 30.0)
    assert answer_timeout("postgresql://h/db?options=-cx%3D1&answer_timeout=0") == (
        "postgresql://h/db?options=-cx%3D1",
        0.0,
    )
    for bad in ("soon", "-1", "nan"):
        with pytest.raises(ValueError, match="answer_timeout must be a number of seconds"):
            answer_timeout(f"postgresql://h/db?answer_timeout={bad}")
    pytest.importorskip("psycopg")
    from chatagent.sessions.postgres import PostgresStore

    with pytest.raises(SessionStoreError, match="bad PostgreSQL store URL") as info:
        PostgresStore(f"postgresql://app:{PASSWORD}@127.0.0.1:1/db?answer_timeout=soon")
    assert PASSWORD not in str(info.value)
    with pytest.raises(MemoryStoreError, match="bad memory store URL") as info:
        MemoryStore(f"postgresql://app:{PASSWORD}@127.0.0.1:1/db?answer_timeout=-2")
    assert PASSWORD not in str(info.value)

"""Long-term memory across replicas (issue 41): two `chatagent serve` replicas on one PostgreSQL behind HAProxy, their
agent's memory in a PostgreSQL store they share. What a client tells replica A is recalled when the same client asks
replica B, in a new conversation; another API key asking replica B (or A) gets none of it: the memory's user is the
served run's principal, on every replica."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.openai_server import OpenAIServer
from tests.support.postgres import PostgresCluster
from tests.support.replicas import Replicas, unavailable

ALICE, BOB = "alice-replica-key-0123", "bob-replica-key-456789"
CODE = "4711-ZEBRA"

pytestmark = [pytest.mark.skipif(unavailable() is not None, reason=unavailable() or ""), pytest.mark.timeout(600)]


def reply(request: Any) -> str:
    """The loopback model: says the code when the memories it was shown (before the question) hold it."""
    shown = " ".join(m["content"] for m in request.json["messages"] if isinstance(m.get("content"), str))
    recalled, _, asked = shown.rpartition("</untrusted-data>")  # what the memory recalled, marked, then the question
    if "my locker code is" in asked:
        return "I will keep that in mind."
    return f"Your locker code is {CODE}." if CODE in recalled else "I do not know your locker code."


@pytest.fixture(scope="module")
def replicas(postgres: PostgresCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Replicas, Any]]:
    server = OpenAIServer().start()
    directory = tmp_path_factory.mktemp("memories")
    env = {"REPLICA_MODEL_URL": server.base_url, "REPLICA_MEMORY_STORE": postgres.new_store_url()}
    cluster = Replicas(postgres.new_store_url(), "tests.support.replica_agent:make_remembering", directory, env, n=2,
                       api_key=f"{ALICE}\n{BOB}")  # fmt: skip
    try:
        yield cluster.start(), server
    finally:
        cluster.close()
        server.close()


def ask(url: str, key: str, session: str, text: str) -> str:
    got = httpx.post(f"{url}/v1/chat/completions", headers={"Authorization": f"Bearer {key}"}, timeout=120,
                     json={"model": "remembering", "session_id": session,
                           "messages": [{"role": "user", "content": text}]})  # fmt: skip
    assert got.status_code == 200, got.text
    return got.json()["choices"][0]["message"]["content"]


def test_what_a_client_told_one_replica_another_recalls_for_it_alone(replicas) -> None:
    cluster, server = replicas
    server.add(*[reply] * 10)
    a, b = cluster.replica_url(0), cluster.replica_url(1)
    assert ask(a, ALICE, "monday", f"Note this: my locker code is {CODE}.") == "I will keep that in mind."
    assert ask(b, ALICE, "friday", "What is my locker code?") == f"Your locker code is {CODE}."
    for url in (b, a):  # another principal, on either replica, in a conversation of its own
        assert ask(url, BOB, "bobs", "What is my locker code?") == "I do not know your locker code."
    shown = [" ".join(str(m.get("content")) for m in r.json["messages"]) for r in server.chat_requests]
    assert len(shown) == 4 and '<untrusted-data source="memory">' in shown[1]  # recalled as memory, marked
    assert not any(CODE in s for s in shown[2:])

"""The CrewAI face's memory over `chatagent serve` is the run's principal's (issue 36, item 1 on a newer surface): a
`chatagent.crewai.Crew(memory=...)` served as an agent, attacked by two clients through real HTTP on loopback. The
model repeats everything it was given, so an answer holding another's fact is a leak.

Before the fix the crew's memory took its user from the run's session alone: a keyed request without a session read
and wrote the machine's local user's memory (the alarm code came back; the client's note landed in it), and without
keys every client outside a conversation shared it too.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from chatagent.crewai import LLM, Agent, Crew, Task
from chatagent.crewai.memory import Memory
from chatagent.memories.longterm import LongTermMemory
from chatagent.server.runner import AgentServer
from tests.support.loopback import Request
from tests.support.openai_server import OpenAIServer

pytestmark = pytest.mark.timeout(120)

ALARM = "My alarm code is 4711-9902."
KEYS = {"alice": "key-alice", "mallory": "key-mallory"}


def echo(request: Request) -> str:
    """A model that repeats its whole input: whatever a memory put there comes back in the answer."""
    return "\n".join(str(m.get("content") or "") for m in request.json["messages"])


@pytest.fixture
def memory_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("CREWAI_STORAGE_DIR", str(tmp_path / "storage"))
    db = str(tmp_path / "memory.db")
    Memory(storage=db).remember(ALARM)  # outside any run: the machine's own user's
    return db


def crew(openai_server: OpenAIServer, db: str) -> Crew:
    llm = LLM(model="openai/test-model", base_url=openai_server.base_url, api_key="EMPTY")
    clerk = Agent(role="Clerk", goal="Answer", backstory="Helpful.", llm=llm)
    task = Task(description="Answer: {question}", expected_output="An answer.", agent=clerk)
    return Crew(agents=[clerk], tasks=[task], memory=Memory(storage=db), name="clerk")


def ask(server: AgentServer, question: str, key: str | None = None) -> str:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    body = {"messages": [{"role": "user", "content": f'{{"question": "{question}"}}'}]}
    r = httpx.post(f"{server.url}/chat/completions", json=body, headers=headers, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"]["content"]


def texts(db: str, user: str) -> list[str]:
    return [r.text for r in LongTermMemory(user, f"sqlite:///{db}", embedder=None).list()]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator:
    servers: list[AgentServer] = []

    def start(agent, api_key) -> AgentServer:  # type: ignore[no-untyped-def]
        server = AgentServer(agent, "127.0.0.1", 0, api_key=api_key, store=f"sqlite:///{tmp_path}/s.db").start()
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.close()


def test_a_served_crews_memory_is_the_clients_never_the_local_users(openai_server, memory_db, serve) -> None:  # type: ignore[no-untyped-def]
    openai_server.add(*[echo] * 4)
    server = serve(crew(openai_server, memory_db).as_agent(), KEYS)
    said = ask(server, "What is my alarm code?", KEYS["mallory"])  # no session
    assert "4711" not in said, "a client read the local user's crew memory"
    assert texts(memory_db, "local") == [ALARM], "a client's task answer went into the local user's crew memory"
    assert any("alarm code" in t for t in texts(memory_db, "client:mallory"))  # the client's own
    again = ask(server, "What is my alarm code?", KEYS["alice"])
    assert "4711" not in again and "mallory" not in again.lower()


def test_without_keys_a_crew_outside_a_conversation_keeps_and_recalls_nothing(openai_server, memory_db, serve) -> None:  # type: ignore[no-untyped-def]
    openai_server.add(*[echo] * 4)
    server = serve(crew(openai_server, memory_db).as_agent(), None)
    assert "4711" not in ask(server, "What is my alarm code?")
    ask(server, "Note that my PIN is 0000.")
    assert "0000" not in ask(server, "What is my PIN?"), "two key-less clients shared the crew's memory"
    assert texts(memory_db, "local") == [ALARM]

"""Sessions across processes: a process killed with SIGKILL mid-answer leaves the conversation as it was and its
lock goes with it; two long-lived processes continue one conversation alternately; a lost PostgreSQL connection is
a clear error and the next call reconnects. SQLite and PostgreSQL alike (see conftest.py)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from chatagent import BasicAgent, ScriptedLLM, Session, SessionStoreError
from tests.support.line_child import DEADLINE, LineChild
from tests.support.postgres import PostgresCluster

CHILD = Path(__file__).resolve().parents[1] / "support" / "session_child.py"


class Child(LineChild):
    """tests/support/session_child.py in a process of its own; `ask` sends a command and reads its JSON answer."""

    def __init__(self, store_url: str, session_id: str) -> None:
        super().__init__(CHILD, store_url, session_id, stdin=True)

    def ask(self, command: str) -> dict:
        self.p.stdin.write(command + "\n")  # type: ignore[union-attr]
        self.p.stdin.flush()  # type: ignore[union-attr]
        return self.next_line(f"answer to {command!r}")

    def close(self) -> None:
        if self.p.poll() is None:
            self.p.stdin.close()  # type: ignore[union-attr]
            try:
                self.p.wait(DEADLINE)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def children():
    made: list[Child] = []

    def make(store_url: str, session_id: str) -> Child:
        made.append(Child(store_url, session_id))
        return made[-1]

    yield make
    for c in made:
        c.close()


def test_kill_9_mid_answer_leaves_the_conversation_as_it_was(store_url: str, children) -> None:
    a = children(store_url, "killed")
    assert a.ask("run one") == {"answer": "seen 1: one"}
    before = a.ask("messages")["messages"]
    assert a.ask("hang two") == {"streaming": "seen 3"}  # the answer is streaming in process a
    b = children(store_url, "killed")
    assert "SessionBusyError" in b.ask("run three")["error"]  # another process may not run it meanwhile
    a.kill()  # SIGKILL: no cleanup of any kind runs in a
    assert children(store_url, "killed").ask("messages") == {"messages": before}
    deadline = time.monotonic() + DEADLINE
    while True:  # the lock went with process a (PostgreSQL notices its connection close a moment later)
        out = b.ask("run three")
        if "answer" in out or time.monotonic() > deadline:
            break
        assert "SessionBusyError" in out["error"]
        time.sleep(0.1)
    assert out == {"answer": "seen 3: three"}
    assert b.ask("messages")["messages"] == before + [
        {"role": "user", "content": "three"},
        {"role": "assistant", "content": "seen 3: three", "name": "counter"},
    ]


def test_two_processes_continue_one_conversation_alternately(store_url: str, children) -> None:
    a, b = children(store_url, "shared"), children(store_url, "shared")
    for i in range(3):
        assert a.ask(f"run a{i}") == {"answer": f"seen {4 * i + 1}: a{i}"}
        assert b.ask(f"run b{i}") == {"answer": f"seen {4 * i + 3}: b{i}"}
    stored = Session("shared", store_url).messages()
    assert [m["content"] for m in stored[::2]] == ["a0", "b0", "a1", "b1", "a2", "b2"]


def test_a_lost_connection_is_a_clear_error_and_the_next_call_reconnects(postgres: PostgresCluster) -> None:
    url = postgres.new_store_url()
    bot = BasicAgent(llm=ScriptedLLM(default=lambda messages, functions: f"seen {len(messages)}"))
    s = Session("lost", url)
    bot.run_nonstream([{"role": "user", "content": "one"}], session=s)
    bot.run_nonstream([{"role": "user", "content": "two"}], session=Session("other", url))  # two pooled connections
    assert postgres.terminate_clients() >= 2
    with pytest.raises(SessionStoreError, match="lost the connection to PostgreSQL .* the next call reconnects"):
        s.messages()
    assert len(s.messages()) == 2
    postgres.terminate_clients()  # the lock's connection and the pool's: a run finds its lock's lost and opens anew
    assert bot.run_nonstream([{"role": "user", "content": "three"}], session=s) == [
        {"role": "assistant", "content": "seen 3"}
    ]
    assert [m["content"] for m in s.messages()] == ["one", "seen 1", "three", "seen 3"]

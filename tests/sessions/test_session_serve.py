"""Two `chatagent serve` processes on one session store continue one conversation alternately: a client starts it
with `session_id: "new"`, then sends only its new message, with the id the server made, to whichever replica it
reaches. SQLite and PostgreSQL alike."""

from __future__ import annotations

import textwrap
from pathlib import Path

import httpx
import pytest

from tests.cli.test_cli_command import Proc, _free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

AGENT_MODULE = '''
from chatagent import BasicAgent
from chatagent.llm.base import BaseChatModel
from chatagent.schema import Message


class Counter(BaseChatModel):
    """Answers with what it was given: how many user messages, and the latest one."""

    def _chat_stream(self, messages, functions, cfg, usage):
        said = [m.text for m in messages if m.role == "user"]
        yield [Message.unchecked("assistant", f"{len(said)} messages, latest {said[-1]!r}", None, None, None, {"index": 0})]


agent = BasicAgent(llm=Counter({"model": "counter"}), name="counter")
'''


def test_two_replicas_continue_one_conversation_alternately(store_url: str, tmp_path: Path) -> None:
    agent = tmp_path / "replica_agent.py"
    agent.write_text(textwrap.dedent(AGENT_MODULE))
    ports = [_free_port(), _free_port()]
    replicas = [
        Proc(["serve", "--agent", f"{agent}:agent", "--port", str(port), "--store", store_url]) for port in ports
    ]
    try:
        for proc in replicas:
            proc.read_until("serving")
        answers = []
        session = "new"
        for turn, port in enumerate(ports * 2):  # a, b, a, b
            body = {"model": "counter", "session_id": session, "messages": [{"role": "user", "content": f"q{turn}"}]}
            r = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=30)
            assert r.status_code == 200, r.text
            answers.append(r.json()["choices"][0]["message"]["content"])
            session = r.headers["x-session-id"]
            assert r.json()["choices"][0]["message"]["chatagent"]["session_id"] == session
        assert answers == [f"{n + 1} messages, latest 'q{n}'" for n in range(4)]
        other = {"model": "counter", "session_id": "new", "messages": [{"role": "user", "content": "hi"}]}
        r = httpx.post(f"http://127.0.0.1:{ports[1]}/v1/chat/completions", json=other, timeout=30)
        assert r.json()["choices"][0]["message"]["content"] == "1 messages, latest 'hi'"
    finally:
        for proc in replicas:
            proc.close()

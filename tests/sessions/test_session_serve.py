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


RECORDER_MODULE = '''
import os
from pathlib import Path

from chatagent import FnCallAgent
from chatagent.run.context import current_run

LEDGER = Path(os.environ["LEDGER"])


def record(n: int) -> str:
    """Record the number n."""
    with LEDGER.open("a") as f:
        f.write(f"{current_run().idempotency_key} {n}\\n")
    return f"recorded {n}"


llm = {"model": "m", "model_server": os.environ["MODEL_URL"], "api_key": "k", "generate_cfg": {"max_retries": 0}}
agent = FnCallAgent(function_list=[record], llm=llm, name="recorder")
'''


def test_a_client_reconnecting_after_the_server_was_killed_gets_the_finished_turn(
    store_url: str, tmp_path: Path, openai_server
) -> None:
    from tests.support.openai_server import Reply

    agent = tmp_path / "recorder_agent.py"
    agent.write_text(textwrap.dedent(RECORDER_MODULE))
    ledger = tmp_path / "ledger"
    env = {"LEDGER": str(ledger), "MODEL_URL": openai_server.base_url}
    openai_server.add(
        Reply(tool_calls=[("record", {"n": 1})]),
        Reply(tool_calls=[("record", {"n": 2})]),
        Reply(text="Both are recorded, and", chunk_size=6, stall_after=3, stall=60),  # the server dies in here
    )
    port = _free_port()
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    args = ["serve", "--agent", f"{agent}:agent", "--port", str(port), "--store", store_url]
    first = Proc(args, **env)
    try:
        first.read_until("serving")
        body = {"model": "recorder", "session_id": "new", "stream": True,
                "messages": [{"role": "user", "content": "Record 1 and 2."}]}  # fmt: skip
        with httpx.stream("POST", url, json=body, timeout=30) as r:
            trip = r.headers["x-session-id"]  # the id the server made for the conversation
            for line in r.iter_lines():
                if "Both" in line:  # the answer is streaming: both tools ran
                    break
            first.close()  # SIGKILL
    finally:
        first.close()
    assert len(ledger.read_text().splitlines()) == 2
    openai_server.add("Recorded 1 and 2.")
    second = Proc(args, **env)
    try:
        second.read_until("serving")
        hi = {**body, "session_id": trip, "stream": False, "messages": [{"role": "user", "content": "hi"}]}
        busy = httpx.post(url, json=hi, timeout=30)
        assert busy.status_code == 409 and busy.json()["error"]["code"] == "session_pending_turn"
        back = httpx.post(url, json={"model": "recorder", "session_id": trip, "resume": True}, timeout=30)
        assert back.status_code == 200, back.text
        assert back.json()["choices"][0]["message"]["content"] == "Recorded 1 and 2."
        again = httpx.post(url, json={"model": "recorder", "session_id": trip, "resume": True}, timeout=30)
        assert again.json()["choices"][0]["message"]["content"] == "Recorded 1 and 2."  # the stored turn
    finally:
        second.close()
    assert [line.split()[1] for line in ledger.read_text().splitlines()] == ["1", "2"]  # no tool ran twice

"""A question asked inside a nested run (a tool of an agent the served agent uses as a tool) over `chatagent serve`:
the client gets it in `chatagent.pending_questions`, the replica that asked is killed, and another replica on the
same store (SQLite, PostgreSQL) resumes the nested tool with the answer. The client holds only the conversation id
and the question id (it reads the question again with `"resume": true`); another API key can neither see the
question nor answer it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import httpx
import pytest

from tests.cli.test_cli_command import Proc, _free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

AGENT_MODULE = '''
import os

from chatagent import FnCallAgent, ask_user, tool
from chatagent.llm.base import BaseChatModel
from chatagent.run.context import current_run
from chatagent.schema import FunctionCall
from chatagent.schema.fragment import Fragment

EFFECTS = os.environ["EFFECTS"]


def effect(line):
    with open(EFFECTS, "a") as f:
        f.write(line + "\\n")


@tool
def book(city: str) -> str:
    """Book the trip, once the person says when."""
    effect(f"asked {city} by {current_run().trust.principal}")
    date = ask_user(f"Which date for {city}?", {"type": "string", "pattern": "^May [0-9]+$"})
    effect(f"book {city} {date}")
    return f"booked {city} on {date}"


class Caller(BaseChatModel):
    """Calls `tool` with the user's text (or the task), then answers with the result."""

    def _chat_stream(self, messages, functions, cfg, usage):
        tool, arg, cid, said = self.spec
        if messages[-1].role == "user":
            call = FunctionCall(tool, '{"%s": "%s"}' % (arg, messages[-1].text))
            yield [Fragment.unchecked("assistant", "", None, call, None, {"function_id": cid}, 0)]
            return
        effect(f"model {tool}")
        result = [m.text for m in messages if m.role == "function"][-1]
        yield [Fragment.unchecked("assistant", f"{said}: {result}", None, None, None, None, 0)]


def caller(model, *spec):
    llm = Caller({"model": model})
    llm.spec = spec
    return llm


booker = FnCallAgent(llm=caller("b", "book", "city", "in1", "Booked"), function_list=[book], name="booker",
                     description="Books trips.")
agent = FnCallAgent(llm=caller("planner", "booker", "task", "out1", "Done"), function_list=[booker], name="planner")
'''


def _post(port: int, body: dict, key: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"}
    return httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body, headers=headers, timeout=60)


def test_a_nested_question_is_answered_on_another_replica_by_its_principal_only(store_url: str, tmp_path: Path) -> None:
    agent = tmp_path / "nested_agent.py"
    agent.write_text(textwrap.dedent(AGENT_MODULE))
    effects = tmp_path / "effects.txt"
    keys = tmp_path / "keys.txt"
    keys.write_text("key-alice-0123456789\nkey-bob-0123456789ab\n")
    ports = [_free_port(), _free_port()]
    store = store_url  # SQLite, and a real PostgreSQL server
    args = ["--agent", f"{agent}:agent", "--store", store, "--api-key-file", str(keys)]
    a, b = (Proc(["serve", *args, "--port", str(port)], EFFECTS=str(effects)) for port in ports)
    try:
        a.read_until("serving")
        b.read_until("serving")
        alice, bob = "key-alice-0123456789", "key-bob-0123456789ab"
        body = {"model": "planner", "session_id": "trip-1", "messages": [{"role": "user", "content": "Lisbon"}]}
        r = _post(ports[0], body, alice)
        assert r.status_code == 200, r.text
        (question,) = r.json()["choices"][0]["message"]["chatagent"]["pending_questions"]
        assert question["question"] == "Which date for Lisbon?" and question["id"] == "in1#0"
        (asked,) = effects.read_text().splitlines()
        assert asked.startswith("asked Lisbon by ") and asked != "asked Lisbon by None"  # the run's principal
        a.close()  # SIGKILL: the replica that asked is gone

        resume = {"model": "planner", "session_id": "trip-1", "resume": True}
        r = _post(ports[1], resume, bob)  # bob names alice's conversation: his own (empty) one, no question
        assert r.status_code == 200 and "Which date" not in r.text and "in1#0" not in r.text
        answer = {"role": "user", "content": "", "extra": {"answers": {"in1#0": "May 3"}}}
        again = {"model": "planner", "session_id": "trip-1", "messages": [answer]}
        r = _post(ports[1], again, bob)
        assert r.status_code == 400 and "no question of this conversation waits" in r.json()["error"]["message"]
        r = _post(ports[1], resume, alice)  # the client that kept only the conversation id reads its question
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["chatagent"]["pending_questions"] == [
            question
        ]
        bad = {**again, "messages": [{**answer, "extra": {"answers": {"in1#0": "tomorrow"}}}]}
        r = _post(ports[1], bad, alice)
        assert r.status_code == 400 and "does not fit its question's schema" in r.json()["error"]["message"]
        r = _post(ports[1], again, alice)
        assert r.status_code == 200, r.text
        text = r.json()["choices"][0]["message"]["content"]  # the nested agent's answer, then the planner's
        assert text.startswith("Booked: ") and "\n\nDone: " in text and text.count("booked Lisbon on May 3") == 2
        lines = effects.read_text().splitlines()
        assert lines[1:] == ["asked Lisbon by " + asked.split(" by ")[1], "book Lisbon May 3", "model book",
                             "model booker"]  # fmt: skip
        r = _post(ports[1], again, alice)  # the same answer again: nothing waits any more
        assert r.status_code == 400
    finally:
        a.close()
        b.close()

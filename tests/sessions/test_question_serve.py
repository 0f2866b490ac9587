"""A tool asks a person something over `chatagent serve`: the question reaches the client in `chatagent.pending_questions`,
the replica that asked is killed (SIGKILL), another replica on the same store (SQLite, PostgreSQL) resumes the turn
with the client's answer; what the turn had done ran once. Two clients (two API keys) cannot answer each other's
questions."""

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
def reserve(city: str) -> str:
    """Hold a room."""
    effect(f"reserve {city} {current_run().idempotency_key}")
    return f"room held in {city}"


@tool
def book(city: str) -> str:
    """Book the trip, once the person says when."""
    date = ask_user(f"Which date for {city}?", {"type": "string", "pattern": "^May [0-9]+$"})
    effect(f"book {city} {date} {current_run().idempotency_key}")
    return f"booked {city} on {date}"


class Planner(BaseChatModel):
    """Calls reserve and book at once for a user message; answers with the results once it has them."""

    def _chat_stream(self, messages, functions, cfg, usage):
        if messages[-1].role == "user":
            city = messages[-1].text
            for n, name in enumerate(("reserve", "book")):
                call = FunctionCall(name, '{"city": "%s"}' % city)
                yield [Fragment.unchecked("assistant", "", None, call, None, {"function_id": f"c{n}"}, n)]
            return
        said = "; ".join(m.text for m in messages if m.role == "function")
        yield [Fragment.unchecked("assistant", f"Done: {said}", None, None, None, None, 0)]


agent = FnCallAgent(llm=Planner({"model": "planner"}), function_list=[reserve, book], name="planner")
'''


def _post(port: int, body: dict, key: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"}
    return httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body, headers=headers, timeout=60)


def test_a_question_asked_on_a_killed_replica_is_answered_on_another(store_url: str, tmp_path: Path) -> None:
    agent = tmp_path / "planner_agent.py"
    agent.write_text(textwrap.dedent(AGENT_MODULE))
    effects = tmp_path / "effects.txt"
    keys = tmp_path / "keys.txt"
    keys.write_text("key-alice-0123456789\nkey-bob-0123456789ab\n")
    ports = [_free_port(), _free_port()]
    args = ["--agent", f"{agent}:agent", "--store", store_url, "--api-key-file", str(keys)]
    a, b = (Proc(["serve", *args, "--port", str(port)], EFFECTS=str(effects)) for port in ports)
    try:
        a.read_until("serving")
        b.read_until("serving")
        alice, bob = "key-alice-0123456789", "key-bob-0123456789ab"
        body = {"model": "planner", "session_id": "trip-1", "messages": [{"role": "user", "content": "Lisbon"}]}
        r = _post(ports[0], body, alice)
        assert r.status_code == 200, r.text
        message = r.json()["choices"][0]["message"]
        (question,) = message["chatagent"]["pending_questions"]
        assert question == {"id": "c1#0", "question": "Which date for Lisbon?",
                            "schema": {"type": "string", "pattern": "^May [0-9]+$"}, "call_id": "c1"}  # fmt: skip
        assert effects.read_text().splitlines()[0].startswith("reserve Lisbon ")
        a.close()  # SIGKILL: the replica that asked is gone

        answer = {"role": "user", "content": "", "extra": {"answers": {"c1#0": "May 3"}}}
        again = {"model": "planner", "session_id": "trip-1", "messages": [answer]}
        r = _post(ports[1], again, bob)  # another principal naming the same conversation: not theirs
        assert r.status_code == 400 and "no question of this conversation waits" in r.json()["error"]["message"]
        bad = {**again, "messages": [{**answer, "extra": {"answers": {"c1#0": "tomorrow"}}}]}
        r = _post(ports[1], bad, alice)
        assert r.status_code == 400 and "does not fit its question's schema" in r.json()["error"]["message"]
        r = _post(ports[1], {**again, "session_id": None}, alice)
        assert r.status_code == 400 and "without session_id" in r.json()["error"]["message"]
        r = _post(ports[1], again, alice)
        assert r.status_code == 200, r.text
        text = r.json()["choices"][0]["message"]["content"]
        assert text.startswith("Done: ") and text.index("room held in Lisbon") < text.index("booked Lisbon on May 3")
        lines = effects.read_text().splitlines()
        assert len(lines) == 2  # the reservation ran once, the booking once (after the answer)
        assert lines[0].split()[:2] == ["reserve", "Lisbon"] and lines[1].split()[:4] == ["book", "Lisbon", "May", "3"]
        r = _post(ports[1], again, alice)  # the same answer again: nothing waits any more
        assert r.status_code == 400
    finally:
        a.close()
        b.close()

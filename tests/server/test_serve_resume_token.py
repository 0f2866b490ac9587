"""A paused turn over `chatagent serve` resumed without its session_id: the paused answer carries
`chatagent.resume_token` (signed: the conversation, the key that asked, the model), and an answer or an approval
decision with that token in its `extra` goes on with the stored turn. Attacked as two API keys over loopback HTTP:
another key's token, a forged, altered or swapped token, a token beside another conversation's id, or a token on a
message that neither answers nor decides is a 400, and nothing runs."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import httpx
import orjson
import pytest

from chatagent import FnCallAgent, ScriptedLLM, ask_user, tool, tool_call
from chatagent.server.runner import AgentServer

pytestmark = pytest.mark.timeout(120)


def agent(ran: list) -> FnCallAgent:
    @tool
    def book(city: str) -> str:
        """Book a trip, once the person says when."""
        date = ask_user(f"Which date for {city}?")
        ran.append(("book", city, date))
        return f"booked {city} on {date}"

    @tool(requires_approval=True)
    def pay(to: str) -> str:
        """Pay someone."""
        ran.append(("pay", to))
        return f"paid {to}"

    script = [tool_call("book", {"city": "Lisbon"}), "Booked.", tool_call("pay", {"to": "Bob"}), "Paid.",
              tool_call("book", {"city": "Porto"})]  # fmt: skip
    return FnCallAgent(llm=ScriptedLLM(script), function_list=[book, pay], name="trips")


@pytest.fixture
def ran() -> list:
    return []


@pytest.fixture
def server(ran: list, tmp_path) -> Iterator[AgentServer]:
    with AgentServer(agent(ran), "127.0.0.1", 0, api_key=["key-a", "key-b"], store=f"sqlite:///{tmp_path}/s.db") as s:
        yield s


def post(server: AgentServer, body: dict, key: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"}
    return httpx.post(f"{server.url}/chat/completions", json={"model": "trips", **body}, headers=headers, timeout=60)


def answer(qid: str, value: str, token: str) -> dict:
    return {"role": "user", "content": "", "extra": {"answers": {qid: value}, "resume_token": token}}


def paused_question(server: AgentServer) -> tuple[str, str]:
    r = post(server, {"session_id": "new", "messages": [{"role": "user", "content": "Book Lisbon"}]}, "key-a")
    assert r.status_code == 200, r.text
    extra = r.json()["choices"][0]["message"]["chatagent"]
    (q,) = extra["pending_questions"]
    assert q["question"] == "Which date for Lisbon?" and extra["session_id"]
    return q["id"], extra["resume_token"]


def test_a_question_is_answered_with_the_token_alone(server: AgentServer, ran: list) -> None:
    qid, token = paused_question(server)
    r = post(server, {"messages": [answer(qid, "May 3", token)]}, "key-a")  # no session_id
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == "Booked." and ran == [("book", "Lisbon", "May 3")]
    again = post(server, {"messages": [answer(qid, "May 4", token)]}, "key-a")  # nothing waits any more
    assert again.status_code == 400 and ran == [("book", "Lisbon", "May 3")]


def test_another_key_a_forged_or_altered_token_is_refused(server: AgentServer, ran: list) -> None:
    qid, token = paused_question(server)
    body, _, mac = token.partition(".")
    payload = orjson.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    other = base64.urlsafe_b64encode(orjson.dumps({**payload, "s": "someone-else"})).decode().rstrip("=")
    for key, bad in [
        ("key-b", token),  # another principal with the token
        ("key-a", token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")),  # its signature altered
        ("key-a", f"{other}.{mac}"),  # its conversation swapped, the signature kept
        ("key-a", "eyJzIjoieCJ9.forged"),  # made up
        ("key-a", "é.ü"),  # not even ASCII
    ]:
        r = post(server, {"messages": [answer(qid, "May 3", bad)]}, key)
        assert r.status_code == 400, (key, bad, r.text)
        assert r.json()["error"]["code"] == "invalid_resume_token"
    assert ran == []
    beside = post(server, {"session_id": "another", "messages": [answer(qid, "May 3", token)]}, "key-a")
    assert beside.status_code == 400 and "another conversation" in beside.json()["error"]["message"]
    plain = {"role": "user", "content": "Book Porto", "extra": {"resume_token": token}}
    r = post(server, {"messages": [plain]}, "key-a")  # a token opens no conversation for a new message
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_resume_token"
    assert post(server, {"messages": [answer(qid, "May 3", 7)]}, "key-a").status_code == 400  # type: ignore[arg-type]
    assert ran == []
    assert post(server, {"messages": [answer(qid, "May 3", token)]}, "key-a").status_code == 200
    assert ran == [("book", "Lisbon", "May 3")]


def test_an_approval_is_decided_with_the_token_and_tokens_do_not_stand_for_each_other(
    server: AgentServer, ran: list
) -> None:
    qid, token = paused_question(server)
    assert post(server, {"messages": [answer(qid, "May 3", token)]}, "key-a").status_code == 200
    r = post(server, {"session_id": "trip-b", "messages": [{"role": "user", "content": "Pay Bob"}]}, "key-b")
    extra = r.json()["choices"][0]["message"]["chatagent"]
    assert extra["pending_approval"][0]["name"] == "pay" and "approval_token" not in extra
    pay_token = extra["resume_token"]
    approve = {"role": "user", "content": "", "extra": {"approval": True, "resume_token": pay_token}}
    assert post(server, {"messages": [approve]}, "key-a").status_code == 400  # key-b's
    as_approval = {"role": "user", "content": "", "extra": {"approval": True, "approval_token": pay_token}}
    r = post(server, {"messages": [{"role": "user", "content": "Pay Bob"}, as_approval]}, "key-b")
    assert r.status_code == 400 and "not the approval_token" in r.json()["error"]["message"]
    assert ("pay", "Bob") not in ran
    r = post(server, {"messages": [approve]}, "key-b")
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == "Paid." and ("pay", "Bob") in ran
    stateless = post(server, {"messages": [{"role": "user", "content": "Book Porto"}]}, "key-b")
    extra = stateless.json()["choices"][0]["message"]["chatagent"]
    assert extra["pending_questions"] and "resume_token" not in extra  # no stored conversation to name

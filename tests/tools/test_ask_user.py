"""Interrupts: a tool asks a person something (ask_user), the run pauses with the question, the answer resumes it."""

from __future__ import annotations

import asyncio

import pytest

from chatagent import (
    FnCallAgent,
    ReActChat,
    ScriptedLLM,
    Session,
    answer_message,
    approval_message,
    ask_user,
    pending_questions,
    tool,
    tool_call,
)
from chatagent.run.context import current_run

USER = [{"role": "user", "content": "Book Lisbon and tell me the weather."}]


def shape(m) -> tuple:
    """(role, the tool it calls or answers) of a message (a dict or a Message)."""
    m = m if isinstance(m, dict) else m.model_dump()
    return m["role"], (m.get("function_call") or {}).get("name") or (m.get("name") if m["role"] == "function" else None)


def make_tools(ran: list):
    @tool
    def book(city: str) -> str:
        """Book a trip."""
        ran.append(("book-start", city))
        date = ask_user(f"Which date for {city}?")
        ran.append(("booked", city, date))
        return f"booked {city} on {date}"

    @tool
    def weather(city: str) -> str:
        """Weather in a city."""
        ran.append(("weather", city))
        return "sunny"

    @tool
    def seats(flight: str) -> str:
        """Pick seats: asks for a count (an integer), then for a window or not."""
        n = ask_user("How many seats?", {"type": "integer", "minimum": 1})
        window = ask_user("Window seats?", {"type": "boolean"})
        ran.append(("seats", flight, n, window))
        return f"{n} {'window' if window else 'aisle'} seats on {flight}"

    @tool(requires_approval=True)
    def pay(amount: float) -> str:
        """Pay."""
        ran.append(("pay", amount))
        return f"paid {amount}"

    return [book, weather, seats, pay]


def test_a_tool_that_asks_pauses_the_run_and_its_answer_is_the_calls_return_value():
    ran: list = []
    calls = [tool_call("book", {"city": "Lisbon"}), tool_call("weather", {"city": "Lisbon"})]
    llm = ScriptedLLM([calls, "Booked for May 3; sunny."])
    bot = FnCallAgent(llm=llm, function_list=make_tools(ran))
    rsp = bot.run_nonstream(USER)
    q = pending_questions(rsp)
    assert q == [{"id": "call_1_0#0", "question": "Which date for Lisbon?", "schema": None, "call_id": "call_1_0"}]
    # the other call of the reply ran (kept), the asking call has no result yet, and the model was not asked again
    assert [shape(m) for m in rsp] == [
        ("assistant", "book"), ("assistant", "weather"), ("function", "weather"), ("assistant", None)
    ]  # fmt: skip
    assert ran == [("book-start", "Lisbon"), ("weather", "Lisbon")] and len(llm.calls) == 1
    resumed = bot.run_nonstream(USER + rsp + [answer_message({q[0]["id"]: "May 3"})])
    assert [(m["role"], m.get("name"), m["content"]) for m in resumed] == [
        ("function", "book", "booked Lisbon on May 3"),
        ("assistant", None, "Booked for May 3; sunny."),
    ]
    assert ran[2:] == [("book-start", "Lisbon"), ("booked", "Lisbon", "May 3")]  # weather did not run again
    sent = llm.calls[1].messages
    assert [shape(m) for m in sent] == [
        ("user", None), ("assistant", "book"), ("assistant", "weather"), ("function", "weather"), ("function", "book")
    ]  # no marker and no answer message reach the model  # fmt: skip
    assert pending_questions(resumed) is None


def test_two_questions_of_one_call_and_answers_checked_against_their_schema():
    ran: list = []
    llm = ScriptedLLM([[tool_call("seats", {"flight": "TP1"})], "Done."])
    bot = FnCallAgent(llm=llm, function_list=make_tools(ran))
    rsp = bot.run_nonstream(USER)
    (q,) = pending_questions(rsp) or []
    assert q["question"] == "How many seats?" and q["schema"] == {"type": "integer", "minimum": 1}
    conversation = USER + rsp
    with pytest.raises(ValueError, match="does not fit its question's schema"):
        bot.run_nonstream(conversation + [answer_message({q["id"]: 0})])
    with pytest.raises(ValueError, match="not pending: nope"):
        bot.run_nonstream(conversation + [answer_message({"nope": 1})])
    more = bot.run_nonstream(conversation + [answer_message({q["id"]: "2"})])  # a safe coercion, as for arguments
    (q2,) = pending_questions(more) or []
    assert q2["id"] == "call_1_0#1" and q2["question"] == "Window seats?" and ran == []
    conversation += [answer_message({q["id"]: "2"})] + more
    done = bot.run_nonstream(conversation + [answer_message({q2["id"]: True})])
    assert ran == [("seats", "TP1", 2, True)]  # the first answer was kept across the second pause
    assert [m["content"] for m in done] == ["2 window seats on TP1", "Done."]


def test_parallel_questions_answered_one_by_one_then_together():
    ran: list = []
    calls = [tool_call("book", {"city": "Lisbon"}), tool_call("book", {"city": "Porto"})]
    llm = ScriptedLLM([calls, "Both booked."])
    bot = FnCallAgent(llm=llm, function_list=make_tools(ran))
    rsp = bot.run_nonstream(USER)
    qs = pending_questions(rsp) or []
    assert [q["question"] for q in qs] == ["Which date for Lisbon?", "Which date for Porto?"]
    conversation = USER + rsp + [answer_message({qs[0]["id"]: "May 3"})]
    part = bot.run_nonstream(conversation)
    assert [m["content"] for m in part[:-1]] == ["booked Lisbon on May 3"]
    assert pending_questions(part) == [qs[1]] and len(llm.calls) == 1  # Porto still waits: no model call yet
    conversation += part + [answer_message({qs[1]["id"]: "May 4"})]
    done = bot.run_nonstream(conversation)
    assert [m["content"] for m in done] == ["booked Porto on May 4", "Both booked."]
    assert [shape(m) for m in llm.calls[1].messages][-2:] == [("function", "book"), ("function", "book")]


def test_going_on_without_answering_answers_the_call_not_answered():
    ran: list = []
    llm = ScriptedLLM([[tool_call("book", {"city": "Lisbon"})], "OK, not booked."])
    bot = FnCallAgent(llm=llm, function_list=make_tools(ran))
    rsp = bot.run_nonstream(USER)
    with pytest.raises(ValueError, match="ends with questions waiting"):
        bot.run_nonstream(USER + rsp)
    out = bot.run_nonstream(USER + rsp + [{"role": "user", "content": "Never mind."}])
    assert out[-1]["content"] == "OK, not booked."
    sent = [(m.role, m.content) for m in llm.calls[1].messages]
    assert sent[-2][0] == "function" and "did not answer its question (Which date for Lisbon?)" in sent[-2][1]
    assert sent[-1] == ("user", "Never mind.")


def test_an_answer_message_also_decides_approval_and_pending_questions_lists_it():
    ran: list = []
    llm = ScriptedLLM([[tool_call("pay", {"amount": 5})], "Paid."])
    bot = FnCallAgent(llm=llm, function_list=make_tools(ran))
    rsp = bot.run_nonstream(USER)
    (q,) = pending_questions(rsp) or []
    assert q["kind"] == "approval" and q["schema"] == {"type": "boolean"} and q["name"] == "pay"
    with pytest.raises(ValueError, match="true or false"):
        bot.run_nonstream(USER + rsp + [answer_message({q["id"]: "yes"})])
    out = bot.run_nonstream(USER + rsp + [answer_message({q["id"]: True})])
    assert ran == [("pay", 5.0)] and out[-1]["content"] == "Paid."
    llm.script += [[tool_call("pay", {"amount": 6})], "Not paid."]
    rsp = bot.run_nonstream(USER)
    out = bot.run_nonstream(USER + rsp + [approval_message(False)])  # approval's own API is unchanged
    assert "denied" in out[0]["content"]


def test_a_session_keeps_the_paused_turn_and_a_new_agent_resumes_it(tmp_path):
    ran: list = []
    keys: list = []

    @tool
    def charge(amount: float) -> str:
        """Charge a card, after the person confirms the card."""
        card = ask_user("Which card?", {"type": "string", "enum": ["visa", "amex"]})
        keys.append(current_run().idempotency_key)
        return f"charged {amount} to {card}"

    url = f"sqlite:///{tmp_path / 's.db'}"
    script = [[tool_call("weather", {"city": "Oslo"}), tool_call("charge", {"amount": 9})], "Charged; sunny."]
    bot = FnCallAgent(llm=ScriptedLLM(list(script)), function_list=[*make_tools(ran), charge])
    s = Session("trip", store=url)
    rsp = bot.run_nonstream([{"role": "user", "content": "charge 9"}], session=s)
    (q,) = pending_questions(rsp) or []
    pending = s.pending_turn
    assert pending is not None and pending.kind == "question" and pending.waiting == [q]
    llm = ScriptedLLM(list(script[1:]))
    other = FnCallAgent(llm=llm, function_list=[*make_tools(ran), charge])  # "another process": a new agent and store
    out = other.run_nonstream([answer_message({q["id"]: "amex"})], session=Session("trip", store=url))
    assert [m["content"] for m in out][-2:] == ["charged 9 to amex", "Charged; sunny."]
    assert ran == [("weather", "Oslo")]  # completed work is not redone
    s2 = Session("trip", store=url)
    assert s2.pending_turn is None
    roles = [shape(m) for m in s2.messages()]
    assert roles == [("user", None), ("assistant", "weather"), ("assistant", "charge"), ("function", "weather"),
                     ("assistant", None), ("user", None), ("function", "charge"), ("assistant", None)]  # fmt: skip
    assert len(keys) == 1 and keys[0] is not None


def test_asking_in_a_react_agent_and_in_arun():
    ran: list = []
    llm = ScriptedLLM([[tool_call("book", {"city": "Rome"})], "Done."])
    bot = FnCallAgent(llm=llm, function_list=make_tools(ran))

    async def main():
        last = []
        async for out in bot.arun(USER):
            last = out
        return last

    rsp = asyncio.run(main())
    (q,) = pending_questions(rsp) or []
    assert q["question"] == "Which date for Rome?"
    react_llm = ScriptedLLM(
        ['Thought: book\nAction: book\nAction Input: {"city": "Oslo"}\n', "Thought: done\nFinal Answer: ok"]
    )
    react = ReActChat(llm=react_llm, function_list=make_tools(ran))
    rsp = react.run_nonstream(USER)
    (q,) = pending_questions(rsp) or []
    assert q["question"] == "Which date for Oslo?"


def test_ask_user_outside_a_tool_call_and_bad_arguments_are_clear_errors():
    with pytest.raises(RuntimeError, match="from a tool's code"):
        ask_user("Which date?")
    with pytest.raises(TypeError, match="non-empty string"):
        ask_user("")
    with pytest.raises(TypeError, match="JSON Schema"):
        ask_user("Which?", schema="string")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="non-empty dict"):
        answer_message({})

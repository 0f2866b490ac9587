"""A question asked (ask_user) from inside a nested run: an agent used as a tool, the receiver of a handoff, a
crew's task; the outer run pauses with it, the answer resumes the nested tool in another agent (another process's
view of the same store), the work done before is not redone."""

from __future__ import annotations

import asyncio

import pytest

from chatagent import (
    Crew,
    FnCallAgent,
    Plugin,
    ScriptedLLM,
    Session,
    Task,
    answer_message,
    ask_user,
    pending_questions,
    tool,
    tool_call,
)
from chatagent.agents.group_chat import GroupChat
from chatagent.run.context import current_run
from chatagent.sessions import SessionError

USER = [{"role": "user", "content": "Book Lisbon."}]


def booking_tool(ran: list):
    @tool
    def book(city: str) -> str:
        """Book a trip."""
        ran.append(("start", city))
        date = ask_user(f"Which date for {city}?", {"type": "string"})
        ran.append(("booked", city, date))
        return f"booked {city} on {date}"

    return book


def booker(ran: list, replies: list) -> FnCallAgent:
    return FnCallAgent(llm=ScriptedLLM(list(replies)), function_list=[booking_tool(ran)], name="booker",
                       description="Books trips.")  # fmt: skip


def test_a_tool_of_an_agent_used_as_a_tool_asks_and_a_new_agent_on_the_store_resumes_it(tmp_path):
    ran: list = []
    url = f"sqlite:///{tmp_path / 's.db'}"
    inner = [[tool_call("book", {"city": "Lisbon"})], "Booked it."]
    outer = [[tool_call("booker", {"task": "book Lisbon"})], "All booked."]
    bot = FnCallAgent(llm=ScriptedLLM(list(outer)), function_list=[booker(ran, inner)])
    rsp = bot.run_nonstream(USER, session=Session("trip", store=url))
    (q,) = pending_questions(rsp) or []
    assert q["question"] == "Which date for Lisbon?" and rsp[-1]["extra"]["nested_in"] == rsp[0]["extra"]["function_id"]
    assert not any(m["role"] == "function" and m.get("name") == "booker" for m in rsp)  # the outer call waits
    pending = Session("trip", store=url).pending_turn
    assert pending is not None and pending.kind == "question" and pending.waiting == [q]
    # "another process": new agents (each model has only what is left of its script) on the same store
    inner_llm, outer_llm = ScriptedLLM(inner[1:]), ScriptedLLM(outer[1:])
    sub = FnCallAgent(llm=inner_llm, function_list=[booking_tool(ran)], name="booker", description="Books trips.")
    again = FnCallAgent(llm=outer_llm, function_list=[sub])
    with pytest.raises(ValueError, match="schema"):  # an answer that does not fit is refused, the turn kept
        again.run_nonstream([answer_message({q["id"]: ["May 3"]})], session=Session("trip", store=url))
    out = list(again.resume(session=Session("trip", store=url), answers={q["id"]: "May 3"}))[-1]
    assert ran == [("start", "Lisbon"), ("start", "Lisbon"), ("booked", "Lisbon", "May 3")]
    booked = [m for m in out if m["role"] == "function"]
    assert [(m["name"], m["content"]) for m in booked] == [("book", "booked Lisbon on May 3"), ("booker", "Booked it.")]
    assert out[-1]["content"] == "All booked." and len(inner_llm.calls) == 1 and len(outer_llm.calls) == 1
    assert "booked Lisbon on May 3" in inner_llm.calls[0].messages[-1].content  # the sub-agent read its result
    stored = Session("trip", store=url)
    assert stored.pending_turn is None and stored.messages()[-1]["content"] == "All booked."


def test_a_handoffs_receiver_asks_and_the_answer_resumes_the_receiver():
    ran: list = []
    receiver = booker(ran, [[tool_call("book", {"city": "Oslo"})], "Booked Oslo."])
    triage = FnCallAgent(llm=ScriptedLLM([[tool_call("transfer_to_booker", {})]]), name="triage", handoffs=[receiver])
    rsp = triage.run_nonstream(USER)
    (q,) = pending_questions(rsp) or []
    assert q["question"] == "Which date for Oslo?" and rsp[-1]["name"] == "booker"
    out = triage.run_nonstream(USER + rsp + [answer_message({q["id"]: "June 1"})])
    assert [(m["role"], m.get("name"), m["content"]) for m in out] == [
        ("function", "book", "booked Oslo on June 1"), ("assistant", "booker", "Booked Oslo.")
    ]  # fmt: skip
    assert ran == [("start", "Oslo"), ("start", "Oslo"), ("booked", "Oslo", "June 1")]
    assert len(triage.llm.calls) == 1  # the triage model was not asked again


def test_going_on_without_answering_a_nested_question_answers_the_outer_call():
    ran: list = []
    outer_llm = ScriptedLLM([[tool_call("booker", {"task": "book Lisbon"})], "Let us talk about Rome then."])
    bot = FnCallAgent(llm=outer_llm, function_list=[booker(ran, [[tool_call("book", {"city": "Lisbon"})]])])
    rsp = bot.run_nonstream(USER)
    assert pending_questions(rsp)
    out = bot.run_nonstream(USER + rsp + [{"role": "user", "content": "Forget it, Rome instead."}])
    assert out[-1]["content"] == "Let us talk about Rome then."
    seen = outer_llm.calls[1].messages  # the model reads a result for its call, and nothing of the nested run
    assert [(m.role, m.name) for m in seen[-3:]] == [("assistant", None), ("function", "booker"), ("user", None)]
    assert "did not answer" in seen[-2].content


def test_a_crew_tasks_tool_asks_and_the_crew_resumes_with_the_answer(tmp_path):
    ran: list = []
    writer = FnCallAgent(llm=ScriptedLLM(["A trip to Lisbon."]), name="writer")
    agent = booker(ran, [[tool_call("book", {"city": "Lisbon"})], "Booked for May 3."])
    crew = Crew(agents=[writer, agent], tasks=[Task("Plan a trip", "a plan", agent=writer),
                                               Task("Book it", "a booking", agent=agent)])  # fmt: skip
    s = Session("crew", store=str(tmp_path / "s.db"))
    out = crew.kickoff(inputs={}, session=s)
    assert out.pending is not None and out.pending["task"] == 1 and out.pending["agent"] == "booker"
    (q,) = out.pending["questions"]
    assert q["question"] == "Which date for Lisbon?" and [t.raw for t in out.tasks_output] == ["A trip to Lisbon."]
    with pytest.raises(ValueError, match="one of them"):
        crew.kickoff(inputs={}, answers={q["id"]: "May 3"}, session=s)
    out = crew.kickoff(answers={q["id"]: "May 3"}, session=s)
    assert out.pending is None and [t.raw for t in out.tasks_output] == ["A trip to Lisbon.", "Booked for May 3."]
    assert len(writer.llm.calls) == 1 and ran[-1] == ("booked", "Lisbon", "May 3")


def test_resume_with_answers_in_arun_and_its_errors(tmp_path):
    ran: list = []
    s = Session("a", store=str(tmp_path / "s.db"))
    bot = FnCallAgent(llm=ScriptedLLM([[tool_call("book", {"city": "Rome"})], "Done."]),
                      function_list=[booking_tool(ran)])  # fmt: skip
    (q,) = pending_questions(bot.run_nonstream(USER, session=s)) or []
    with pytest.raises(TypeError, match="give one"):
        bot.resume(session=s, answers={q["id"]: "x"}, approval=True)
    with pytest.raises(ValueError, match="not pending"):
        list(bot.resume(session=s, answers={"nope#0": "x"}))

    async def main() -> list:
        last: list = []
        async for rsp in bot.aresume(session=s, answers={q["id"]: "July 4"}):
            last = rsp
        return last

    assert [m["content"] for m in asyncio.run(main())][-2:] == ["booked Rome on July 4", "Done."]  # after the replay
    with pytest.raises(SessionError, match="no turn to resume"):
        list(bot.resume(session=s, answers={q["id"]: "x"}))


def test_a_group_chat_members_tool_asks_and_the_member_resumes_before_the_others_speak():
    ran: list = []
    alice = booker(ran, [[tool_call("book", {"city": "Rome"})], "Booked Rome."])
    alice.name = "alice"
    bob = FnCallAgent(llm=ScriptedLLM(["Enjoy Rome!"]), name="bob")
    chat = GroupChat([alice, bob], selection="round_robin", max_rounds=2)
    rsp = chat.run_nonstream(USER)
    (q,) = pending_questions(rsp) or []
    assert q["question"] == "Which date for Rome?" and rsp[-1]["name"] == "alice" and not bob.llm.calls
    out = chat.run_nonstream(USER + rsp + [answer_message({q["id"]: "May 3"})])
    assert [(m["name"], m["content"]) for m in out if m["role"] != "assistant" or m["content"]] == [
        ("book", "booked Rome on May 3"), ("alice", "Booked Rome."), ("bob", "Enjoy Rome!")
    ]  # fmt: skip
    assert ran[-1] == ("booked", "Rome", "May 3") and len(alice.llm.calls) == 2  # one before, one after the answer


class Confirm(Plugin):
    """Asks the person before each call of `pay` (before_tool) and once before the run (before_run)."""

    def __init__(self, log: list) -> None:
        self.log = log

    def before_run(self, agent, messages):
        self.log.append(("before_run", ask_user("Your name?")))

    def before_tool(self, agent, call):
        assert current_run().call_id is None  # a hook is not a tool call: asking as the call changes nothing else
        if call.tool.name == "pay":
            ok = ask_user(f"Pay {call.args['amount']}?", {"type": "boolean"})
            self.log.append(("before_tool", ok))
            return None if ok else "Error: the person said no."
        return None


def test_a_plugins_hooks_ask_and_the_answers_resume_the_run_where_they_asked():
    log: list = []

    @tool
    def pay(amount: float) -> str:
        """Pay."""
        log.append(("paid", amount))
        return f"paid {amount}"

    llm = ScriptedLLM([[tool_call("pay", {"amount": 5})], "Paid, Ann."])
    bot = FnCallAgent(llm=llm, function_list=[pay], plugins=[Confirm(log)])
    rsp = bot.run_nonstream(USER)
    (q,) = pending_questions(rsp) or []
    assert q["question"] == "Your name?" and not llm.calls and log == []  # before_run asked: nothing else ran
    conversation = USER + rsp + [answer_message({q["id"]: "Ann"})]
    rsp = bot.run_nonstream(conversation)
    (q2,) = pending_questions(rsp) or []
    assert q2["question"] == "Pay 5?" and q2["call_id"] == rsp[0]["extra"]["function_id"] and len(llm.calls) == 1
    assert log == [("before_run", "Ann")]  # the call has not run
    out = bot.run_nonstream(conversation + rsp + [answer_message({q2["id"]: True})])
    assert [m["content"] for m in out] == ["paid 5", "Paid, Ann."] and len(llm.calls) == 2
    assert log == [("before_run", "Ann"), ("before_run", "Ann"), ("before_tool", True), ("paid", 5)]


def test_the_event_stream_carries_the_nested_question_as_an_interrupt():
    ran: list = []
    bot = FnCallAgent(llm=ScriptedLLM([[tool_call("booker", {"task": "book Oslo"})]]),
                      function_list=[booker(ran, [[tool_call("book", {"city": "Oslo"})]])])  # fmt: skip
    events = list(bot.run(USER, events=True))
    (interrupt,) = [e for e in events if e.type == "interrupt"]
    assert [q["question"] for q in interrupt.data["questions"]] == ["Which date for Oslo?"]
    assert events[-1].type == "run_end" and ran == [("start", "Oslo")] and len(bot.llm.calls) == 1  # it paused

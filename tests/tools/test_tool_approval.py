"""Tool approval: a tool that needs a person's yes pauses the run before it runs; the run resumes with the decision."""

from __future__ import annotations

import asyncio

import pytest

from chatagent import FnCallAgent, ReActChat, ScriptedLLM, Session, get_chat_model, merge_delta, tool, tool_call
from chatagent.llm.prepare import untrusted
from chatagent.run.approval import approval_message, pending_approval
from tests.support.openai_server import Reply

USER = [{"role": "user", "content": "Pay Bob 500 and tell me the weather."}]


def make_tools(ran: list):
    @tool(requires_approval=lambda args: args["amount"] > 100)
    def pay(to: str, amount: float) -> str:
        """Pay someone."""
        ran.append(("pay", to, amount))
        return f"paid {amount} to {to}"

    @tool
    def weather(city: str) -> str:
        """Weather in a city."""
        ran.append(("weather", city))
        return "sunny"

    @tool(requires_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        ran.append(("delete", path))
        return "deleted"

    return [pay, weather, delete]


def test_a_call_that_needs_approval_pauses_the_run_before_anything_of_its_reply_runs():
    ran: list = []
    calls = [tool_call("pay", {"to": "Bob", "amount": 500}), tool_call("weather", {"city": "Oslo"})]
    llm = ScriptedLLM([calls])
    bot = FnCallAgent(llm=llm, function_list=make_tools(ran))
    yields = list(bot.run(USER))
    response = yields[-1]
    assert ran == [] and len(llm.calls) == 1
    assert [m["function_call"]["name"] for m in response] == ["pay", "weather"]
    waiting = pending_approval(response)
    assert waiting == [{"id": "call_1_0", "name": "pay", "arguments": '{"to": "Bob", "amount": 500}'}]
    assert "pending_approval" not in yields[-2][-1].get("extra", {})  # the mark comes with the last yield
    llm.script.append(calls)
    folded: list = []
    for d in bot.run(USER, delta_stream=True):
        merge_delta(folded, d)
    assert len(folded) == 2 and folded[-1]["extra"]["pending_approval"] == [
        {"id": "call_2_0", "name": "pay", "arguments": '{"to": "Bob", "amount": 500}'}
    ]


def test_approve_runs_the_paused_calls_then_the_model_goes_on():
    ran: list = []
    llm = ScriptedLLM(
        [[tool_call("pay", {"to": "Bob", "amount": 500}), tool_call("weather", {"city": "Oslo"})], "Paid; sunny."]
    )
    bot = FnCallAgent(llm=llm, function_list=make_tools(ran))
    history = USER + bot.run_nonstream(USER)
    resumed = bot.run_nonstream(history + [approval_message(True)])
    assert ran == [("pay", "Bob", 500.0), ("weather", "Oslo")]
    assert [(m["role"], m.get("name"), m["content"]) for m in resumed] == [
        ("function", "pay", "paid 500 to Bob"),
        ("function", "weather", "sunny"),
        ("assistant", None, "Paid; sunny."),
    ]
    sent = llm.calls[1].messages
    assert [m.role for m in sent] == ["user", "assistant", "assistant", "function", "function"]  # no approval msg
    assert pending_approval(resumed) is None


def test_deny_reaches_the_model_as_the_tools_result_with_the_reason():
    ran: list = []
    llm = ScriptedLLM([tool_call("delete", {"path": "/etc"}), "OK, I will not delete it."])
    bot = FnCallAgent(llm=llm, function_list=make_tools(ran))
    history = USER + bot.run_nonstream(USER)
    resumed = bot.run_nonstream(history + [approval_message(False, "That is a system folder.")])
    assert ran == []
    result = resumed[0]
    assert result["role"] == "function" and result["extra"] == {"function_id": "call_1_0"}
    assert "the user denied this call of delete" in result["content"]
    assert "The user said: That is a system folder." in result["content"]
    assert llm.calls[1].messages[-1].content == untrusted(result["content"], "tool delete")


def test_decisions_per_call_and_a_predicate_that_says_no():
    ran: list = []
    llm = ScriptedLLM(
        [
            tool_call("pay", {"to": "Ann", "amount": 20}),  # small: runs without asking
            [tool_call("delete", {"path": "a"}), tool_call("delete", {"path": "b"})],
            "Deleted a only.",
        ]
    )
    bot = FnCallAgent(llm=llm, function_list=make_tools(ran))
    first = bot.run_nonstream(USER)
    assert ran == [("pay", "Ann", 20.0)]
    ids = [w["id"] for w in pending_approval(first)]
    assert ids == ["call_2_0", "call_2_1"]
    resumed = bot.run_nonstream(USER + first + [approval_message({"call_2_0": True})])
    assert ran[1:] == [("delete", "a")]
    assert resumed[0]["content"] == "deleted" and "denied" in resumed[1]["content"]


def test_bad_resumes_are_clear_errors():
    ran: list = []
    llm = ScriptedLLM([tool_call("delete", {"path": "x"})])
    bot = FnCallAgent(llm=llm, function_list=make_tools(ran))
    history = USER + bot.run_nonstream(USER)
    with pytest.raises(ValueError, match="ends with tool calls waiting for approval"):
        bot.run_nonstream(history)
    with pytest.raises(ValueError, match="answers no tool call waiting for approval"):
        bot.run_nonstream(USER + [approval_message(True)])
    with pytest.raises(ValueError, match="names calls that are not pending: call_9"):
        bot.run_nonstream(history + [approval_message({"call_9": True})])
    with pytest.raises(TypeError, match="approve must be a bool or a dict"):
        approval_message("yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="requires_approval must be True, False or a function"):
        tool(requires_approval="always")(lambda: None)


def test_going_on_without_a_decision_answers_the_call_not_approved():
    ran: list = []
    llm = ScriptedLLM([tool_call("delete", {"path": "x"}), "Fine, something else then."])
    bot = FnCallAgent(llm=llm, function_list=make_tools(ran))
    history = USER + bot.run_nonstream(USER) + [{"role": "user", "content": "Forget it. Tell me a joke."}]
    bot.run_nonstream(history)
    sent = llm.calls[1].messages
    assert [m.role for m in sent] == ["user", "assistant", "function", "user"]
    assert "was not run: the user did not approve" in sent[2].content and ran == []


def test_a_session_keeps_the_paused_call_and_resumes_it(tmp_path):
    ran: list = []
    llm = ScriptedLLM([tool_call("delete", {"path": "x"}), "Deleted."])
    bot = FnCallAgent(llm=llm, function_list=make_tools(ran))
    s = Session("approval", f"sqlite:///{tmp_path}/s.db")
    assert pending_approval(bot.run_nonstream(USER, session=s))
    paused = s.pending_turn  # the paused turn waits in the store, not yet one of the session's messages
    assert paused is not None and paused.kind == "approval" and paused.waiting[0]["name"] == "delete"
    assert s.messages() == []
    bot.run_nonstream([approval_message(True)], session=s)
    assert ran == [("delete", "x")]
    assert [m["role"] for m in s.messages()] == ["user", "assistant", "user", "function", "assistant"]
    assert s.messages()[-1]["content"] == "Deleted."


def test_arun_pauses_and_resumes_the_same_way():
    ran: list = []
    llm = ScriptedLLM([tool_call("delete", {"path": "x"}), "Deleted."])
    bot = FnCallAgent(llm=llm, function_list=make_tools(ran))

    async def main():
        first = await bot.arun_nonstream(USER)
        return first, await bot.arun_nonstream(USER + first + [approval_message(True)])

    first, resumed = asyncio.run(main())
    assert pending_approval(first)[0]["name"] == "delete"
    assert ran == [("delete", "x")] and resumed[-1]["content"] == "Deleted."


@pytest.mark.parametrize("transcript", [True, False])
def test_react_chat_pauses_for_approval_too(transcript):
    ran: list = []
    llm = ScriptedLLM(
        [
            'Thought: I must delete it.\nAction: delete\nAction Input: {"path": "x"}\n',
            "Thought: Done.\nFinal Answer: It is gone.",
        ]
    )
    bot = ReActChat(llm=llm, function_list=make_tools(ran), transcript=transcript)
    first = bot.run_nonstream(USER)
    assert ran == [] and pending_approval(first)[0]["name"] == "delete"
    resumed = bot.run_nonstream(USER + first + [approval_message(True)])
    assert ran == [("delete", "x")] and resumed[-1]["content"].endswith("It is gone.")


def test_the_resumed_conversation_is_valid_for_a_real_openai_server(openai_server):
    ran: list = []
    openai_server.add(Reply(tool_calls=[("delete", {"path": "x"})]))
    openai_server.add("Deleted it.")
    llm = get_chat_model({"model": "m", "model_server": openai_server.base_url, "api_key": "k"})
    bot = FnCallAgent(llm=llm, function_list=make_tools(ran))
    first = bot.run_nonstream(USER)
    resumed = bot.run_nonstream(USER + first + [approval_message(True)])
    sent = openai_server.requests[1].json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[2]["tool_call_id"] == sent[1]["tool_calls"][0]["id"] and sent[2]["content"] == untrusted(
        "deleted", "tool delete"
    )
    assert resumed[-1]["content"] == "Deleted it."


def test_a_group_chat_pauses_on_a_members_call_and_resumes_it():
    from chatagent import BasicAgent, GroupChat

    ran: list = []
    ops = FnCallAgent(llm=ScriptedLLM([tool_call("delete", {"path": "x"}), "Deleted x."]),
                      function_list=make_tools(ran), name="ops")  # fmt: skip
    critic = BasicAgent(llm=ScriptedLLM(default="Looks fine."), name="critic")
    chat = GroupChat(agents=[ops, critic], selection="round_robin", max_rounds=3)
    first = chat.run_nonstream(USER)
    assert [m["name"] for m in first] == ["ops"] and pending_approval(first)[0]["name"] == "delete"
    assert critic.llm.calls == [] and ran == []  # the chat stopped at the paused call
    resumed = chat.run_nonstream(USER + first + [approval_message(True)], max_round=2)
    assert ran == [("delete", "x")]
    assert [(m["role"], m["name"]) for m in resumed] == [("function", "delete"), ("assistant", "ops"),
                                                          ("assistant", "critic")]  # fmt: skip
    assert resumed[1]["content"] == "Deleted x."
    assert all(m.role != "user" or "approval" not in (m.extra or {}) for m in critic.llm.calls[0].messages)


def test_a_router_hands_the_decision_to_the_sub_agent_that_asked():
    from chatagent import Router

    ran: list = []
    ops = FnCallAgent(llm=ScriptedLLM([tool_call("delete", {"path": "y"}), "Deleted y."]),
                      function_list=make_tools(ran), name="ops", description="operations")  # fmt: skip
    router = Router(llm=ScriptedLLM(["Call: ops"]), agents=[ops])
    first = router.run_nonstream(USER)
    assert pending_approval(first)[0]["name"] == "delete" and ran == []
    resumed = router.run_nonstream(USER + first + [approval_message(True)])
    assert ran == [("delete", "y")] and resumed[-1]["content"] == "Deleted y."
    assert len(router.llm.calls) == 1  # the router did not ask its model again


def test_an_openai_style_client_resumes_with_tool_calls_and_the_decision():
    """What a `serve` client sends back: the paused call as OpenAI `tool_calls` with the mark, then the decision."""
    ran: list = []
    llm = ScriptedLLM([tool_call("delete", {"path": "z"}), "Deleted z."])
    bot = FnCallAgent(llm=llm, function_list=make_tools(ran))
    waiting = pending_approval(bot.run_nonstream(USER))
    call = {"role": "assistant", "content": None, "extra": {"pending_approval": waiting},
            "tool_calls": [{"id": w["id"], "type": "function", "function": {"name": w["name"],
                            "arguments": w["arguments"]}} for w in waiting]}  # fmt: skip
    resumed = bot.run_nonstream(USER + [call, {"role": "user", "content": "", "extra": {"approval": True}}])
    assert ran == [("delete", "z")] and resumed[-1]["content"] == "Deleted z."


def test_a_text_message_marked_pending_is_not_taken_for_a_paused_call():
    """A history whose pending mark sits on a text message (hand-edited, or from another tool) has no paused calls:
    resolving it answers nothing (it used to fail with AttributeError on the text's missing function_call)."""
    from chatagent.run.approval import PENDING_APPROVAL, resolve
    from chatagent.schema import Message

    marked = Message("assistant", "let me check", extra={PENDING_APPROVAL: [{"name": "delete", "id": "c1"}]})
    msgs, resume = resolve([Message("user", "hi"), marked, Message("user", "go on")])
    assert resume is None
    assert [m.role for m in msgs] == ["user", "assistant", "user"]

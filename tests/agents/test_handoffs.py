"""Handoffs: `transfer_to_<name>` hands the rest of the turn to the receiver (its messages named after it), input
filters decide what it sees, and with a Session the conversation stays with it until it hands back."""

from __future__ import annotations

import pytest

from chatagent import FnCallAgent, ScriptedLLM, Session, handoff, remove_all_tools
from chatagent.llm.scripted import tool_call


def _pair(triage_replies, billing_replies, **handoff_kwargs):
    billing_llm, triage_llm = ScriptedLLM(billing_replies), ScriptedLLM(triage_replies)
    billing = FnCallAgent(llm=billing_llm, name="billing", description="Invoices and refunds.")
    triage = FnCallAgent(llm=triage_llm, name="triage", handoffs=[handoff(billing, **handoff_kwargs)])
    return triage, billing, triage_llm, billing_llm


def test_the_receiver_answers_the_rest_of_the_turn_under_its_name():
    triage, _, triage_llm, billing_llm = _pair([tool_call("transfer_to_billing", {})], ["Your refund is on its way."])
    assert "transfer_to_billing" in [f["name"] for f in triage.functions or []]
    assert "Invoices and refunds." in triage.function_map["transfer_to_billing"].description
    rsp = triage.run_nonstream([{"role": "user", "content": "I want a refund"}])
    assert [(m["role"], m.get("name")) for m in rsp] == [
        ("assistant", "triage"),
        ("function", "transfer_to_billing"),
        ("assistant", "billing"),
    ]
    assert rsp[1]["extra"]["handoff_to"] == "billing"
    assert rsp[-1]["content"] == "Your refund is on its way."
    # the receiver saw the conversation with the transfer (no filter)
    assert [m.role for m in billing_llm.calls[0].messages] == ["user", "assistant", "function"]
    assert len(triage_llm.calls) == 1


def test_an_input_filter_decides_what_the_receiver_sees():
    triage, _, _, billing_llm = _pair([tool_call("transfer_to_billing", {})], ["Refund sent."],
                                      input_filter=remove_all_tools)  # fmt: skip
    triage.run_nonstream([{"role": "user", "content": "refund"}])
    assert [m.role for m in billing_llm.calls[0].messages] == ["user"]


def test_with_a_session_the_conversation_stays_with_the_receiver_until_it_hands_back(tmp_path):
    billing_llm = ScriptedLLM(["Refund sent.", "Anything else on billing?", tool_call("transfer_to_triage", {})])
    triage_llm = ScriptedLLM([tool_call("transfer_to_billing", {}), "Triage here: how can I help?"])
    billing = FnCallAgent(llm=billing_llm, name="billing")
    triage = FnCallAgent(llm=triage_llm, name="triage", handoffs=[billing])
    billing.handoffs = [triage]  # each can hand over to the other
    s = Session("desk", store=str(tmp_path / "s.db"))
    first = triage.run_nonstream([{"role": "user", "content": "refund please"}], session=s)
    assert first[-1]["name"] == "billing"
    second = triage.run_nonstream([{"role": "user", "content": "thanks"}], session=s)
    assert [m.get("name") for m in second] == ["billing"]  # billing kept the conversation
    assert len(triage_llm.calls) == 1
    third = triage.run_nonstream([{"role": "user", "content": "something else now"}], session=s)
    assert [m.get("name") for m in third] == ["billing", "transfer_to_triage", "triage"]
    assert third[-1]["content"] == "Triage here: how can I help?"
    assert [m["name"] for m in s.messages() if m["role"] == "assistant"][-1] == "triage"


def test_handoffs_are_checked():
    with pytest.raises(TypeError, match="handoffs"):
        FnCallAgent(llm=ScriptedLLM([]), handoffs=["billing"])
    with pytest.raises(ValueError, match="name"):
        FnCallAgent(llm=ScriptedLLM([]), handoffs=[FnCallAgent(llm=ScriptedLLM([]))])

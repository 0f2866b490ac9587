"""One rule for adding text to a conversation's system message (schema.with_system_text), used by every agent."""

from __future__ import annotations

from chatagent import BasicAgent, ContentItem, Message, ScriptedLLM
from chatagent.schema import with_system_text


def test_a_conversation_without_a_system_message_gets_one() -> None:
    msgs = [Message("user", "hi")]
    out = with_system_text(msgs, "Be brief.")
    assert [(m.role, m.content) for m in out] == [("system", "Be brief."), ("user", "hi")]
    assert msgs == [Message("user", "hi")]  # the input is not changed


def test_text_goes_after_the_system_message_or_before_it() -> None:
    msgs = [Message("system", "You are kind."), Message("user", "hi")]
    assert with_system_text(msgs, "Be brief.")[0].content == "You are kind.\n\nBe brief."
    assert with_system_text(msgs, "Be brief.", first=True)[0].content == "Be brief.\n\nYou are kind."
    assert msgs[0].content == "You are kind."
    assert with_system_text([Message("system", " "), Message("user", "hi")], "Be brief.")[0].content == "Be brief."


def test_a_system_message_with_items_keeps_them() -> None:
    system = Message("system", [ContentItem(text="You are kind."), ContentItem(image="/tmp/logo.png")])
    after = with_system_text([system], "Be brief.")[0].content
    before = with_system_text([system], "Be brief.", first=True)[0].content
    assert [i.text for i in after] == ["You are kind.", None, "\n\nBe brief."]
    assert [i.text for i in before] == ["Be brief.\n\n", "You are kind.", None]


def test_the_agents_system_message_is_merged_by_the_same_rule() -> None:
    llm = ScriptedLLM(["ok"])
    bot = BasicAgent(llm=llm, system_message="Be brief.")
    bot.run_nonstream([{"role": "system", "content": "You are kind."}, {"role": "user", "content": "hi"}])
    assert llm.calls[0].messages[0].content == "Be brief.\n\nYou are kind."

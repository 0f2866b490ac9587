"""WebUI without a server: agents, factories, speaker names, group chats and the page it builds."""

from __future__ import annotations

import asyncio

import pytest

from chatagent import BasicAgent, ScriptedLLM
from chatagent.gui import WebUI
from chatagent.gui.icons import icon
from chatagent.gui.render import message_text, speaker_badge
from chatagent.gui.session import user_message


def test_one_agent_is_shared_and_a_factory_makes_agents_per_session() -> None:
    shared = BasicAgent(llm=ScriptedLLM(default="x"), name="Bot")
    ui = WebUI(shared)
    assert ui.new_session().agents[0] is ui.new_session().agents[0] is shared
    assert not ui.show_names and ui.agent_names == ["Bot"]
    made = []

    def factory():
        made.append(BasicAgent(llm=ScriptedLLM(default="x"), name="Fresh"))
        return made[-1]

    ui = WebUI(factory)
    a, b = ui.new_session(), ui.new_session()
    assert a.agents[0] is not b.agents[0] and len(made) == 3  # one sample at construction, one per session


def test_several_agents_get_unique_names_and_speaker_names_shown() -> None:
    agents = [
        BasicAgent(llm=ScriptedLLM(default="x"), name="Bot"),
        BasicAgent(llm=ScriptedLLM(default="y"), name="Bot"),
        BasicAgent(llm=ScriptedLLM(default="z")),
    ]
    ui = WebUI(agents)
    assert ui.agent_names == ["Bot", "Bot (2)", "Agent 3"] and ui.show_names
    session = ui.new_session()
    assert ui._agent_for(session, "Bot (2)") is agents[1]
    assert ui._agent_for(session, "unknown") is agents[0]
    assert WebUI(agents, chatbot_config={"show_names": False}).show_names is False


def test_bad_agents_are_refused() -> None:
    with pytest.raises(TypeError):
        WebUI([])
    with pytest.raises(TypeError):
        WebUI(["not an agent"])


def test_a_group_chat_shows_speakers_and_waits_for_the_person() -> None:
    from chatagent.agents import group_chat
    from chatagent.agents.user import UserAgent

    alice = BasicAgent(llm=ScriptedLLM(default="Hi, I am Alice."), name="Alice")
    chat = group_chat.GroupChat([alice, UserAgent("Me")], selection="round_robin", max_rounds=4)
    ui = WebUI(chat)
    assert ui.show_names
    session = ui.new_session()
    session.add_user(user_message("Hello all", []))

    async def turn():
        async for _ in session.stream_turn(session.agents[0]):
            pass

    asyncio.run(turn())
    contents = [message_text(d) for d in session.display]
    assert contents[1] == f"{speaker_badge('Alice')} **Alice**\n\nHi, I am Alice."
    assert contents[-1] == f"{icon('waiting')} *Waiting for **Me**: type the next message.*"


def test_the_page_builds_with_its_controls() -> None:
    ui = WebUI(
        BasicAgent(llm=ScriptedLLM(default="x"), name="Bot"),
        chatbot_config={"prompt.suggestions": ["Hello!"], "title": "T"},
    )
    demo = ui.build(messages=[{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "reply"}])
    ids = {getattr(b, "elem_id", None) for b in demo.blocks.values()}
    assert {"chatbot", "chat-input", "stop-btn", "regenerate-btn", "clear-btn", "agent-selector"} <= ids
    chatbot = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "chatbot")
    assert [m["content"][0]["text"] for m in chatbot.value] == ["earlier", "reply"]
    assert [m.text for m in ui.new_session().history] == ["earlier", "reply"]


def test_a_group_chat_names_its_members_and_every_model_that_answers() -> None:
    from chatagent.agents import group_chat
    from chatagent.agents.user import UserAgent

    alice = BasicAgent(llm=ScriptedLLM(default="a", model="alice-model"), name="Alice")
    bob = BasicAgent(llm=ScriptedLLM(default="b", model="bob-model"), name="Bob")
    host = ScriptedLLM(default="Alice", model="host-model")
    auto = group_chat.GroupChat([alice, bob, UserAgent("Me")], selection="auto", llm=host, name="Team")
    turns = group_chat.GroupChat([bob, UserAgent("Me")], selection="round_robin", name="Pair")
    solo = BasicAgent(llm=ScriptedLLM(default="x", model="solo-model"), name="Solo")
    ui = WebUI([auto, turns, solo])
    # the host model first (it picks the speakers), then the members'; the person has none; each model once
    labels = ", ".join(f"{m}-model (scripted)" for m in ("host", "alice", "bob", "solo"))
    assert ui.model_note() == f"**Model:** {labels}."
    demo = ui.build()
    texts = [b.value for b in demo.blocks.values() if type(b).__name__ == "Markdown"]
    assert "Team: **@Alice**, **@Bob**, **@Me**. Write @name to ask one of them." in texts
    assert "Pair: **@Bob**, **@Me**. Write @name to ask one of them." in texts
    assert not any(t.startswith("Solo:") for t in texts)

"""chatagent.gui.session bound to a stored Session, and chatagent.gui.conversations' handlers, without a browser (see
tests/e2e/test_gui_conversations_browser.py for the page in Chromium)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import pytest

from chatagent import BasicAgent, ModelServiceError, ScriptedLLM, Session
from chatagent.gui import WebUI
from chatagent.gui.session import ChatSession, user_message
from chatagent.sessions import close_stores
from tests.gui.test_gui_session import PacedLLM, run_turn

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CHATAGENT_WORKSPACE", str(tmp_path / "ws"))
    yield f"sqlite:///{tmp_path}/conversations.db"
    close_stores()


def counting() -> BasicAgent:
    return BasicAgent(llm=ScriptedLLM(default=lambda messages, functions: f"seen {len(messages)}"), name="bot")


def say(chat: ChatSession, text: str) -> None:
    chat.add_user(user_message(text, []))
    run_turn(chat, chat.agents[0])


def test_a_bound_chat_stores_each_turn_and_a_new_page_shows_it(store: str) -> None:
    chat = ChatSession([counting()])
    chat.bind(Session("c1", store))
    say(chat, "one")
    say(chat, "two")
    assert [m["content"] for m in Session("c1", store).messages()] == ["one", "seen 1", "two", "seen 3"]
    again = ChatSession([counting()])  # a reload, or another server process
    again.bind(Session("c1", store))
    assert [m.text for m in again.history] == ["one", "seen 1", "two", "seen 3"] and again.display == chat.display
    say(again, "three")
    assert again.history[-1].text == "seen 5"


def test_regenerate_takes_the_stored_turn_back_and_asks_again(store: str) -> None:
    chat = ChatSession([counting()])
    chat.bind(Session("r", store))
    say(chat, "one")
    say(chat, "two")
    assert chat.pop_response()
    run_turn(chat, chat.agents[0])
    stored = Session("r", store).messages()
    assert [m["content"] for m in stored] == ["one", "seen 1", "two", "seen 3"] and len(chat.history) == 4


def test_a_failed_turn_keeps_its_message_for_the_next_one(store: str) -> None:
    agent = BasicAgent(llm=ScriptedLLM([ModelServiceError(400, "refused"), "fine"]))
    chat = ChatSession([agent])
    chat.bind(Session("f", store))
    say(chat, "lost?")
    assert Session("f", store).messages() == []
    say(chat, "again")
    assert [m.text for m in agent.llm.calls[-1].messages] == ["lost?", "again"]
    assert [m["content"] for m in Session("f", store).messages()] == ["lost?", "again", "fine"]


def test_switching_away_stops_the_turn_and_stores_its_partial_answer(store: str) -> None:
    llm = PacedLLM(n=5000, delay=0.005)
    chat = ChatSession([BasicAgent(llm=llm)])
    chat.bind(Session("long", store))
    chat.add_user(user_message("go", []))

    async def go() -> None:
        async for _ in chat.stream_turn(chat.agents[0]):
            if llm.sent >= 3:
                await asyncio.to_thread(chat.detach)  # what switching conversation does

    asyncio.run(go())
    stored = Session("long", store).messages()
    assert stored[0]["content"] == "go" and stored[1]["content"].startswith("w0 w1 w2")
    assert stored[1]["extra"] == {"interrupted": True}


def test_clear_empties_the_stored_conversation(store: str) -> None:
    chat = ChatSession([counting()])
    chat.bind(Session("c", store))
    say(chat, "one")
    chat.clear()
    assert Session("c", store).messages() == [] and chat.history == []


def request(user: str | None) -> SimpleNamespace:
    return SimpleNamespace(username=user)


def test_the_sidebar_handlers_keep_users_apart_and_open_the_latest(store: str) -> None:
    from chatagent.gui.conversations import Conversations

    ui = WebUI(counting())
    bar = Conversations(ui, store)
    display, chat, listing, title, box = bar._on_load(None, request("alice"))
    assert box.interactive is True  # the input opens with the conversation
    assert display == [] and listing.choices == [] and chat.stored.user == "alice"
    say(chat, "alice's first")
    _, chat, _, _ = bar._on_new(chat, request("alice"))
    say(chat, "alice's second")
    bob_display, bob_chat, bob_listing, _, _ = bar._on_load(None, request("bob"))
    assert bob_display == [] and bob_listing.choices == []
    first_id = Session.list(store, user="alice")[-1].id
    assert bar._on_switch(first_id, bob_chat, request("bob"))[1].history == []  # bob cannot open alice's by id
    display, chat, listing, title, _ = bar._on_load(None, request("alice"))
    assert [label for label, _ in listing.choices] == ["alice's second", "alice's first"]
    assert listing.value == chat.stored.id and "alice's second" in str(display)
    listing, title = bar._on_rename("Renamed", chat, request("alice"))
    assert [label for label, _ in listing.choices][0] == "Renamed" and title.value == "Renamed"
    display, chat, listing, _ = bar._on_delete(chat, request("alice"))
    assert [label for label, _ in listing.choices] == ["alice's first"] and "alice's first" in str(display)
    assert [i.user for i in Session.list(store, user=None)] == ["alice"]  # bob's empty chat was never stored


def test_the_refresh_after_a_turn_leaves_a_title_being_typed_alone(store: str) -> None:
    """After the first turn the title box shows the new title; after later turns the refresh does not send the
    title again (it would overwrite what the user is typing in the box, as it did under load)."""
    from chatagent.gui.conversations import Conversations

    bar = Conversations(WebUI(counting()), store)
    _, chat, _, title, _ = bar._on_load(None, request("alice"))
    assert title.value == ""
    say(chat, "plan a trip")
    listing, title = bar._on_changed(chat, request("alice"))
    assert title.value == "plan a trip" and [label for label, _ in listing.choices] == ["plan a trip"]
    say(chat, "and the hotels?")
    assert bar._on_changed(chat, request("alice"))[1] == gr.skip()
    listing, title = bar._on_rename("Lisbon trip", chat, request("alice"))
    assert title.value == "Lisbon trip" and [label for label, _ in listing.choices] == ["Lisbon trip"]
    say(chat, "and museums?")
    assert bar._on_changed(chat, request("alice"))[1] == gr.skip()


def test_a_second_tab_on_a_busy_conversation_says_so_and_keeps_the_typed_text(store: str) -> None:
    """It showed a raw SessionBusyError (with the store's file path) and lost the message: now the message goes
    back into the input box, and the chat says another tab is answering; nothing of it is stored."""
    slow = PacedLLM(n=400, delay=0.01)
    ui = WebUI(BasicAgent(llm=slow, name="bot"), conversations=store)
    first, second = ui.new_session(), ui.new_session()
    first.bind(Session("shared", store))
    second.bind(Session("shared", store))
    first.add_user(user_message("a long question", []))

    async def both() -> list[tuple]:
        answering = asyncio.ensure_future(first.stream_turn(first.agents[0]).__anext__())
        while slow.sent == 0:  # the first tab's run holds the session
            await asyncio.sleep(0.01)
        updates = [u async for u in ui._on_submit({"text": "my typed text", "files": []}, second, None)]
        first.request_stop()
        await answering
        return updates

    updates = asyncio.run(both())
    chatbot, box, session = updates[-1]
    shown = "\n".join(str(m["content"]) for m in chatbot)
    assert "answering in another tab" in shown
    assert "SessionBusyError" not in shown and store.split("///")[1] not in shown and "Error" not in shown
    assert box.value == {"text": "my typed text", "files": []} and box.interactive
    assert all(m.text != "my typed text" for m in session.history)
    assert "my typed text" not in [m["content"] for m in Session("shared", store).messages()]


def test_clear_asks_before_it_erases_the_stored_conversation(store: str) -> None:
    """Clear erased the stored conversation at once: now the first click only asks (the conversation stays, in
    the page too if the chatbot's own clear icon emptied it), and a second click clears it."""
    ui = WebUI(counting(), conversations=store)
    chat = ui.new_session()
    chat.bind(Session("keep", store))
    say(chat, "one")
    display, _, same, button = ui._on_clear(chat)
    assert display == chat.display and len(display) == 2 and "click again" in button.value
    assert [m["content"] for m in Session("keep", store).messages()] == ["one", "seen 1"]
    display, box, same, button = ui._on_clear(chat)
    assert display == [] and button.value == "Clear" and chat.history == []
    assert Session("keep", store).messages() == []
    empty = ui.new_session()  # nothing to lose: one click
    assert ui._on_clear(empty)[0] == []

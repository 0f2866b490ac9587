"""The web UI's "try again from here" in Chromium, against `chatagent gui --auth ...` running as a real process: the
open conversation's history shows turn by turn, and a past message of the user's forks the conversation just before
it (a new conversation in the sidebar) and runs it there, edited; the original stays as it was. Two users: each sees
and forks only their own conversations."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from chatagent.sessions import Session, open_store
from tests.e2e.test_gui_browser import CHROMIUM
from tests.e2e.test_gui_conversations_browser import (  # noqa: F401  (browser: a fixture)
    GuiProcess,
    browser,
    expect_titles,
    gui,  # noqa: F401  (a fixture)
    open_as,
    send,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(240),
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed at /usr/bin/chromium"),
]


def conversations(tmp_path: Path, user: str) -> list[list[str]]:
    """Each stored conversation of `user`'s, as its messages' texts (newest conversation first)."""
    store = open_store(f"sqlite:///{tmp_path / 'conversations.db'}")
    return [[str(m.get("content")) for m in Session(i.id, store, user=user).messages()] for i in store.list(user)]


def wait_for(check, what: str) -> None:
    end = time.monotonic() + 20
    while not check():
        assert time.monotonic() < end, what
        time.sleep(0.1)


def retry(page, turn_label: str, edited: str) -> None:
    from playwright.sync_api import expect

    page.click("#history-message input")
    page.get_by_role("option", name=turn_label).click()
    expect(page.locator("#history-edit textarea")).not_to_have_value("")
    page.fill("#history-edit textarea", edited)
    page.click("#history-retry")


def open_history(page) -> None:
    page.locator("#history-panel").get_by_text("History").first.click()
    page.wait_for_selector("#history-steps", state="visible")


def test_try_again_from_a_past_message_forks_and_runs_it_and_each_user_has_their_own(
    gui: GuiProcess,  # noqa: F811
    browser,  # noqa: F811
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect

    alice = open_as(browser, gui.url, "alice")
    chat = alice.locator("#chatbot")
    send(alice, "plan a trip to Lisbon", "echo 1: plan a trip to Lisbon")
    send(alice, "and to Porto", "echo 3: and to Porto")
    open_history(alice)
    steps = alice.locator("#history-steps")
    expect(steps).to_contain_text("Turn 1")
    expect(steps).to_contain_text("Turn 2")
    expect(steps).to_contain_text("and to Porto")

    retry(alice, "Turn 2: and to Porto", "and to Faro")
    expect(chat).to_contain_text("echo 3: and to Faro")
    expect(chat).not_to_contain_text("Porto")
    expect(chat).to_contain_text("echo 1: plan a trip to Lisbon")
    expect_titles(alice, ["plan a trip to Lisbon", "plan a trip to Lisbon"])  # the branch, then the original
    wait_for(lambda: len(conversations(tmp_path, "alice")) == 2, "the branch is not stored")
    branch, original = conversations(tmp_path, "alice")
    assert original == [
        "plan a trip to Lisbon",
        "echo 1: plan a trip to Lisbon",
        "and to Porto",
        "echo 3: and to Porto",
    ]
    assert branch == ["plan a trip to Lisbon", "echo 1: plan a trip to Lisbon", "and to Faro", "echo 3: and to Faro"]
    expect(steps).to_contain_text("and to Faro")  # the branch's own history now

    retry(alice, "Turn 1: plan a trip to Lisbon", "plan a trip to Rome")  # the first message: a new conversation
    expect(chat).to_contain_text("echo 1: plan a trip to Rome")
    expect(chat).not_to_contain_text("Lisbon")
    expect_titles(alice, ["plan a trip to Rome", "plan a trip to Lisbon", "plan a trip to Lisbon"])
    alice.locator("#conversation-list label").nth(2).click()  # the original, unchanged
    expect(chat).to_contain_text("echo 3: and to Porto")
    expect(chat).not_to_contain_text("Faro")

    bob = open_as(browser, gui.url, "bob")
    open_history(bob)
    expect(bob.locator("#history-steps")).to_contain_text("No history yet")
    assert "Lisbon" not in bob.content() and "Rome" not in bob.content()
    send(bob, "hello from bob", "echo 1: hello from bob")
    expect(bob.locator("#history-steps")).to_contain_text("hello from bob")
    bob.click("#history-message input")
    names = [o.strip() for o in bob.get_by_role("option").all_inner_texts()]
    assert names == ["Turn 1: hello from bob"]  # none of Alice's
    bob.get_by_role("option", name="Turn 1: hello from bob").click()
    expect(bob.locator("#history-edit textarea")).to_have_value("hello from bob")
    bob.fill("#history-edit textarea", "hi from bob")
    bob.click("#history-retry")
    expect(bob.locator("#chatbot")).to_contain_text("echo 1: hi from bob")
    expect_titles(bob, ["hi from bob", "hello from bob"])
    assert len(conversations(tmp_path, "alice")) == 3 and len(conversations(tmp_path, "bob")) == 2
    assert all("bob" not in " ".join(c) for c in conversations(tmp_path, "alice"))

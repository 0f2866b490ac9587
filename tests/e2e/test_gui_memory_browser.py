"""The memory panel in Chromium, against `chatagent gui --auth ...` as a real process: an Assistant with memory=
answers from what the user said in an earlier conversation, the panel lists what it remembers about the signed-in
user only, and forgetting there forgets for good."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from chatagent import LongTermMemory
from tests.e2e.test_gui_conversations_browser import USERS, GuiProcess, expect_titles, open_as, send
from tests.e2e.test_gui_conversations_browser import browser as browser  # noqa: F401  (the fixture)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

AGENT = """
import os
from chatagent import Assistant, LongTermMemory, ScriptedLLM

def answer(messages, functions):
    asked = messages[-1].text
    if "What you remember about me" in asked and "allergic to peanuts" in asked:
        return "You told me before: you are allergic to peanuts."
    return "Noted." if "allergic" in asked else "I don't know."

memory = LongTermMemory(store=os.environ["MEMORY_STORE"], embedder=None)
agent = Assistant(llm=ScriptedLLM(default=answer), memory=memory, name="Assistant")
"""


@pytest.fixture
def gui(tmp_path: Path):
    server = GuiProcess(tmp_path)
    (tmp_path / "echo_agent.py").write_text(AGENT)  # the module GuiProcess runs: here an Assistant with memory
    server.env["MEMORY_STORE"] = str(tmp_path / "memory.db")
    server.start()
    yield server
    server.stop()


def shown(page) -> list[str]:
    return [t.strip() for t in page.locator("#memory-list label").all_inner_texts()]


def expect_shown(page, predicate, what: str) -> None:
    end = time.monotonic() + 20
    while not predicate(shown(page)):
        assert time.monotonic() < end, f"the memory panel shows {shown(page)}, expected {what}"
        time.sleep(0.1)


def test_an_assistant_remembers_the_signed_in_user_and_forgets_on_request(gui: GuiProcess, browser, tmp_path) -> None:
    assert set(USERS) == {"alice", "bob"}
    alice = open_as(browser, gui.url, "alice")
    from playwright.sync_api import expect

    send(alice, "I am allergic to peanuts.", "Noted.")
    expect_titles(alice, ["I am allergic to peanuts."])  # the conversation is stored, then a new one is started
    alice.click("#new-conversation")
    expect(alice.locator("#chatbot")).not_to_contain_text("Noted.")  # (else the question went on the first one)
    send(alice, "Can I eat peanuts at the party?", "You told me before: you are allergic to peanuts.")
    alice.click("#memories button >> nth=0")  # open the right-hand sidebar
    expect_shown(alice, lambda items: any("I am allergic to peanuts." in t for t in items), "the allergy")

    bob = open_as(browser, gui.url, "bob")
    send(bob, "Can I eat peanuts at the party?", "I don't know.")  # alice's memories are not his
    bob.click("#memories button >> nth=0")
    expect_shown(bob, lambda items: all("allergic" not in t for t in items), "none of alice's memories")

    alice.locator("#memory-list label", has_text="I am allergic to peanuts.").click()
    alice.click("#forget-memories")
    expect_shown(alice, lambda items: all("I am allergic to peanuts." not in t for t in items), "the allergy gone")
    left = [r.text for r in LongTermMemory(user="alice", store=str(tmp_path / "memory.db"), embedder=None).list()]
    assert "I am allergic to peanuts." not in left

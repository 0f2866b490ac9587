"""The web UI's memory panel without a login (issue 36, item 5), attacked with two browsers in headless Chromium
against `chatagent gui` as a real process: before the fix every visitor's panel was the machine's local user's
memory (read, and deleted, by anyone who opened the page). Each browser's panel is now its own, the memory its
turns store."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from chatagent import LongTermMemory
from chatagent.sessions import DEFAULT_USER
from tests.e2e.test_gui_browser import CHROMIUM
from tests.e2e.test_gui_conversations_browser import GuiProcess, send
from tests.e2e.test_gui_memory_browser import AGENT, expect_shown, shown
from tests.e2e.test_trust_gui_browser import chromium as chromium  # noqa: F401  (the fixture)
from tests.e2e.test_trust_gui_browser import open_page

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(240),
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed at /usr/bin/chromium"),
]

ALARM = "The alarm code of the house is 4711."


@pytest.fixture
def gui(tmp_path: Path):
    store = str(tmp_path / "memory.db")
    LongTermMemory(user=DEFAULT_USER, store=store, embedder=None).remember(ALARM)  # the machine's own user's memory
    server = GuiProcess(tmp_path)
    (tmp_path / "echo_agent.py").write_text(AGENT)
    server.args = [a for a in server.args if not a.startswith(("--auth", "alice:", "bob:"))]  # no login
    server.env["MEMORY_STORE"] = store
    server.start()
    yield server, store
    server.stop()


def open_panel(page) -> None:  # type: ignore[no-untyped-def]
    page.click("#memories button >> nth=0")
    page.wait_for_selector("#memory-list")


def test_each_browser_has_its_own_memory_and_none_the_local_users(gui, chromium) -> None:  # type: ignore[no-untyped-def]
    server, store = gui
    first = open_page(chromium, server.url)
    open_panel(first)
    send(first, "I am allergic to peanuts.", "Noted.")
    expect_shown(first, lambda items: any("allergic to peanuts" in t for t in items), "its own memory")
    assert not any("4711" in t for t in shown(first)), "a visitor's panel shows the local user's memory"

    other = open_page(chromium, server.url)
    open_panel(other)
    send(other, "Can I eat peanuts at the party?", "I don't know.")  # the first browser's memory is not recalled
    expect_shown(other, lambda items: all("allergic" not in t for t in items), "none of the first browser's")
    assert not any("4711" in t for t in shown(other))
    local = LongTermMemory(user=DEFAULT_USER, store=store, embedder=None).list()
    assert [r.text for r in local] == [ALARM], "a visitor's turn reached the local user's memory"

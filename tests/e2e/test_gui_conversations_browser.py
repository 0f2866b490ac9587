"""The conversation sidebar in Chromium, against `chatagent gui --auth ...` running as a real process: conversations
survive a reload and a server restart, can be made, switched, renamed and deleted, and each user sees only theirs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.test_gui_browser import CHROMIUM, CHROMIUM_ARGS, free_port
from tests.support.postgres import default_signals

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(240),
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed at /usr/bin/chromium"),
]

AGENT = """
from chatagent import BasicAgent, ScriptedLLM

agent = BasicAgent(llm=ScriptedLLM(default=lambda m, f: f"echo {len(m)}: {m[-1].text}"), name="Echo")
"""
USERS = {"alice": "pw-alice", "bob": "pw-bob"}
ROOT = Path(__file__).resolve().parents[2]


class GuiProcess:
    """`chatagent gui` with two users, on one port and one store, started and stopped like a service."""

    def __init__(self, tmp: Path) -> None:
        (tmp / "echo_agent.py").write_text(AGENT)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = [sys.executable, "-m", "chatagent", "gui", "--agent", f"{tmp / 'echo_agent.py'}:agent",
                     "--port", str(self.port), "--store", f"sqlite:///{tmp / 'conversations.db'}"]  # fmt: skip
        for user, password in USERS.items():
            self.args += ["--auth", f"{user}:{password}"]
        self.env = {**os.environ, "CHATAGENT_WORKSPACE": str(tmp / "workspace"), "PYTHONUNBUFFERED": "1"}
        self.log = tmp / "gui.log"
        self.p: subprocess.Popen | None = None

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.p = subprocess.Popen(
                self.args, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=default_signals
            )
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(self.url, timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.p.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the web UI did not start:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.p is not None and self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(30)


@pytest.fixture
def gui(tmp_path: Path):
    server = GuiProcess(tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


def open_as(browser, url: str, user: str):
    page = browser.new_context().new_page()
    page.set_default_timeout(30_000)
    page.goto(url)
    log_in(page, user)
    return page


def log_in(page, user: str) -> None:
    page.wait_for_selector("input[type=password], #chat-input textarea")
    if page.locator("input[type=password]").count():
        page.fill("input[type=text]", user)
        page.fill("input[type=password]", USERS[user])
        page.click("button:has-text('Login')")
    page.wait_for_selector("#chat-input textarea")


def send(page, text: str, answer: str) -> None:
    from playwright.sync_api import expect

    page.fill("#chat-input textarea", text)
    page.press("#chat-input textarea", "Enter")
    expect(page.locator("#chatbot")).to_contain_text(answer)
    expect(page.locator("#chat-input textarea")).to_be_enabled()


def titles(page) -> list[str]:
    return [t.strip() for t in page.locator("#conversation-list label").all_inner_texts()]


def expect_titles(page, expected: list[str]) -> None:
    end = time.monotonic() + 20
    while titles(page) != expected:
        assert time.monotonic() < end, f"the sidebar lists {titles(page)}, not {expected}"
        time.sleep(0.1)


def test_conversations_survive_reload_and_restart_and_stay_with_their_user(gui: GuiProcess, browser) -> None:
    from playwright.sync_api import expect

    alice = open_as(browser, gui.url, "alice")
    chat = alice.locator("#chatbot")
    send(alice, "plan a trip to Lisbon", "echo 1: plan a trip to Lisbon")
    expect_titles(alice, ["plan a trip to Lisbon"])
    alice.click("#new-conversation")
    expect(chat).not_to_contain_text("Lisbon")
    send(alice, "a recipe for soup", "echo 1: a recipe for soup")
    expect_titles(alice, ["a recipe for soup", "plan a trip to Lisbon"])

    alice.reload()  # the page forgets everything; the server does not
    log_in(alice, "alice")
    expect(chat).to_contain_text("echo 1: a recipe for soup")
    expect_titles(alice, ["a recipe for soup", "plan a trip to Lisbon"])
    alice.locator("#conversation-list label", has_text="plan a trip to Lisbon").click()
    expect(chat).to_contain_text("echo 1: plan a trip to Lisbon")
    expect(chat).not_to_contain_text("soup")
    send(alice, "and the hotels?", "echo 3: and the hotels?")  # the model was given the earlier turn
    alice.fill("#conversation-title textarea", "Lisbon trip")
    alice.click("#rename-conversation")
    expect_titles(alice, ["Lisbon trip", "a recipe for soup"])

    gui.stop()
    gui.start()
    alice.reload()
    log_in(alice, "alice")
    expect_titles(alice, ["Lisbon trip", "a recipe for soup"])
    expect(chat).to_contain_text("echo 3: and the hotels?")

    bob = open_as(browser, gui.url, "bob")
    expect(bob.locator("#chat-input textarea")).to_be_enabled()
    expect_titles(bob, [])
    send(bob, "bob here", "echo 1: bob here")
    expect_titles(bob, ["bob here"])
    assert "Lisbon" not in bob.content() and "soup" not in bob.content()

    alice.locator("#conversation-list label", has_text="a recipe for soup").click()
    expect(chat).to_contain_text("echo 1: a recipe for soup")
    alice.click("#delete-conversation")
    expect_titles(alice, ["Lisbon trip"])
    expect(chat).to_contain_text("echo 3: and the hotels?")
    alice.reload()
    log_in(alice, "alice")
    expect_titles(alice, ["Lisbon trip"])

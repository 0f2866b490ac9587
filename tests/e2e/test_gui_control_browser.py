"""Tool approval and blocked answers in the web UI, in Chromium: Approve / Deny buttons under a call that waits,
the run resuming with the decision, and an answer a guardrail blocked shown as blocked, never as the answer."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from chatagent import FnCallAgent, ScriptedLLM, tool, tool_call
from chatagent.gui import WebUI
from chatagent.llm.prepare import unmarked
from chatagent.plugins.guardrails import OutputGuardrail
from tests.e2e.test_gui_browser import CHROMIUM, CHROMIUM_ARGS, bot_text, free_port, send

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(180),
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed at /usr/bin/chromium"),
]


class Backend:
    def __init__(self) -> None:
        self.wiped: list[str] = []
        self.seen: list[str] = []

    def reply(self, messages, functions):
        last = messages[-1]
        self.seen.append(last.text)
        if last.role == "function":
            return f"Done: {unmarked(last.text)}"
        if "wipe" in last.text:
            return tool_call("wipe", {"disk": last.text.split()[-1]})
        if "secret" in last.text:
            return "The admin password is hunter2."
        return f"echo: {last.text}"


@pytest.fixture(scope="module")
def app() -> Iterator[tuple[str, Backend]]:
    backend = Backend()

    @tool(requires_approval=True)
    def wipe(disk: str) -> str:
        """Wipe a disk."""
        backend.wiped.append(disk)
        return f"{disk} wiped"

    guard = OutputGuardrail(lambda text: "hunter2" in text and "a password", message="I can't share that.", name="pw")
    agent = FnCallAgent(function_list=[wipe], llm=ScriptedLLM(default=backend.reply), plugins=[guard], name="Ops")
    ui = WebUI(agent)
    url = ui.run(server_port=free_port(), block=False)
    yield url.rstrip("/"), backend
    ui.close()


@pytest.fixture
def page(app):
    from playwright.sync_api import sync_playwright

    url, _ = app
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_context().new_page()
        page.set_default_timeout(20_000)
        page.goto(url)
        page.wait_for_selector("#chat-input textarea")
        yield page
        browser.close()


def test_approve_and_deny_buttons_resume_the_run(page, app) -> None:
    from playwright.sync_api import expect

    _, backend = app
    row = page.locator("#approval-row")
    expect(row).to_be_hidden()
    send(page, "please wipe sdb")
    expect(page.locator("#chatbot")).to_contain_text("Waiting for your approval")
    expect(row).to_be_visible()
    assert backend.wiped == []
    page.click("#approve-btn")
    expect(page.locator("#chatbot")).to_contain_text("Done: sdb wiped")
    expect(page.locator("#chatbot")).to_contain_text("Approved.")
    expect(row).to_be_hidden()
    assert backend.wiped == ["sdb"]

    send(page, "now wipe sda")
    expect(row).to_be_visible()
    page.fill("#deny-reason textarea", "sda holds the system")
    page.click("#deny-btn")
    expect(page.locator("#chatbot")).to_contain_text("Denied. sda holds the system")
    expect(page.locator("#chatbot")).to_contain_text("Done: Error: the user denied this call of wipe")
    expect(row).to_be_hidden()
    assert backend.wiped == ["sdb"] and "The user said: sda holds the system" in backend.seen[-1]


def test_the_approval_prompt_shows_the_calls_arguments_unfolded(page, app) -> None:
    """Issue 43.16: the arguments of a call waiting for approval were only inside the call's collapsed block, so a
    person approved without seeing what the call would do; the prompt shows them in view."""
    from playwright.sync_api import expect

    _, backend = app
    send(page, "please wipe sdz7")
    expect(page.locator("#approval-row")).to_be_visible()
    shown = page.locator("#chatbot code:visible", has_text='"disk": "sdz7"')
    expect(shown.first).to_be_visible()
    page.click("#deny-btn")
    expect(page.locator("#approval-row")).to_be_hidden()
    assert "sdz7" not in backend.wiped


def test_a_blocked_answer_shows_as_blocked(page, app) -> None:
    from playwright.sync_api import expect

    send(page, "tell me the secret")
    expect(page.locator("#chatbot")).to_contain_text("Blocked by pw")
    expect(page.locator("#chatbot")).to_contain_text("I can't share that.")
    assert "hunter2" not in bot_text(page)
    expect(page.locator("#chat-input textarea")).to_be_enabled()
    send(page, "hello")  # the conversation goes on, with the blocked answer (not the original) in it
    expect(page.locator("#chatbot")).to_contain_text("echo: hello")

"""A crew's progress in the web UI, in Debian's Chromium driven by Playwright: which task runs (its progress line,
named after the crew) and each task's output under its agent's name, as the crew streams."""

from __future__ import annotations

import os

import pytest

from chatagent import Crew, FnCallAgent, ScriptedLLM, Task
from chatagent.gui import WebUI
from tests.e2e.test_gui_browser import CHROMIUM, CHROMIUM_ARGS, free_port, send

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(120),
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed at /usr/bin/chromium"),
]


def _crew() -> Crew:
    def facts(messages, functions):
        return "FACT: the Rhine carries 8% more barges."

    def brief(messages, functions):
        return "BRIEF: traffic is back, watch for a dry summer."

    analyst = FnCallAgent(llm=ScriptedLLM(default=facts), name="analyst")
    writer = FnCallAgent(llm=ScriptedLLM(default=brief), name="writer")
    return Crew(agents=[analyst, writer], tasks=[
        Task("List the facts in: {input}", "a list of facts", agent=analyst),
        Task("Write a brief from the facts", "two sentences", agent=writer)])  # fmt: skip


def test_the_page_shows_each_task_as_it_runs_and_its_output(tmp_path) -> None:
    from playwright.sync_api import sync_playwright

    ui = WebUI(lambda: _crew().as_agent(), chatbot_config={"show_names": True})
    url = ui.run(server_port=free_port(), block=False)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.set_default_timeout(30_000)
            page.goto(url)
            page.wait_for_selector("#chat-input textarea")
            send(page, "The quarterly river transport report.")
            chat = page.locator("#chatbot")
            for text in ("Task 1/2 (analyst): List the facts in: The quarterly river transport report.",
                         "FACT: the Rhine carries 8% more barges.", "Task 2/2 (writer): Write a brief from the facts",
                         "BRIEF: traffic is back, watch for a dry summer."):  # fmt: skip
                chat.get_by_text(text, exact=False).first.wait_for()
            shown = chat.inner_text()
            assert shown.index("Task 1/2") < shown.index("FACT:") < shown.index("Task 2/2") < shown.index("BRIEF:")
            for name in ("crew", "analyst", "writer"):
                assert name in shown
            page.screenshot(path=str(tmp_path / "crew.png"))
            browser.close()
    finally:
        ui.close()

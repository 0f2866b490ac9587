"""A tool's questions (`chatagent.ask_user`) in the web UI, in Chromium: a form built from each question's JSON
Schema (a list of choices for an enum, a number box for an integer, a checkbox for a boolean, a JSON text box for an
object), an answer that does not fit said in the form with nothing run, and the run resuming with the answers."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from chatagent import FnCallAgent, ScriptedLLM, ask_user, tool, tool_call
from chatagent.gui import WebUI
from chatagent.llm.prepare import unmarked
from tests.e2e.test_gui_browser import CHROMIUM, CHROMIUM_ARGS, free_port, send

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(180),
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed at /usr/bin/chromium"),
]


class Backend:
    def __init__(self) -> None:
        self.booked: list[tuple] = []

    def reply(self, messages, functions):
        last = messages[-1]
        if last.role == "function":
            results = [unmarked(m.text) for m in messages if m.role == "function"]
            return "Done: " + " | ".join(results)
        return [tool_call("pick_date", {"city": "Rome"}), tool_call("nights", {}), tool_call("insured", {}),
                tool_call("seat", {})]  # fmt: skip


@pytest.fixture(scope="module")
def app() -> Iterator[tuple[str, Backend]]:
    backend = Backend()

    @tool
    def pick_date(city: str) -> str:
        """Pick the date of a trip."""
        day = ask_user(f"Which date for {city}?", {"type": "string", "enum": ["May 3", "May 4"]})
        backend.booked.append(("date", day))
        return f"{city} on {day}"

    @tool
    def nights() -> str:
        """How long the stay is."""
        n = ask_user("How many nights?", {"type": "integer", "minimum": 1})
        backend.booked.append(("nights", n))
        return f"{n} nights"

    @tool
    def insured() -> str:
        """Whether to insure the trip."""
        yes = ask_user("Insure the trip?", {"type": "boolean"})
        return "insured" if yes is True else "not insured"

    @tool
    def seat() -> str:
        """The seat."""
        where = ask_user("Seat?", {"type": "object", "properties": {"side": {"type": "string"}}, "required": ["side"]})
        return f"seat by the {where['side']}"

    agent = FnCallAgent(function_list=[pick_date, nights, insured, seat], llm=ScriptedLLM(default=backend.reply),
                        name="Travel")  # fmt: skip
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


def test_the_questions_form_answers_them_and_the_run_resumes(page, app) -> None:
    from playwright.sync_api import expect

    _, backend = app
    form = page.locator("#question-form")
    expect(form).to_be_hidden()
    send(page, "book me a trip")
    expect(form).to_be_visible()
    expect(page.locator("#chatbot")).to_contain_text("The agent asks: Which date for Rome?")
    expect(page.locator("#question-0")).to_contain_text("Which date for Rome?")
    for n, kind in enumerate(("choice", "number", "check", "json")):  # each schema's own field, only it
        expect(page.locator(f"#answer-{n}-{kind}")).to_be_visible()
        expect(page.locator(f"#answer-{n}-text")).to_be_hidden()
    page.click("#answer-0-choice input")
    page.get_by_role("option", name="May 4").click()
    page.fill("#answer-1-number input", "0")  # below the schema's minimum
    page.check("#answer-2-check input")
    page.fill("#answer-3-json textarea", '{"side": "window"}')
    page.click("#answer-btn")
    expect(page.locator("#question-error")).to_contain_text("does not fit")
    assert backend.booked == []  # nothing ran
    page.fill("#answer-1-number input", "2")
    page.click("#answer-btn")
    expect(page.locator("#chatbot")).to_contain_text("Done: Rome on May 4 | 2 nights | insured | seat by the window")
    expect(page.locator("#chatbot")).to_contain_text("Answered: May 4")
    expect(form).to_be_hidden()
    assert ("date", "May 4") in backend.booked and ("nights", 2) in backend.booked

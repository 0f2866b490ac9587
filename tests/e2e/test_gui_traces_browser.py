"""The trace page (`WebUI(..., traces=True)`, `chatagent gui --traces`) in Debian's Chromium: a crew's run on the chat
page appears at /traces as a tree (the crew, its tasks, its agents' runs, their model and tool calls); a tool call
opens on its arguments and result; an evaluation report lists its cases, each linked to its trace; another login
sees none of it, not even by the trace's id. Screenshots are kept in the test's directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from chatagent import Crew, FnCallAgent, ScriptedLLM, Task, tool, tool_call
from chatagent.evals import Case, ToolCalls, evaluate
from chatagent.gui import WebUI
from chatagent.run.traces import flush_traces
from chatagent.sessions import close_stores
from chatagent.sessions.traces import TraceStore
from tests.e2e.test_gui_browser import CHROMIUM, CHROMIUM_ARGS, free_port

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(240),
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed at /usr/bin/chromium"),
]
USERS = [("alice", "pw-alice"), ("bob", "pw-bob")]


@tool
def river_level(river: str) -> str:
    """The water level of a river."""
    return f"{river}: 3.2 m <b>rising</b>"


def crew() -> Crew:
    def facts(messages, functions):  # noqa: ANN001, ANN202
        if messages[-1].role == "function":
            return "FACT: the Rhine is at 3.2 m and rising."
        return tool_call("river_level", {"river": "Rhine"})

    analyst = FnCallAgent(llm=ScriptedLLM(default=facts), function_list=[river_level], name="analyst")
    writer = FnCallAgent(llm=ScriptedLLM(default="BRIEF: barges may run light."), name="writer")
    return Crew(agents=[analyst, writer], tasks=[Task("List the facts in: {input}", "facts", agent=analyst),
                                                 Task("Write a brief from the facts", "one line", agent=writer)],
                name="desk")  # fmt: skip


def log_in(page, url: str, user: str, password: str) -> None:  # noqa: ANN001
    page.goto(url)
    page.wait_for_selector("input[type=password]")
    page.fill("input[type=text]", user)
    page.fill("input[type=password]", password)
    page.click("button:has-text('Login')")


def test_a_crews_run_is_a_tree_its_tool_call_opens_and_another_login_sees_nothing(tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    store = f"sqlite:///{tmp_path / 'store.db'}"
    ui = WebUI(lambda: crew().as_agent(), conversations=store, traces=True, chatbot_config={"show_names": True})
    url = ui.run(server_port=free_port(), block=False, auth=USERS)
    # (before Playwright's sync API, which runs an event loop in this thread)
    report = evaluate(crew(), [Case({"input": "rivers"}, expected="BRIEF", evaluators=[
        ToolCalls([{"name": "river_level", "arguments": {"river": "Rhine"}}])])], store=store, owner="alice",
        name="river desk")  # fmt: skip
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            alice = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            alice.set_default_timeout(30_000)
            log_in(alice, url, "alice", "pw-alice")
            alice.wait_for_selector("#chat-input textarea:enabled")
            alice.fill("#chat-input textarea", "The river report.")
            alice.press("#chat-input textarea", "Enter")
            expect(alice.locator("#chatbot")).to_contain_text("BRIEF: barges may run light.")
            assert flush_traces(30)
            (run,) = TraceStore(store).list("alice", kind="run")
            alice.screenshot(path=str(tmp_path / "1-chat.png"))

            alice.goto(url + "traces")
            listing = alice.locator("#trace-list")
            expect(listing).to_contain_text("run desk")
            expect(alice.locator("#trace-totals")).to_contain_text("2 runs")  # the chat's, the evaluation's case
            listing.locator("label", has_text="run desk").click()
            view = alice.locator("#trace-view")
            expect(view).to_contain_text("task")
            names = [n.strip() for n in view.locator("summary .name").all_inner_texts()]
            assert names == ["run desk", "task Task 1", "run analyst", "model scripted", "tool river_level",
                             "model scripted", "task Task 2", "run writer", "model scripted"], names  # fmt: skip
            depths = [int(s.get_attribute("style").split(":")[1].rstrip("px") or 0)
                      for s in view.locator("summary .name").all()]  # fmt: skip
            assert depths == [0, 18, 36, 54, 54, 54, 18, 36, 54], depths  # the tree
            alice.screenshot(path=str(tmp_path / "2-tree.png"), full_page=True)
            tool_step = view.locator("details[data-kind=tool]")
            tool_step.locator(":scope > summary").click()
            body = tool_step.locator(".body")
            expect(body).to_contain_text('{"river": "Rhine"}')
            expect(body).to_contain_text("Rhine: 3.2 m <b>rising</b>")  # the tool's HTML, shown as text
            assert tool_step.locator(".body b", has_text="rising").count() == 0
            model_step = view.locator("details[data-kind=model]").nth(1)
            model_step.locator(":scope > summary").click()
            expect(model_step.locator(".body")).to_contain_text("The request")
            expect(model_step.locator(".body")).to_contain_text("Rhine: 3.2 m")  # the tool result the model got
            alice.screenshot(path=str(tmp_path / "3-tool-call.png"), full_page=True)

            alice.reload()
            alice.locator("#report-list label", has_text="river desk").click()
            report_view = alice.locator("#report-view")
            expect(report_view).to_contain_text("pass rate 100%")
            alice.screenshot(path=str(tmp_path / "4-report.png"), full_page=True)
            report_view.locator("a").first.click()  # the case's trace
            expect(alice.locator("#trace-view")).to_contain_text("case")
            assert report.cases[0].trace_id in alice.url
            expect(alice.locator("#trace-view details[data-kind=tool]")).to_have_count(1)

            bob = browser.new_context().new_page()
            bob.set_default_timeout(30_000)
            log_in(bob, url, "bob", "pw-bob")
            bob.wait_for_selector("#chat-input textarea")
            bob.goto(url + "traces?trace=" + run.id)
            expect(bob.locator("#trace-view")).to_contain_text("No such trace")
            expect(bob.locator("#trace-totals")).to_contain_text("0 runs")
            assert bob.locator("#trace-list label").count() == 0 and bob.locator("#report-list label").count() == 0
            assert "desk" not in bob.locator("#trace-view").inner_text()
            bob.screenshot(path=str(tmp_path / "5-other-login.png"), full_page=True)
            browser.close()
    finally:
        ui.close()
        close_stores()

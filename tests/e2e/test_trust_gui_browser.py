"""Attacks on the web UI without a login (issue 24 items 4 and 9), in headless Chromium against `chatagent gui`
running as a real process: a second browser sees none of the first one's conversations, a page under a rebinding
name (DNS rebinding: the attacker's name resolved to 127.0.0.1) gets no page and no data, and the web UI refuses to
serve another address than loopback without a login unless told."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import httpx
import pytest

from tests.e2e.test_gui_browser import CHROMIUM, CHROMIUM_ARGS
from tests.e2e.test_gui_conversations_browser import ROOT, GuiProcess, expect_titles, send
from tests.support import processes

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(240),
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed at /usr/bin/chromium"),
]


@pytest.fixture
def gui(tmp_path: Path):
    server = GuiProcess(tmp_path)
    server.args = [a for a in server.args if not a.startswith(("--auth", "alice:", "bob:"))]  # no login
    server.start()
    yield server
    server.stop()


@pytest.fixture
def chromium():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        args = [*CHROMIUM_ARGS, "--host-resolver-rules=MAP rebind.attacker.test 127.0.0.1"]
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=args)
        yield b
        b.close()


def open_page(browser, url: str):  # type: ignore[no-untyped-def]
    page = browser.new_context().new_page()  # a context of its own: another browser, its own cookies
    page.set_default_timeout(30_000)
    page.goto(url)
    page.wait_for_selector("#chat-input textarea:not([disabled])")
    return page


def test_each_browser_sees_only_its_own_conversations(gui: GuiProcess, chromium) -> None:  # type: ignore[no-untyped-def]
    first = open_page(chromium, gui.url)
    send(first, "my medical results", "echo 1: my medical results")
    expect_titles(first, ["my medical results"])
    other = open_page(chromium, gui.url)
    expect_titles(other, [])
    assert "medical" not in other.content()
    first.reload()  # the same browser keeps its identity (a signed cookie) across reloads
    first.wait_for_selector("#chat-input textarea:not([disabled])")
    expect_titles(first, ["my medical results"])


def test_a_rebinding_name_gets_no_page(gui: GuiProcess, chromium) -> None:  # type: ignore[no-untyped-def]
    first = open_page(chromium, gui.url)
    send(first, "the launch codes", "echo 1: the launch codes")
    page = chromium.new_context().new_page()
    response = page.goto(f"http://rebind.attacker.test:{gui.port}/")
    assert response is not None and response.status == 421
    assert "launch codes" not in page.content() and "chat-input" not in page.content()
    r = httpx.post(f"{gui.url}/gradio_api/queue/join", json={}, headers={"Origin": "http://evil.example"})
    assert r.status_code == 403


def test_a_network_address_without_a_login_is_refused_unless_asked(tmp_path: Path) -> None:
    agent = tmp_path / "a.py"
    agent.write_text(
        "from chatagent import BasicAgent, ScriptedLLM\nagent = BasicAgent(llm=ScriptedLLM(default='x'))\n"
    )
    env = {**os.environ, "CHATAGENT_WORKSPACE": str(tmp_path / "ws")}
    run = processes.run([sys.executable, "-m", "chatagent", "gui", "--agent", f"{agent}:agent", "--host", "0.0.0.0"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 2 and "without a login" in run.stderr

"""The web UI shows a tool call's long argument growing while the model writes it (Debian's Chromium driven by
Playwright against WebUI on 127.0.0.1; the OpenAI-compatible backend against the loopback server, which sends each
event of its reply only when the test lets it go)."""

from __future__ import annotations

import os
import re
import threading

import pytest

from chatagent import FnCallAgent
from chatagent.gui import WebUI
from tests.e2e.test_gui_browser import CHROMIUM, CHROMIUM_ARGS, free_port, send, wait_for
from tests.support.openai_server import OpenAIServer, Reply

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(180),
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed at /usr/bin/chromium"),
]

BODY = "".join(f"line {n:05d}: the quick brown fox jumps over the lazy dog\n" for n in range(340))  # ~20 kB
WRITING = re.compile(r"write_file \(writing ([\d,]+) characters…\)")


def test_a_long_argument_grows_in_the_page_as_it_streams(openai_server: OpenAIServer) -> None:
    from playwright.sync_api import sync_playwright

    written: list[str] = []

    def write_file(path: str, content: str) -> str:
        """Write a text file."""
        written.append(content)
        return f"wrote {len(content)} characters to {path}"

    gate = threading.Semaphore(0)
    call = ("write_file", {"path": "notes.txt", "content": BODY})
    openai_server.add(Reply(text="Saving.", tool_calls=[call], chunk_size=200, steps=gate), Reply(text="Saved."))
    cfg = {"model": "test-model", "model_server": openai_server.base_url, "api_key": "k"}
    ui = WebUI([FnCallAgent(function_list=[write_file], llm=cfg, name="Writer")])
    url = ui.run(server_port=free_port(), block=False).rstrip("/")
    counts: list[int] = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.set_default_timeout(20_000)
            page.goto(url)
            page.wait_for_selector("#chat-input textarea")
            send(page, "Save my notes.")
            chatbot = page.locator("#chatbot")

            def writing() -> int:
                found = WRITING.findall(chatbot.inner_text())
                return int(found[-1].replace(",", "")) if found else 0

            gate.release(5)  # the role, the text's two pieces, the call's start and its first piece
            wait_for(lambda: writing() > 0, timeout=30, what="the call's block with its first piece")
            counts.append(writing())
            # the arguments so far, shown open (the block's text may come a render after its header)
            wait_for(lambda: "line 00000" in chatbot.inner_text(), timeout=30, what="the call's first arguments")
            for _ in range(3):  # ten more pieces each time: the block grows
                gate.release(10)
                before = counts[-1]
                wait_for(lambda before=before: writing() >= before + 2000, timeout=30, what="the argument growing")
                counts.append(writing())
            assert "line 00" in chatbot.inner_text() and "characters before" in chatbot.inner_text()  # its end
            gate.release(1000)  # the rest
            wait_for(lambda: "Saved." in chatbot.inner_text(), timeout=60, what="the answer after the call")
            text = chatbot.inner_text()
            browser.close()
    finally:
        gate.release(1000)
        ui.close()
    assert counts[0] < 1000 and all(b > a for a, b in zip(counts, counts[1:], strict=False)), counts
    assert counts[-1] > 6000
    assert written == [BODY]  # the complete call ran
    assert not WRITING.search(text) and "Result of write_file" in text  # complete: shown as a call, no longer writing

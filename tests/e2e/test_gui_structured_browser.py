"""The web UI shows a structured answer's fields filling in while the model writes its JSON (Debian's Chromium
driven by Playwright against WebUI on 127.0.0.1)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

import pytest
from pydantic import BaseModel

from chatagent import BasicAgent, Message
from chatagent.gui import WebUI
from chatagent.llm.base import BaseChatModel, Usage
from tests.e2e.test_gui_browser import CHROMIUM, CHROMIUM_ARGS, free_port, send, wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(120),
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed at /usr/bin/chromium"),
]

PIECES = [
    '{"name": "Par',
    'is", ',
    '"country": "France", ',
    '"population": 2102650, ',
    '"landmarks": ["Eiffel Tower"',
    "]}",
]


class City(BaseModel):
    name: str
    country: str
    population: int
    landmarks: list[str]


class PacedJSON(BaseChatModel):
    """Writes the city's JSON piece by piece; each piece waits until the test lets it go (`step`)."""

    def __init__(self) -> None:
        super().__init__({"model": "paced-json"})
        self.step = threading.Semaphore(0)

    def _chat_stream(self, messages, functions, cfg, usage: Usage | None) -> Iterator[list[Message]]:
        for piece in PIECES:
            if not self.step.acquire(timeout=60):
                return
            yield [Message.unchecked("assistant", piece, None, None, None, {"index": 0})]


def test_the_fields_fill_in_as_the_json_streams() -> None:
    from playwright.sync_api import sync_playwright

    llm = PacedJSON()
    ui = WebUI([BasicAgent(llm=llm, name="Cities", response_format=City)])
    url = ui.run(server_port=free_port(), block=False).rstrip("/")
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.set_default_timeout(20_000)
            page.goto(url)
            page.wait_for_selector("#chat-input textarea")
            send(page, "Tell me about Paris.")

            def table() -> str:
                return "\n".join(page.locator("#chatbot table").all_inner_texts())

            seen, labels = [], []
            for want in ["Par", "Paris", "France", "2102650", "Eiffel Tower"]:  # the next piece goes when we say
                llm.step.release()
                wait_for(lambda want=want: want in table(), what=f"{want!r} in the fields table")
                seen.append(table())
                labels.append(page.locator("#chatbot").inner_text())
            llm.step.release()
            wait_for(lambda: "Fields (valid)" in page.locator("#chatbot").inner_text(), what="the validated fields")
            browser.close()
    finally:
        ui.close()
    assert "filling in" in labels[0] and "filling in" in labels[-1]
    assert "country" not in seen[0] and "population" not in seen[2] and "population" in seen[3]  # one by one
    assert "landmarks" in seen[-1]

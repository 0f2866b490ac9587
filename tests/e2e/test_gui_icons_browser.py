"""The web UI's icons are drawn (inline SVG), not emoji: in headless Chromium, on a machine without an emoji font,
every icon of a conversation with thinking, a tool call, its result, sources and a cut-off answer shows as a
drawing, and no emoji is left in the page's text."""

from __future__ import annotations

import io
import os
import re

import pytest

from chatagent import FnCallAgent, tool
from tests.e2e.test_gui_browser import CHROMIUM, CHROMIUM_ARGS, free_port, send, wait_for
from tests.support.openai_server import OpenAIServer, Reply

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(180),
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed at /usr/bin/chromium"),
]
EMOJI = re.compile("[\U0001f000-\U0001ffff\u2600-\u27bf\u2b00-\u2bff\u23e9-\u23fa\ufe0f]")


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return "found it"


def drawn_pixels(png: bytes) -> int:
    """How many pixels of a screenshot differ clearly from its most common colour (its background)."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("L")
    histogram = image.histogram()
    background = max(range(256), key=histogram.__getitem__)
    return sum(n for level, n in enumerate(histogram) if abs(level - background) > 60)


def test_every_icon_is_a_drawing_and_no_emoji_is_left(openai_server: OpenAIServer, tmp_path) -> None:
    from playwright.sync_api import sync_playwright

    from chatagent.gui import WebUI

    openai_server.add(
        Reply(reasoning="I should look it up.", tool_calls=[("lookup", {"query": "x"})]),
        Reply(text="Here it is.", finish_reason="length"),
    )
    llm = {"model": "m", "model_server": openai_server.base_url, "api_key": "k"}
    ui = WebUI(FnCallAgent(llm=llm, function_list=[lookup]))
    url = ui.run(server_port=free_port(), block=False)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1000, "height": 900})
            page.goto(url)
            page.wait_for_selector("#chat-input textarea", timeout=60_000)
            send(page, "Find x")
            chatbot = page.locator("#chatbot")
            wait_for(lambda: "Cut off" in chatbot.inner_text(), 60, "the answer and its cut-off note")
            page.screenshot(path=str(tmp_path / "page.png"))
            text = chatbot.inner_text()
            assert not EMOJI.findall(text), EMOJI.findall(text)
            icons = chatbot.locator("svg.chatagent-icon")
            assert icons.count() >= 4  # thinking, the tool, its result, the cut-off note
            for i in range(icons.count()):
                icon = icons.nth(i)
                box = icon.bounding_box()
                assert box is not None and 10 <= box["width"] <= 20 and 10 <= box["height"] <= 20, box
                assert drawn_pixels(icon.screenshot()) >= 8, f"icon {i} is blank"
            browser.close()
    finally:
        ui.close()

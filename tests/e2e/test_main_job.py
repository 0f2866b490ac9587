"""The main job on the real embedded model (llama.cpp + SmolLM2-135M, no key, no network): a 120-page PDF with one
fact planted on page 73, asked through the Assistant in Python and in the browser. No error, and the sources name
page 73. Answers are kept short (max_tokens) so the suite stays quick; what a 135M model says is not judged.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import textwrap
import threading
from pathlib import Path

import pytest

from chatagent import Assistant
from chatagent.rag import DocStore, Progress

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

PAGES = 120
FACT_PAGE = 73
FACT = "The Zephyr-9 relief valve must be torqued to 42 newton metres after every inspection."
QUESTION = "What torque does the Zephyr-9 relief valve need?"
PARTS = ["pump", "boiler", "fan", "filter", "heater", "pipe", "meter", "gauge", "motor", "belt", "seal", "tank"]
SHORT = {"temperature": 0, "max_tokens": 24}
ENV = ("DASHSCOPE_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL")
CHROMIUM = "/usr/bin/chromium"


def filler(n: int) -> str:
    """A page of plausible maintenance prose, different on every page."""
    part, other = PARTS[n % len(PARTS)], PARTS[(n * 5 + 3) % len(PARTS)]
    sentences = [
        f"Chapter {n // 10 + 1}, section {n}: servicing the {part} of line {n % 7 + 1}.",
        f"Switch off the {part} and lock the isolator before any work; tag it with the date and your name.",
        f"Inspect the {part} housing for cracks, corrosion and loose fixings, and record each finding in the log.",
        f"The {part} is cleaned every {n % 9 + 2} weeks with a dry brush; never use solvents near the {other}.",
        f"If the {other} shows a fault light, reset it once and call the shift engineer if the light returns.",
        f"Spare parts for the {part} are kept in store {n % 4 + 1}, shelf {n % 11 + 1}, under code P-{1000 + n}.",
    ]
    return " ".join(sentences * 3)


@pytest.fixture(scope="module")
def manual(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=10)
    for n in range(1, PAGES + 1):
        pdf.add_page()
        pdf.multi_cell(0, 5, FACT + " " + filler(n) if n == FACT_PAGE else filler(n))
    path = tmp_path_factory.mktemp("main-job") / "plant-manual.pdf"
    pdf.output(str(path))
    return path


@pytest.fixture(scope="module")
def llm():
    from chatagent.llm.local import LocalModel

    return LocalModel({"generate_cfg": SHORT})


def test_the_assistant_answers_from_a_large_pdf_and_cites_the_page(manual: Path, llm, tmp_path: Path) -> None:
    seen: list[Progress] = []
    bot = Assistant(llm=llm, rag_cfg={"store": DocStore(tmp_path / "ws"), "on_progress": seen.append})
    ask = [{"role": "user", "content": [{"text": QUESTION}, {"file": str(manual)}]}]
    run = bot.run(ask)
    steps = list(run)
    response = steps[-1]
    answer = response[-1]
    assert answer["role"] == "assistant" and answer["content"].strip()
    # the best passage came first, before the model said anything, its matching sentence marked
    first = next(step[-1] for step in steps if step and (step[-1].get("extra") or {}).get("passage"))
    assert first["content"] == ""
    passage = answer["extra"]["passage"]
    assert passage["file"] == "plant-manual.pdf" and passage["pages"] == [FACT_PAGE]
    assert FACT in [passage["text"][a:b] for a, b in passage["highlights"]]
    # the small model read that passage alone, with a short instruction (nothing long to recite): before, a sixth of
    # its window of excerpts and the long instruction, about 1,500 tokens
    assert 0 < run.usage.prompt_tokens < 700
    sources = answer["extra"]["sources"]
    assert [FACT_PAGE] in [s["pages"] for s in sources], sources
    assert all(len(s["pages"]) == 1 for s in sources)  # no excerpt straddles pages
    first = next(s for s in sources if s["pages"] == [FACT_PAGE])
    assert "Zephyr-9" in first["text"] and first["file"] == "plant-manual.pdf"
    assert [(p.done, p.total) for p in seen if p.stage == "read"] == [(n, PAGES) for n in range(1, PAGES + 1)]
    assert run.usage.prompt_tokens <= llm.input_limit()
    # a follow-up in the same conversation answers too, and the sources still hold the fact
    follow = list(bot.run(ask + response + [{"role": "user", "content": "And after a repair?"}]))[-1]
    assert follow[-1]["content"].strip() and follow[-1]["extra"]["sources"]


def test_the_readme_first_snippets_run_without_a_key(monkeypatch: pytest.MonkeyPatch, llm) -> None:
    """'Your first agent' and the streaming snippet, as written, on a machine with no key (answers kept short)."""
    from chatagent.llm.local import model as local

    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setitem(local.DEFAULT_WEIGHTS_CFG, "max_tokens", 16)
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    first = readme[readme.index("## Your first agent") : readme.index("## What it does")]
    streaming = readme[readme.index("**Streaming.**") : readme.index("**Tools.**")]
    blocks = [re.findall(r"```python\n(.*?)```", part, flags=re.S)[0] for part in (first, streaming)]
    for code in blocks:
        assert "llm=" not in code  # the default resolution, as a new user has it
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(textwrap.dedent(code), "README.md", "exec"), {})
        assert out.getvalue().strip()
    # the streaming snippet printed each piece once: its output is the answer, not the answer repeated
    lines = out.getvalue()
    assert len(lines) < 400


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed at /usr/bin/chromium")
def test_the_page_shows_progress_the_model_and_the_sources(manual: Path, llm, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    from chatagent.gui import WebUI
    from tests.e2e.test_gui_browser import CHROMIUM_ARGS, free_port, send

    status_seen = threading.Event()

    def hold_first_page(p: Progress) -> None:  # the page must show "Reading ..." before the run goes on
        if p.stage == "read" and p.done == 1:
            status_seen.wait(60)

    store = DocStore(tmp_path / "ws")
    bot = Assistant(llm=llm, name="Assistant", rag_cfg={"store": store, "on_progress": hold_first_page})
    ui = WebUI(bot)
    url = ui.run(server_port=free_port(), block=False)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.set_default_timeout(30_000)
            page.goto(url)
            expect(page.locator("#model-note")).to_contain_text("SmolLM2-135M-Instruct")
            expect(page.locator("#model-note")).to_contain_text("DASHSCOPE_API_KEY")
            page.set_input_files("#chat-input input[type=file]", str(manual))
            expect(page.locator("#chat-input").get_by_role("listitem", name="File thumbnail")).to_have_count(1)
            send(page, QUESTION)
            reading = f"Reading plant-manual.pdf: page 1 of {PAGES}"
            expect(page.locator("#chatbot")).to_contain_text(reading, timeout=120_000)  # a busy machine is slow
            status_seen.set()
            sources = page.locator("#chatbot").get_by_text("Sources:")
            expect(sources).to_be_visible(timeout=300_000)
            title = sources.inner_text()
            assert re.search(rf"\b{FACT_PAGE}\b", title), title
            # the best passage first, its file and page named, the sentence that answers marked; then the small
            # model's answer, labelled as its summary of that passage
            bot_text = page.locator('#chatbot [data-testid="bot"]')
            passage = bot_text.filter(has_text="The best-matching passage of your files:")
            expect(passage).to_contain_text(f"plant-manual.pdf, p. {FACT_PAGE}", timeout=30_000)
            expect(passage.locator("mark").first).to_have_text(FACT, timeout=30_000)
            summary = bot_text.filter(has_text="The model's summary of this passage")
            expect(summary).to_have_count(1, timeout=30_000)
            order = page.locator('#chatbot [data-testid="bot"]').all_inner_texts()
            at = next(i for i, t in enumerate(order) if "best-matching passage" in t)
            assert at < next(i for i, t in enumerate(order) if "summary of this passage" in t), order
            sources_block = page.locator('#chatbot [data-testid="bot"]').filter(has_text="Sources:")
            snippet = sources_block.get_by_text("after every inspection")
            expect(snippet).to_be_hidden()  # collapsed: file and page show, the excerpt on request
            sources.click()
            expect(snippet).to_be_visible()
            expect(page.locator("#chat-input textarea")).to_be_enabled()
            assert "Error" not in page.locator("#chatbot").inner_text()
            page.screenshot(path=str(tmp_path / "main-job.png"), full_page=True)
            browser.close()
    finally:
        status_seen.set()
        ui.close()

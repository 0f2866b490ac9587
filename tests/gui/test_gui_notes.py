"""What the page says besides the chat: the sources under an answer, a cut answer, the model, and progress."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from chatagent import Assistant, BasicAgent, Message
from chatagent.gui.icons import icon
from chatagent.gui.notes import model_label, model_note
from chatagent.gui.render import CUT_NOTE, LOOP_NOTE, message_text, render_message
from chatagent.gui.session import ChatSession, user_message
from chatagent.rag import DocStore
from tests.gui.test_gui_session import PacedLLM

pytestmark = pytest.mark.timeout(30)


def test_sources_show_under_the_answer_escaped_and_grouped_by_file() -> None:
    sources = [
        {"file": "R-intro.pdf", "pages": [39], "text": "Use <b>read.table</b> & friends"},
        {"file": "R-intro.pdf", "pages": [40], "text": "scan()"},
        {"file": "notes<img src=x>.md", "pages": [1], "text": "x"},
    ]
    views = render_message(Message("assistant", "Use read.table.", extra={"sources": sources}))
    assert message_text(views[0]) == "Use read.table."
    block = views[-1]
    assert block["metadata"]["title"] == f"{icon('sources')} Sources: R-intro.pdf pp. 39, 40; notesimg srcx.md p. 1"
    body = message_text(block)
    assert "**1. R-intro.pdf, p. 39**" in body and "Use &lt;b>read.table&lt;/b> &amp; friends" in body
    assert "<img" not in body and "<b>" not in body


def test_an_answer_cut_by_the_token_limit_says_so() -> None:
    views = render_message(Message("assistant", "The limit is", extra={"stop_reason": "length"}))
    assert [message_text(v) for v in views] == ["The limit is", CUT_NOTE]
    assert all(message_text(v) != CUT_NOTE for v in render_message(Message("assistant", "Done.")))
    looped = render_message(Message("assistant", "Again and again", extra={"stop_reason": "repetition"}))
    assert [message_text(v) for v in looped] == ["Again and again", LOOP_NOTE]


def test_the_model_note_names_the_model_and_explains_the_embedded_one() -> None:
    embedded = SimpleNamespace(model_type="local", model="/x/SmolLM2-135M-Instruct.Q4_1.gguf", default_weights=True)
    qwen = SimpleNamespace(model_type="dashscope", model="qwen-plus")
    vllm = SimpleNamespace(model_type="oai", model="Qwen2.5-7B", base_url="http://10.0.0.5:8000/v1")
    assert model_label(embedded) == "SmolLM2-135M-Instruct (embedded, on this computer)"
    assert model_label(qwen) == "qwen-plus (DashScope)" and model_label(vllm) == "Qwen2.5-7B (10.0.0.5:8000)"
    note = model_note([embedded])
    assert note.startswith("**Model:** SmolLM2-135M-Instruct (embedded, on this computer).")
    assert "small" in note and "DASHSCOPE_API_KEY" in note and "OPENAI_API_KEY" in note
    assert model_note([qwen, qwen]) == "**Model:** qwen-plus (DashScope)."
    assert "<" not in model_note([SimpleNamespace(model_type="oai", model="<script>", base_url=None)])


def pdf(path: Path, pages: int) -> Path:
    from fpdf import FPDF

    doc = FPDF()
    doc.set_font("Helvetica", size=11)
    for n in range(1, pages + 1):
        doc.add_page()
        doc.multi_cell(0, 6, f"Page {n}: the pump is serviced every {n} weeks.")
    doc.output(str(path))
    return path


def test_the_chat_shows_what_the_run_does_until_the_answer_starts(tmp_path: Path) -> None:
    """Reading page by page, searching, waiting for the model: each shows as a status line, gone once text comes."""
    shown: list[str] = []
    seen = threading.Condition()

    def wait_until_shown(progress) -> None:  # hold each page until the page has shown it: no race, no sleep
        if progress.stage == "read":
            with seen:
                seen.wait_for(lambda: any(f"page {progress.done} of 3" in s for s in shown), timeout=10)

    llm = PacedLLM(n=3, delay=0.01)
    store = DocStore(tmp_path / "ws")
    bot = Assistant(llm=llm, files=[str(pdf(tmp_path / "pumps.pdf", 3))], rag_cfg={"store": store})
    bot.on_progress = wait_until_shown
    session = ChatSession([bot])
    session.add_user(user_message("How often is the pump serviced?", []))

    async def go() -> list[list[dict]]:
        updates = []
        async for display in session.stream_turn(bot):
            updates.append(display)
            with seen:
                shown.append(message_text(display[-1]))
                seen.notify_all()
        return updates

    updates = asyncio.run(go())
    statuses = [s for s in shown if s.startswith(f"{icon('waiting')}")]
    assert any("Reading pumps.pdf: page 1 of 3" in s for s in statuses)
    assert any("Reading pumps.pdf: page 3 of 3" in s for s in statuses)
    assert not any(message_text(m).startswith(f"{icon('waiting')}") for m in updates[-1])  # the answer replaced it
    assert message_text(updates[-1][1]).startswith("w0 w1 w2")


def test_a_plain_agent_shows_it_waits_for_the_model() -> None:
    release = threading.Event()

    class Held(PacedLLM):
        def _chat_stream(self, messages, functions, cfg, usage):
            release.wait(10)
            yield from super()._chat_stream(messages, functions, cfg, usage)

    llm = Held(n=2, delay=0.0)
    bot = BasicAgent(llm=llm)
    session = ChatSession([bot])
    session.add_user(user_message("hi", []))

    async def go() -> list[str]:
        texts = []
        async for display in session.stream_turn(bot):
            texts.append(message_text(display[-1]))
            if "Waiting for the model (paced" in texts[-1]:
                release.set()
        return texts

    texts = asyncio.run(go())
    assert any(t.startswith(f"{icon('waiting')} *Waiting for the model (paced (base))") for t in texts)
    assert texts[-1] == "w0 w1 "

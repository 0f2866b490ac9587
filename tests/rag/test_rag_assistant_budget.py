"""The Assistant within the model's window: budgets, history trimmed first, follow-ups that reuse the prompt's start,
progress page by page. ScriptedLLM with a small `max_input_tokens` stands for a small-window model."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatagent import Assistant, ModelServiceError, ScriptedLLM, tool
from chatagent.llm.budget import prompt_tokens
from chatagent.rag import DocStore, Progress
from chatagent.schema import Message

pytestmark = pytest.mark.timeout(60)

TOPICS = ["boilers", "pumps", "valves", "fans", "filters", "heaters", "pipes", "meters"]


def manual_text() -> str:
    """A long text file: paragraphs about several topics, one fact per topic."""
    paragraphs = []
    for n in range(120):
        topic = TOPICS[n % len(TOPICS)]
        paragraphs.append(f"Section {n} on {topic}: the {topic} are checked every {n + 2} days by the crew on duty.")
    paragraphs[41] = "The boiler pressure limit is 7 bar; above it the safety valve opens."
    return "\n\n".join(paragraphs)


@pytest.fixture
def store(tmp_path: Path) -> DocStore:
    return DocStore(tmp_path / "ws", chunk_tokens=80, overlap_tokens=10)


@pytest.fixture
def manual(tmp_path: Path) -> Path:
    path = tmp_path / "manual.txt"
    path.write_text(manual_text(), encoding="utf-8")
    return path


def sent_tokens(llm: ScriptedLLM, call: int = 0) -> int:
    return prompt_tokens(llm.calls[call].messages, llm.tokenizer)


def test_excerpts_fit_a_small_window_without_context_too_long(manual: Path, store: DocStore) -> None:
    """The default budget follows the model's window: 4000 tokens of excerpts into a 900-token window used to fail."""
    llm = ScriptedLLM(["7 bar."], generate_cfg={"max_input_tokens": 900})
    bot = Assistant(llm=llm, files=[str(manual)], rag_cfg={"store": store})
    out = bot.run_nonstream([{"role": "user", "content": "What is the boiler pressure limit?"}])
    assert out[-1]["content"] == "7 bar."
    assert 600 < sent_tokens(llm) <= 900  # the room is used, and not overrun
    assert any("7 bar" in s["text"] for s in out[-1]["extra"]["sources"])


def test_tools_count_against_the_window(manual: Path, store: DocStore) -> None:
    @tool
    def lookup(part_number: str, plant: str = "north", include_history: bool = False) -> str:
        """Look up a spare part in the stores of a plant, with its stock level, supplier and the history of its
        orders over the last five years, for the maintenance crew."""
        return "in stock"

    llm = ScriptedLLM(["7 bar."], generate_cfg={"max_input_tokens": 900})
    bot = Assistant(llm=llm, function_list=[lookup], files=[str(manual)], rag_cfg={"store": store})
    bot.run_nonstream([{"role": "user", "content": "What is the boiler pressure limit?"}])
    schemas = llm.functions_tokens(bot.functions)
    assert schemas > 50
    assert sent_tokens(llm) + schemas <= 900


def test_history_gives_way_before_the_excerpts(manual: Path, store: DocStore) -> None:
    llm = ScriptedLLM(["7 bar."], generate_cfg={"max_input_tokens": 900})
    bot = Assistant(llm=llm, files=[str(manual)], rag_cfg={"store": store, "max_ref_token": 400})
    history: list[dict] = []
    for n in range(4):
        history += [
            {"role": "user", "content": f"Old question {n} about something else entirely? " * 6},
            {"role": "assistant", "content": f"Old answer {n}, long and not about boilers. " * 12},
        ]
    bot.run_nonstream(history + [{"role": "user", "content": "What is the boiler pressure limit?"}])
    sent = llm.calls[0].messages
    assert "Old question 0" not in " ".join(m.text for m in sent)  # the oldest turns were dropped
    latest = sent[-1].text
    excerpts = latest[: latest.index("My question:")]
    assert "7 bar" in excerpts and llm.count_tokens(excerpts) > 300  # the excerpts kept their budget
    assert sent_tokens(llm) <= 900


def test_a_question_too_long_for_the_window_is_shortened_or_a_clear_error(manual: Path, store: DocStore) -> None:
    question = "Tell me about the boilers. " * 80 + "Which one is the oldest?"
    llm = ScriptedLLM(["never"], generate_cfg={"max_input_tokens": 300, "long_input": "raise"})
    bot = Assistant(llm=llm, files=[str(manual)], rag_cfg={"store": store})
    with pytest.raises(ModelServiceError) as e:
        bot.run_nonstream([{"role": "user", "content": question}])
    assert e.value.code == "context_too_long" and "max_input_tokens=300" in e.value.message
    assert llm.calls == []
    # by default, as Qwen-Agent: the question is cut in the middle, its beginning and end kept, and answered
    llm = ScriptedLLM(["The oldest is boiler 1."], generate_cfg={"max_input_tokens": 300})
    out = Assistant(llm=llm, files=[str(manual)], rag_cfg={"store": store}).run_nonstream(
        [{"role": "user", "content": question}]
    )
    assert out[-1]["content"] == "The oldest is boiler 1."
    sent = llm.calls[0].messages[-1].text
    assert sent.startswith("Tell me about the boilers.") and sent.endswith("Which one is the oldest?")
    assert sent_tokens(llm) <= 300


def test_a_follow_up_starts_with_the_prompt_before_it_and_repeats_no_excerpt(manual: Path, store: DocStore) -> None:
    """What makes a prompt cache work: turn 2's prompt begins with turn 1's prompt and its answer, unchanged."""
    llm = ScriptedLLM(["The limit is 7 bar.", "For example, at 8 bar the valve opens."])
    bot = Assistant(llm=llm, files=[str(manual)], rag_cfg={"store": store, "max_ref_token": 300})
    first = [{"role": "user", "content": "What is the boiler pressure limit?"}]
    answer = bot.run_nonstream(first)
    follow = bot.run_nonstream(first + answer + [{"role": "user", "content": "And an example?"}])
    one, two = llm.calls[0].messages, llm.calls[1].messages
    assert [m.model_dump() for m in two[: len(one)]] == [m.model_dump() for m in one]
    assert two[len(one)].role == "assistant" and two[len(one)].text == "The limit is 7 bar."
    sent_first, sent_follow = one[-1].text, two[-1].text
    excerpts = [block for block in sent_first.split("\n\n[")[1:]]
    assert excerpts and not any(block.split("]\n", 1)[1][:60] in sent_follow for block in excerpts)
    # "And an example?" says too little alone: it is searched as the question before it, whose excerpts the
    # model has already: nothing new to read, the same sources
    assert sent_follow == "And an example?"
    assert follow[-1]["extra"]["sources"] == answer[-1]["extra"]["sources"]
    assert any("7 bar" in s["text"] for s in follow[-1]["extra"]["sources"])


def test_the_earlier_turn_keeps_its_excerpts_when_files_come_later(tmp_path: Path, store: DocStore) -> None:
    a = tmp_path / "a.txt"
    a.write_text("Alpha: the code is 11.", encoding="utf-8")
    b = tmp_path / "b.txt"
    b.write_text("Beta: the code is 22.", encoding="utf-8")
    llm = ScriptedLLM(["11.", "22."])
    bot = Assistant(llm=llm, rag_cfg={"store": store})
    first = [{"role": "user", "content": [{"text": "alpha code?"}, {"file": str(a)}]}]
    answer = bot.run_nonstream(first)
    bot.run_nonstream(first + answer + [{"role": "user", "content": [{"text": "beta code?"}, {"file": str(b)}]}])
    one, two = llm.calls[0].messages, llm.calls[1].messages
    assert [m.model_dump() for m in two[: len(one)]] == [m.model_dump() for m in one]
    assert "Beta: the code is 22." in two[-1].text and "Alpha" not in two[-1].text


def pdf_file(path: Path, pages: int, fact_page: int, fact: str) -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    for n in range(1, pages + 1):
        pdf.add_page()
        text = fact if n == fact_page else f"Page {n} describes routine {TOPICS[n % len(TOPICS)]} maintenance."
        pdf.multi_cell(0, 6, text)
    pdf.output(str(path))
    return path


def test_progress_page_by_page_and_as_run_events(tmp_path: Path, store: DocStore) -> None:
    pdf = pdf_file(tmp_path / "plant.pdf", 12, 7, "The boiler pressure limit is 7 bar.")
    seen: list[Progress] = []
    events = []
    llm = ScriptedLLM(["7 bar [plant.pdf, p. 7]."])
    bot = Assistant(llm=llm, files=[str(pdf)], rag_cfg={"store": store, "on_progress": seen.append})
    out = bot.run_nonstream([{"role": "user", "content": "boiler pressure limit?"}], callbacks=[events.append])
    reads = [p for p in seen if p.stage == "read"]
    assert [(p.done, p.total) for p in reads] == [(n, 12) for n in range(1, 13)]
    assert [p.stage for p in seen[12:]] == ["parse", "index", "search"]
    assert reads[3].describe() == "Reading plant.pdf: page 4 of 12"
    texts = [e.data["text"] for e in events if e.kind == "progress"]
    assert texts[0] == "Reading plant.pdf: page 1 of 12" and texts[-1] == "Searching the files"
    kinds = [e.kind for e in events]
    assert kinds.index("progress") < kinds.index("llm_start")
    assert out[-1]["extra"]["sources"][0]["pages"] == [7]


def test_no_sources_key_without_files(store: DocStore) -> None:
    llm = ScriptedLLM(["hi"])
    out = Assistant(llm=llm, rag_cfg={"store": store}).run_nonstream([{"role": "user", "content": "hello"}])
    assert "sources" not in (out[-1].get("extra") or {})
    assert isinstance(llm.calls[0].messages[0], Message)


@pytest.mark.parametrize("reader", ["pdfium", "pypdf"])
def test_the_pdf_parsers_report_each_page(tmp_path: Path, reader: str) -> None:
    from chatagent.rag import parsers, pdf
    from chatagent.rag.document import ParseJob

    data = pdf_file(tmp_path / "p.pdf", 5, 2, "Fact.").read_bytes()
    pages: list[tuple[int, int]] = []
    parse = pdf.parse_pdf_pdfium if reader == "pdfium" else pdf.parse_pdf_pypdf
    assert len(parse(data, ParseJob("p.pdf", on_page=lambda done, total: pages.append((done, total))))) == 5
    assert pages == [(n, 5) for n in range(1, 6)]
    seen: list[tuple[int, int]] = []
    doc = parsers.parse_bytes(data, "p.pdf", on_page=lambda done, total: seen.append((done, total)))
    assert len(doc.pages) == 5 and seen == pages


def test_a_short_question_that_stands_alone_is_not_searched_as_the_one_before(tmp_path: Path, store: DocStore) -> None:
    """Issue 31.12: "What is a factor?" after a question about reading files got that question's excerpts."""
    manual = tmp_path / "r.txt"
    filler = "\n\n".join(f"Section {n} says little about anything in particular." for n in range(40))
    manual.write_text(
        filler + "\n\nTo read data from a file use read.table; each line of the file becomes a row.\n\n" + filler
        + "\n\nA factor is a vector object used to specify a discrete classification of other vectors.",
        encoding="utf-8",
    )  # fmt: skip
    llm = ScriptedLLM(["Use read.table.", "A classification.", "For example factor(state)."])
    bot = Assistant(llm=llm, files=[str(manual)], rag_cfg={"store": store, "max_ref_token": 120})
    first = [{"role": "user", "content": "How do I read data from a file?"}]
    history = first + bot.run_nonstream(first)
    second = history + [{"role": "user", "content": "What is a factor?"}]
    answer = bot.run_nonstream(second)
    assert "A factor is a vector object" in answer[-1]["extra"]["sources"][0]["text"]
    assert "A factor is a vector object" in llm.calls[1].messages[-1].text
    # a follow-up that names nothing of its own is still searched as the question before it
    follow = bot.run_nonstream(second + answer + [{"role": "user", "content": "Can you show an example?"}])
    assert follow[-1]["extra"]["sources"] == answer[-1]["extra"]["sources"]

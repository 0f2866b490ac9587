"""The evaluation the issue asks for: an Assistant over a real PDF, ten cases (gold pages among the sources, a judge
on the loopback OpenAI-compatible model, a tool-call trajectory), the report in the terminal, as JSON and on the
viewer's page (each case linked to its trace), the same on a second run; and a worse model's report, compared,
showing what regressed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from chatagent import Assistant, ScriptedLLM, tool, tool_call
from chatagent.evals import Case, Dataset, EvaluationReport, Judge, Sources, ToolCalls, evaluate
from chatagent.gui.trace_render import report_html, trace_html
from chatagent.sessions.traces import TraceStore
from tests.support.documents import make_pdf

PAGES = [
    "Toaster T-100 user manual. Contents: safety, returns, warranty, cleaning, crumbs, settings, travel.",
    "Returns. You may return the toaster within 30 days of purchase for a full refund, with the receipt.",
    "Warranty. The heating element is covered by a warranty of 2 years; the casing by 1 year.",
    "Cleaning. Unplug the toaster and let it cool for 20 minutes before cleaning it with a dry cloth.",
    "Crumb tray. Empty the crumb tray every week: slide it out from the back of the toaster.",
    "Browning settings. Setting 1 is the lightest, setting 7 the darkest; bagels toast best on setting 5.",
    "Travel. The toaster works on 110 to 240 volts; use a plug adapter abroad, never a voltage converter.",
    "Spare parts. A replacement crumb tray costs 12 euros; a lever knob costs 4 euros.",
]
EXCERPT = re.compile(r"\[(?P<file>[^,\]]+), p\. (?P<page>\d+)\]\s*(?P<text>[^\[<]*)")


@tool
def price_of(part: str, count: int = 1) -> str:
    """The price of `count` spare parts."""
    return f"{count} x {part}: {12 * count if 'tray' in part else 4 * count} euros"


def question_of(text: str) -> str:
    """The user's question: what follows the excerpts the Assistant put before it."""
    return text.rsplit("</untrusted-data>", 1)[-1].strip().lower()


def reader(messages, functions):  # noqa: ANN001, ANN201
    """A deterministic model: a tool call for a price, else the first excerpt it was given, cited."""
    last = messages[-1]
    if last.role == "function":
        return f"That comes to {last.text.split(':')[-1].split('<')[0].strip()}."
    if "trays cost" in question_of(last.text):
        return tool_call("price_of", {"part": "crumb tray", "count": 3})
    found = EXCERPT.search(last.text)
    if found is None:
        return "I could not find that in your files."
    return f"{found['text'].strip()} [{found['file']}, p. {found['page']}]"


def guesser(messages, functions):  # noqa: ANN001, ANN201
    """A worse model: right about returns and prices, vague about everything else."""
    last = messages[-1]
    if last.role == "function" or any(w in question_of(last.text) for w in ("return", "trays cost")):
        return reader(messages, functions)
    return "Please see the manual for details."


def cases(judge_llm: dict) -> Dataset:
    def gold(page: int, expected: str, question: str, name: str) -> Case:
        return Case(question, expected=expected, name=name, evaluators=[Sources(file="manual.pdf", pages=[page])],
                    metadata={"page": page})  # fmt: skip

    judge = Judge("States the number the question asks for, from the manual.", llm=judge_llm)
    return Dataset([
        gold(2, "30 days", "How many days do I have to return the toaster?", "returns"),
        gold(3, "2 years", "How long is the warranty on the heating element?", "warranty"),
        gold(4, "20 minutes", "How long must the toaster cool before cleaning?", "cleaning"),
        gold(5, "every week", "How often should I empty the crumb tray?", "crumb tray"),
        gold(6, "setting 5", "Which browning setting is best for bagels?", "bagels"),
        gold(7, "240 volts", "Can I use the toaster abroad, and on which voltage?", "travel"),
        gold(8, "4 euros", "How much does a lever knob cost as a spare part?", "knob"),
        Case("What do 3 replacement crumb trays cost?", expected="36 euros", name="three trays", evaluators=[
            ToolCalls([{"name": "price_of", "arguments": {"part": "crumb tray", "count": 3}}], order="exact")]),
        Case("How long is the casing covered by the warranty?", expected="1 year", name="casing (judged)",
             evaluators=[judge]),
        Case("How many days do I have to return the toaster?", expected="30 days", name="returns (judged)",
             evaluators=[judge]),
    ], name="toaster manual")  # fmt: skip


@pytest.fixture
def manual(tmp_path: Path) -> Path:
    path = tmp_path / "manual.pdf"
    make_pdf(PAGES, path)
    return path


def test_an_assistant_over_a_pdf_evaluated_reported_and_compared(manual: Path, openai_server, sqlite_url: str,
                                                                 tmp_path: Path) -> None:  # fmt: skip
    def judging(request):  # noqa: ANN001, ANN202 (the loopback judge: ALLOW when the answer holds the number)
        prompt = request.json["messages"][0]["content"]
        expected = prompt.split("A correct answer: ", 1)[1].split("\n", 1)[0]
        answer = prompt.split('<untrusted-data source="text to check">\n', 1)[1].split("\n</untrusted-data>", 1)[0]
        return "ALLOW" if expected.lower() in answer.lower() else "BLOCK: the number is missing"

    judging.repeat = True  # type: ignore[attr-defined]
    openai_server.add(judging)
    judge_llm = {"model": "judge", "model_server": openai_server.base_url, "api_key": "k"}

    def assistant(model) -> Assistant:  # noqa: ANN001
        return Assistant(llm=ScriptedLLM(default=model), files=[str(manual)], function_list=[price_of], name="helper")

    report = evaluate(assistant(reader), cases(judge_llm), store=sqlite_url, concurrency=3)
    shown = report.table()
    assert report.pass_rate == 1.0, shown
    assert "toaster manual: 10/10 cases passed" in shown and "sources 100%" in shown and "judge 100%" in shown
    by_name = {c.name: c for c in report.cases}
    assert [r.name for r in by_name["three trays"].results] == ["contains", "tool_calls"]
    assert by_name["three trays"].output == "That comes to 36 euros."
    assert all(r.score == 1.0 for c in report.cases for r in c.results if r.name == "sources")  # gold page first
    assert len(openai_server.requests) == 2  # the judge was asked twice, over HTTP

    saved = report.save(tmp_path / "report.json")
    assert [c["passed"] for c in json.loads(saved.read_text())["cases"]] == [True] * 10
    store = TraceStore(sqlite_url)
    page = report_html(store.report("local", report.id))
    for c in report.cases:  # the viewer's page of the report: each case, linked to its trace
        assert f"traces?trace={c.trace_id}" in page
    trace = store.get("local", by_name["warranty"].trace_id)
    kinds = [s["kind"] for s in trace["steps"]]
    assert kinds[:2] == ["case", "run"] and "retrieval" in kinds and "model" in kinds
    retrieval = next(s for s in trace["steps"] if s["kind"] == "retrieval")
    assert retrieval["data"]["sources"][0]["pages"] == [3]
    assert "manual.pdf" in trace_html(trace) and "warranty of 2 years" in trace_html(trace)

    again = evaluate(assistant(reader), cases(judge_llm), store=False)
    assert [(c.name, c.passed, c.score) for c in again.cases] == [(c.name, c.passed, c.score) for c in report.cases]

    worse = evaluate(assistant(guesser), cases(judge_llm), store=False, name="guesser")
    diff = worse.compare(EvaluationReport.load(saved))
    assert set(diff.regressed) == {"warranty", "cleaning", "crumb tray", "bagels", "travel", "knob", "casing (judged)"}
    assert diff.improved == [] and set(diff.unchanged) == {"returns", "three trays", "returns (judged)"}
    table = diff.table()
    assert "↓ regressed" in table and "pass rate 100% -> 30%" in table and "7 regressed" in table

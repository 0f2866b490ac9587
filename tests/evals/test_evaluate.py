"""Evaluations: evaluators, datasets from Python, YAML and JSON, `evaluate` over agents, crews and functions (bounded,
repeated, timed out), the report (table, JSON, stored), two reports compared, a dataset as pytest tests."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from chatagent import Crew, FnCallAgent, ScriptedLLM, Task, tool, tool_call
from chatagent.evals import (
    Case,
    Contains,
    Context,
    Dataset,
    EvaluationReport,
    Exact,
    JSONSchema,
    Judge,
    MaxCost,
    MaxSeconds,
    MaxTokens,
    Pydantic,
    Regex,
    Result,
    Sources,
    ToolCalls,
    aevaluate,
    evaluate,
)
from chatagent.sessions.traces import TraceStore
from tests.support import processes


@tool
def weather(city: str) -> str:
    """Weather in a city."""
    return f"sunny in {city}"


def reply(messages, functions):  # noqa: ANN001, ANN201
    last = messages[-1]
    if last.role == "function":
        return "It is sunny in Oslo."
    if "Oslo" in last.text:
        return tool_call("weather", {"city": "Oslo"})
    return {"2+2?": "4", "capital of France?": "Paris, of course."}.get(last.text, "I do not know.")


def bot() -> FnCallAgent:
    return FnCallAgent(llm=ScriptedLLM(default=reply), function_list=[weather], name="bot")


def ctx(text: str = "", **kwargs: Any) -> Context:
    return Context(Case(kwargs.pop("inputs", "q?"), kwargs.pop("expected", None)), kwargs.pop("output", text), text,
                   **kwargs)  # fmt: skip


# ---- evaluators ----------------------------------------------------------------------------------------------------


def test_the_text_evaluators() -> None:
    assert Exact("4").evaluate(ctx(" 4\n")).passed and not Exact("4").evaluate(ctx("4.")).passed
    assert Exact(case_sensitive=False).evaluate(ctx("PARIS", expected="paris")).passed
    assert Contains("paris").evaluate(ctx("It is Paris.")).passed
    both = Contains(["Paris", "France"]).evaluate(ctx("Paris"))
    assert (both.passed, both.score, both.reason) == (False, 0.5, "missing 'France'")
    assert Regex(r"\b4\b").evaluate(ctx("it is 4.")).passed and not Regex(r"^\d+$").evaluate(ctx("four")).passed
    with pytest.raises(ValueError, match="needs a value"):
        Contains().evaluate(ctx("x"))


def test_data_evaluators_take_the_answer_as_it_is() -> None:
    schema = {"type": "object", "properties": {"days": {"type": "integer"}}, "required": ["days"]}
    assert JSONSchema(schema).evaluate(ctx('{"days": 30}')).passed
    assert JSONSchema(schema).evaluate(ctx('Here: ```json\n{"days": 30}\n```')).passed
    assert not JSONSchema(schema).evaluate(ctx('{"days": "30"}')).passed  # no coercion
    assert "days" in JSONSchema(schema).evaluate(ctx("{}")).reason

    class Refund(BaseModel):
        days: int

    assert Pydantic(Refund).evaluate(ctx('{"days": 30}')).passed
    assert Pydantic(Refund).evaluate(ctx("", output=Refund(days=3))).passed
    assert not Pydantic(Refund).evaluate(ctx('{"weeks": 4}')).passed


def test_the_tool_trajectory() -> None:
    calls = [{"name": "search", "arguments": {"q": "toaster", "n": 3}}, {"name": "read", "arguments": {"id": 7}},
             {"name": "answer", "arguments": {}}]  # fmt: skip
    c = ctx("", tool_calls=calls)
    assert ToolCalls(["search", "answer"]).evaluate(c).passed  # in order, others between
    assert not ToolCalls(["answer", "search"]).evaluate(c).passed
    assert ToolCalls(["answer", "search"], order="any").evaluate(c).passed
    assert not ToolCalls(["search", "answer"], order="exact").evaluate(c).passed
    assert ToolCalls(["search", "read", "answer"], order="exact").evaluate(c).passed
    assert ToolCalls([{"name": "search", "arguments": {"q": "toaster"}}]).evaluate(c).passed  # a subset of them
    assert not ToolCalls([{"name": "search", "arguments": {"q": "toaster"}}], arguments="exact").evaluate(c).passed
    wrong = ToolCalls([{"name": "read", "arguments": {"id": 8}}, "answer"]).evaluate(c)
    assert (wrong.passed, wrong.score) == (False, 0.0) and 'read({"id": 7})' in wrong.reason


def test_the_gold_passage_among_the_sources() -> None:
    sources = [{"file": "/docs/guide.pdf", "pages": [2], "text": "Unrelated."},
               {"file": "/docs/manual.pdf", "pages": [4, 5], "text": "Returns are accepted for 30 days."}]  # fmt: skip
    c = ctx("", sources=sources)
    found = Sources(file="manual.pdf", pages=[5]).evaluate(c)
    assert (found.passed, found.score) == (True, 0.5)
    assert Sources(text="accepted for  30 DAYS").evaluate(c).passed
    assert not Sources(file="manual.pdf", pages=[9]).evaluate(c).passed
    assert not Sources(file="manual.pdf", top=1).evaluate(c).passed


def test_budgets() -> None:
    assert MaxSeconds(1).evaluate(ctx(seconds=0.5)).passed and not MaxSeconds(1).evaluate(ctx(seconds=2)).passed
    assert MaxTokens(10).evaluate(ctx(input_tokens=4, output_tokens=6)).passed
    assert not MaxCost(0.01).evaluate(ctx(cost=0.02)).passed
    unknown = MaxCost(0.01).evaluate(ctx(input_tokens=5))  # tokens used, no price known: not within a budget
    assert not unknown.passed and "not known" in unknown.reason
    with pytest.raises(ValueError):
        MaxSeconds(-1)


def test_a_judge_on_the_loopback_model(openai_server) -> None:
    openai_server.add("ALLOW")
    openai_server.add("BLOCK: it gives no number of days")
    openai_server.add("I think it is fine")  # no verdict: fails
    judge = Judge("Gives the return window in days.", llm={"model": "m", "model_server": openai_server.base_url,
                                                           "api_key": "k"})  # fmt: skip
    c = ctx("You have 30 days.", inputs="How long can I return it?", expected="30 days")
    assert judge.evaluate(c).passed
    no = judge.evaluate(c)
    assert (no.passed, no.reason) == (False, "it gives no number of days")
    assert not judge.evaluate(c).passed
    prompt = openai_server.requests[0].json["messages"][0]["content"]
    assert "Gives the return window in days." in prompt and "How long can I return it?" in prompt
    assert "30 days" in prompt and "You have 30 days." in prompt


# ---- datasets --------------------------------------------------------------------------------------------------------


def test_a_yaml_dataset(tmp_path: Path) -> None:
    path = tmp_path / "cases.yaml"
    path.write_text(
        "name: support\nevaluators: [{max_seconds: 30}]\ncases:\n"
        "  - inputs: '2+2?'\n    expected: '4'\n"
        "  - name: oslo\n    inputs: Weather in Oslo?\n    metadata: {topic: weather}\n"
        "    evaluators:\n      - tools: [{name: weather, arguments: {city: Oslo}}]\n      - regex: sunny\n"
        "  - inputs: [{role: user, content: 'capital of France?'}]\n    evaluators: [{contains: paris}]\n"
    )
    ds = Dataset.load(path)
    assert ds.name == "support" and [c.name for c in ds] == ["2+2?", "oslo", "capital of France?"]
    report = evaluate(bot(), ds, store=False)
    assert [c.passed for c in report.cases] == [True, True, True], report.table()
    assert report.cases[1].metadata == {"topic": "weather"}
    assert {r.name for r in report.cases[1].results} == {"max_seconds", "tool_calls", "regex"}


def test_a_json_dataset_and_clear_errors(tmp_path: Path) -> None:
    good = tmp_path / "cases.json"
    good.write_text(json.dumps({"cases": [{"inputs": "2+2?", "expected": "4"}]}))
    assert len(Dataset.load(good)) == 1
    for text, error in [("{}", "expected 'cases:'"), ('{"cases": [{"expected": 1}]}', "case 1: a case is a mapping"),
                        ('{"cases": [{"inputs": "x", "expect": 1}]}', "unknown key 'expect'"),
                        ('{"cases": [{"inputs": "x", "evaluators": ["fuzzy"]}]}', "unknown evaluator 'fuzzy'"),
                        ('{"cases": [{"inputs": "x", "evaluators": [{"regex": "("}]}]}', "regex"),
                        ("{not json", "not valid JSON")]:  # fmt: skip
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        with pytest.raises(ValueError, match=error):
            Dataset.load(bad)
    with pytest.raises(ValueError, match="cannot read"):
        Dataset.load(tmp_path / "missing.yaml")


# ---- evaluate ----------------------------------------------------------------------------------------------------


def test_evaluate_an_agent_links_each_case_to_its_trace(sqlite_url: str) -> None:
    ds = Dataset([Case("2+2?", expected="4"), Case("Weather in Oslo?", expected="sunny",
                       evaluators=[ToolCalls([{"name": "weather", "arguments": {"city": "Oslo"}}])]),
                  Case("capital of France?", expected="Berlin")], name="quiz")  # fmt: skip
    report = evaluate(bot(), ds, store=sqlite_url, progress=False)
    assert [c.passed for c in report.cases] == [True, True, False]
    assert report.pass_rate == pytest.approx(2 / 3) and report.cases[2].reasons() == "contains: missing 'Berlin'"
    store = TraceStore(sqlite_url)
    trace = store.get("local", report.cases[1].trace_id)
    assert trace is not None and trace["kind"] == "case" and trace["name"] == "Weather in Oslo?"
    assert [(s["kind"], s["parent"]) for s in trace["steps"]] == [("case", None), ("run", 1), ("model", 2),
                                                                   ("tool", 2), ("model", 2)]  # fmt: skip
    assert report.cases[1].results[1].name == "tool_calls" and report.cases[1].results[1].passed
    stored = store.report("local", report.id)
    assert stored is not None and stored["pass_rate"] == report.pass_rate
    assert store.report("mallory", report.id) is None and store.reports("mallory") == []
    assert EvaluationReport.from_dict(stored).cases[1].trace_id == report.cases[1].trace_id


def test_store_false_writes_nothing_and_still_sees_the_tool_calls(sqlite_url: str, tmp_path: Path) -> None:
    ds = Dataset([Case("Weather in Oslo?", evaluators=[ToolCalls(["weather"])])])
    report = evaluate(bot(), ds, store=False)
    assert report.cases[0].passed and report.cases[0].trace_id is None
    assert not list(tmp_path.glob("workspace/**/*.db"))


def test_a_crew_and_functions(sqlite_url: str) -> None:
    writer = FnCallAgent(llm=ScriptedLLM(default="A brief about rivers."), name="writer")
    crew = Crew(agents=[writer], tasks=[Task("Write about {topic}", "a brief", agent=writer)])
    report = evaluate(crew, [Case({"topic": "rivers"}, expected="rivers")], store=sqlite_url)
    assert report.cases[0].passed and report.cases[0].output == "A brief about rivers."
    trace = TraceStore(sqlite_url).get("local", report.cases[0].trace_id)
    assert [s["kind"] for s in trace["steps"]] == ["case", "run", "task", "run", "model"]

    async def doubled(x: int) -> int:
        await asyncio.sleep(0)
        return 2 * x

    assert evaluate(doubled, [Case(2, expected=4), Case(3, expected=5)], store=False).pass_rate == 0.5
    assert evaluate(lambda q: q.upper(), [Case("abc", expected="ABC")], store=False).cases[0].passed


def test_concurrency_is_bounded_and_repeats_measure_variance() -> None:
    running, most, lock = 0, 0, threading.Lock()
    draws = iter([True, False, True, True, True, True])

    def task(q: str) -> str:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.02)
        with lock:
            running -= 1
            right = next(draws)
        return "yes" if right else "no"

    report = evaluate(task, [Case("a", expected="yes"), Case("b", expected="yes")], concurrency=2, repeat=3,
                      store=False)  # fmt: skip
    assert most <= 2
    assert [len(c.attempts) for c in report.cases] == [3, 3] and report.pass_rate == pytest.approx(5 / 6)
    shaky = next(c for c in report.cases if not c.passed)
    assert shaky.pass_rate == pytest.approx(2 / 3) and shaky.score_stdev > 0
    assert "2/3" in report.table() and "±" in report.table()


def test_a_failing_run_a_timeout_and_a_failing_evaluator_fail_their_case_only() -> None:
    def task(q: str) -> str:
        if q == "boom":
            raise RuntimeError("the tool server is down")
        if q == "slow":
            time.sleep(2)
        return q

    def broken(c: Context) -> bool:
        raise KeyError("oops")

    report = evaluate(task, [Case("boom"), Case("slow"), Case("fine", evaluators=[broken]), Case("ok", expected="ok")],
                      timeout=0.5, store=False)  # fmt: skip
    assert [c.passed for c in report.cases] == [False, False, False, True]
    assert "RuntimeError: the tool server is down" in report.cases[0].reasons()
    assert "TimeoutError" in report.cases[1].reasons()
    assert "the evaluator failed: KeyError" in report.cases[2].reasons()


def test_own_functions_return_what_they_like() -> None:
    cases = [Case("x", evaluators=[lambda c: 0.25]), Case("y", evaluators=[lambda c: "too short"]),
             Case("z", evaluators=[lambda c: Result("mine", True, 0.9)])]  # fmt: skip
    report = evaluate(lambda q: q, cases, store=False)
    assert [(c.passed, round(c.score, 2)) for c in report.cases] == [(True, 0.25), (False, 0.0), (True, 0.9)]


def test_evaluate_inside_an_event_loop_says_to_await() -> None:
    async def inside() -> None:
        with pytest.raises(RuntimeError, match="await aevaluate"):
            evaluate(lambda q: q, [Case("x")], store=False)
        report = await aevaluate(lambda q: q, [Case("x", expected="x")], store=False)
        assert report.pass_rate == 1.0

    asyncio.run(inside())


# ---- reports --------------------------------------------------------------------------------------------------------


def test_a_report_as_json_and_two_reports_compared(tmp_path: Path) -> None:
    cases = [Case("2+2?", expected="4"), Case("capital of France?", expected="Paris"), Case("Weather in Oslo?",
             expected="sunny")]  # fmt: skip
    before = evaluate(bot(), cases, store=False, name="v1")
    worse = FnCallAgent(llm=ScriptedLLM(default=lambda m, f: "4" if m[-1].text == "2+2?" else "Paris is in France."),
                        name="v2")  # fmt: skip
    after = evaluate(worse, cases, store=False, name="v2")
    path = before.save(tmp_path / "v1.json")
    loaded = EvaluationReport.load(path)
    assert loaded.to_dict() == before.to_dict()
    diff = after.compare(loaded)
    assert diff.regressed == ["Weather in Oslo?"] and diff.improved == [] and len(diff.unchanged) == 2
    shown = diff.table()
    assert "↓ regressed" in shown and "pass rate 100% -> 67%" in shown and "1 regressed" in shown
    assert after.compare(after).regressed == [] and before.compare(after).improved == ["Weather in Oslo?"]
    (tmp_path / "x.json").write_text('{"a": 1}')
    with pytest.raises(ValueError, match="not an evaluation report"):
        EvaluationReport.load(tmp_path / "x.json")


def test_terminal_output_carries_no_control_characters() -> None:
    report = evaluate(lambda q: "\x1b[2Jgone", [Case("x\x1b]0;title\x07", expected="\x1b[31mred")], store=False)
    assert "\x1b" not in report.table() and "\x07" not in report.table()


def test_a_dataset_as_pytest_tests(tmp_path: Path) -> None:
    (tmp_path / "cases.yaml").write_text("cases:\n  - {name: four, inputs: '2+2?', expected: '4'}\n"
                                         "  - {name: berlin, inputs: 'capital of France?', expected: Berlin}\n")  # fmt: skip
    (tmp_path / "test_cases.py").write_text(
        "from chatagent import FnCallAgent, ScriptedLLM\nfrom chatagent.evals import dataset_test\n"
        "bot = FnCallAgent(llm=ScriptedLLM(default=lambda m, f: {'2+2?': '4'}.get(m[-1].text, 'Paris')))\n"
        "test_quiz = dataset_test(bot, 'cases.yaml')\n"
    )
    out = processes.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_cases.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 1, out.stdout + out.stderr
    assert "1 failed, 1 passed" in out.stdout and "test_quiz[berlin]" in out.stdout
    assert "contains: missing 'Berlin'" in out.stdout

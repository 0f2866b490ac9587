"""`Crew.test(n_iterations, eval_llm)` and `Crew.train(n_iterations, filename)`, CrewAI's names, on chatagent.evals:
the scores table CrewAI prints, the report, training from a person's feedback, and the trained data in use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chatagent import Crew, FnCallAgent, ScriptedLLM, Task


def crew(**kwargs) -> tuple[Crew, ScriptedLLM, ScriptedLLM]:  # noqa: ANN003
    def write(messages, functions):  # noqa: ANN001, ANN202
        text = messages[-1].text
        if "Assess the quality of the training data" in text:
            return (
                '{"suggestions": ["Name the river first.", "Keep it under 20 words."], "quality": 8.5, '
                '"final_summary": "Shorter, and name the river."}'
            )
        if "A person reviewed your answer" in text:
            return "The Rhine: 3.2 m and rising."
        return "Rivers are rising everywhere, and that is quite a long sentence about it."

    writer_llm = ScriptedLLM(default=write)
    editor_llm = ScriptedLLM(default="Edited: the Rhine rises.")
    writer = FnCallAgent(llm=writer_llm, name="writer")
    editor = FnCallAgent(llm=editor_llm, name="editor")
    tasks = [Task("Report on {topic}", "one sentence", agent=writer), Task("Edit it", "one short sentence",
                                                                         agent=editor)]  # fmt: skip
    return Crew(agents=[writer, editor], tasks=tasks, name="desk", **kwargs), writer_llm, editor_llm


def test_test_prints_crewais_table_and_returns_the_report(capsys: pytest.CaptureFixture[str]) -> None:
    judge = ScriptedLLM(['{"quality": 8}', '{"quality": 6}', '{"quality": 9}', "no idea"])
    the_crew, _, _ = crew()
    report = the_crew.test(2, judge, inputs={"topic": "rivers"}, store=False)
    shown = capsys.readouterr().out
    for text in ("Tasks Scores", "(1-10 Higher is better)", "Tasks/Crew/Agents", "Run 1", "Run 2", "Avg. Total",
                 "Agents", "Execution Time (s)", "- writer", "- editor"):  # fmt: skip
        assert text in shown, shown
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]] for line in shown.splitlines()
            if line.startswith("│")}  # fmt: skip
    assert rows["Task 1"][:3] == ["8.0", "9.0", "8.5"] and rows["Task 2"][:3] == ["6.0", "-", "6.0"]
    assert rows["Crew"][:3] == ["7.00", "9.00", "8.0"]
    assert len(report.cases) == 1 and len(report.cases[0].attempts) == 2
    failed = report.cases[0].attempts[1].results[1]
    assert failed.passed is False and "no JSON object" in failed.reason
    asked = judge.calls[0].messages[0].text
    assert "Report on rivers" in asked and "one sentence" in asked and "Rivers are rising everywhere" in asked


def test_train_learns_from_feedback_and_the_trained_crew_uses_it(tmp_path: Path) -> None:
    said: list[str] = []

    def person(output) -> str:  # noqa: ANN001
        said.append(output.agent)
        return "Too long: name the river." if output.agent == "writer" and len(said) == 1 else ""

    the_crew, writer_llm, _ = crew()
    trained = the_crew.train(2, str(tmp_path / "trained.json"), inputs={"topic": "rivers"}, feedback=person)
    assert said == ["writer", "editor", "writer", "editor"]  # each task of each run, reviewed once
    assert trained == json.loads((tmp_path / "trained.json").read_text())
    assert trained["writer"]["suggestions"] == ["Name the river first.", "Keep it under 20 words."]
    assert trained["writer"]["quality"] == 8.5 and "editor" not in trained  # the editor's answers were accepted
    asked = next(c for c in writer_llm.calls if "Assess the quality" in c.messages[-1].text).messages[-1].text
    assert "Too long: name the river." in asked and "The Rhine: 3.2 m and rising." in asked  # feedback, improved

    again, writer_llm, editor_llm = crew(trained_data=tmp_path / "trained.json")
    again.kickoff(inputs={"topic": "rivers"})
    prompt = writer_llm.calls[0].messages[-1].text
    assert "You MUST follow these instructions:\n - Name the river first.\n - Keep it under 20 words." in prompt
    with pytest.raises(ValueError, match="cannot read the trained data"):
        crew(trained_data=tmp_path / "missing.json")

"""`chatagent train -n N -f FILE` and `chatagent test -n N -m MODEL` on a project `chatagent create crew` made, each
command its own process on the loopback model: a person's feedback (typed on stdin) redoes a task, the agent's
model turns it into suggestions in the trained file, the next `chatagent run` gives them to the agent's task, and
`test` scores each task by the evaluating model and prints CrewAI's table."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.compat.test_crewai_projects import _env
from tests.support import processes
from tests.support.protocol_server import prompt_text

TIMEOUT = 240
RESEARCH = "Conduct a thorough research about AI LLMs"
FEEDBACK = "Cite a source for each point."


def _chatagent(args: list[str], cwd: Path, env: dict[str, str], stdin: str = ""):
    return processes.run([sys.executable, "-m", "chatagent", *args], cwd=cwd, env=env, capture_output=True,
                         text=True, timeout=TIMEOUT, input=stdin)  # fmt: skip


def test_train_then_run_then_test_a_scaffolded_crew(protocol_server, tmp_path):
    env = _env(protocol_server, tmp_path)
    assert _chatagent(["create", "crew", "Latest News"], tmp_path, env).returncode == 0
    project = tmp_path / "latest_news"
    trained = {"suggestions": [FEEDBACK], "quality": 8, "final_summary": "Name where each point comes from."}
    rules = [  # in order: the first whose texts a request holds answers it
        (["Assess the quality of the training data", FEEDBACK, "(source: arXiv)"], json.dumps(trained)),
        (["evaluate the performance of the agent", "Task description"], '{"quality": 8}'),
        (["expand each topic"], "# LLM report"),
        ([RESEARCH, FEEDBACK], "- small models (source: arXiv)"),
        ([RESEARCH], "- small models"),
    ]
    protocol_server.rules.extend({"contains": texts, "say": say} for texts, say in rules)
    # the person asks the researcher for sources, then accepts the redone list and the report (empty lines)
    made = _chatagent(["train", "-n", "1", "-f", "trained_agents_data.pkl"], project, env, f"{FEEDBACK}\n\n\n")
    assert made.returncode == 0, made.stderr[-2000:]
    data = json.loads((project / "trained_agents_data.pkl").read_text())
    researcher = next(k for k in data if "Researcher" in k)
    assert data == {researcher: {"suggestions": [FEEDBACK], "quality": 8.0,
                                 "final_summary": "Name where each point comes from."}}  # fmt: skip
    asked = [prompt_text(r.json) for r in protocol_server.chat_requests]
    redo = [t for t in asked if RESEARCH in t and FEEDBACK in t and "Assess the quality" not in t]
    assert redo, "the researcher's task was not redone with the person's feedback"

    before = len(protocol_server.chat_requests)
    ran = _chatagent(["run"], project, env)
    assert ran.returncode == 0, ran.stderr[-2000:]
    research = [prompt_text(r.json) for r in protocol_server.chat_requests[before:]]
    research = [t for t in research if RESEARCH in t and "expand each topic" not in t]
    assert research and f"You MUST follow these instructions:\n - {FEEDBACK}" in research[0], research

    tested = _chatagent(["test", "-n", "2", "-m", "openai/test-model"], project, env)
    assert tested.returncode == 0, tested.stderr[-2000:]
    assert "Tasks Scores" in tested.stdout and "Run 2" in tested.stdout, tested.stdout
    rows = {line.split("│")[1].strip(): line for line in tested.stdout.splitlines() if line.startswith("│")}
    assert set(rows) >= {"Task 1", "Task 2", "Crew"}, rows
    assert rows["Task 1"].count("8.0") == 3, rows["Task 1"]  # two runs and their average


def test_a_trained_file_that_is_not_chatagents_is_passed_over_with_a_warning(protocol_server, tmp_path):
    env = _env(protocol_server, tmp_path)
    assert _chatagent(["create", "crew", "Latest News"], tmp_path, env).returncode == 0
    project = tmp_path / "latest_news"
    (project / "trained_agents_data.pkl").write_bytes(b"\x80\x04\x95 not json: a pickle is never loaded")
    protocol_server.rules.append({"contains": ["expand each topic"], "say": "# LLM report"})
    protocol_server.rules.append({"contains": [RESEARCH], "say": "- small models"})
    ran = _chatagent(["run"], project, env)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "no trained data" in ran.stderr and "# LLM report" in ran.stdout

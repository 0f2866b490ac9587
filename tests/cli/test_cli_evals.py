"""`chatagent eval` and `chatagent traces` by the real command: a dataset run against an agent (the report, JSON, a
comparison, exit 1 under --min-pass), and the traces it left, listed and shown per user."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from chatagent.cli.entry import main
from tests.support import processes

APP = '''
from chatagent import FnCallAgent, ScriptedLLM, tool, tool_call

@tool
def weather(city: str) -> str:
    """Weather in a city."""
    return f"sunny in {city}\\x1b[2J"

def reply(messages, functions):
    last = messages[-1]
    if last.role == "function":
        return "It is sunny in Oslo."
    if "Oslo" in last.text:
        return tool_call("weather", {"city": "Oslo"})
    return {"2+2?": "4"}.get(last.text, "I do not know.")

bot = FnCallAgent(llm=ScriptedLLM(default=reply), function_list=[weather], name="bot")

def shout(text):
    return text.upper()
'''

CASES = """name: quiz
cases:
  - inputs: "2+2?"
    expected: "4"
  - name: oslo
    inputs: Weather in Oslo?
    expected: sunny
    evaluators:
      - tools: [{name: weather, arguments: {city: Oslo}}]
  - inputs: capital of France?
    expected: Paris
"""


def command(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    """The real command, in a process of its own."""
    out = processes.run([sys.executable, "-m", "chatagent", *args], cwd=tmp_path, capture_output=True, text=True,
                        timeout=300)  # fmt: skip
    return out.returncode, out.stdout, out.stderr


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):  # noqa: ANN201
    """The command's main() in this process (a process each costs seconds of imports): (exit status, out, err)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    name = f"app_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(APP)

    def run(*args: str) -> tuple[int, str, str]:
        code = main([a.replace("myapp:", f"{name}:") for a in args])
        got = capsys.readouterr()
        return code, got.out, got.err

    return run


def test_eval_prints_the_report_writes_json_and_fails_under_the_threshold(tmp_path: Path, cli) -> None:  # noqa: ANN001
    (tmp_path / "myapp.py").write_text(APP)
    (tmp_path / "cases.yaml").write_text(CASES)
    store = f"sqlite:///{tmp_path}/t.db"
    code, out, err = command(tmp_path, "eval", "cases.yaml", "--agent", "myapp:bot", "--min-pass", "0.9",
                             "--json", "r.json", "--store", store)  # fmt: skip
    assert code == 1, err
    assert "✓  2+2?" in out and "✗  capital of France?" in out and "contains: missing 'Paris'" in out
    assert "pass rate 67%" in out and "under --min-pass 90%" in err
    report = json.loads((tmp_path / "r.json").read_text())
    assert [c["passed"] for c in report["cases"]] == [True, True, False]
    code, out, _ = cli("eval", "cases.yaml", "--agent", "myapp:bot", "--min-pass", "0.6", "--no-store",
                       "--compare", "r.json")  # fmt: skip
    assert code == 0 and "3 unchanged" not in out and "0 improved, 0 regressed" in out

    code, out, _ = cli("traces", "--store", store, "--kind", "case")
    assert code == 0 and len(out.strip().splitlines()) == 3
    oslo = next(line.split("\t")[0] for line in out.splitlines() if "\toslo\t" in line)
    code, shown, _ = cli("traces", "--store", store, "--show", oslo[:8])
    assert code == 0 and "  run bot" in shown and "    tool weather" in shown and '{"city": "Oslo"}' in shown
    assert "\x1b" not in shown and "sunny in Oslo" in shown
    code, whole, _ = cli("traces", "--store", store, "--show", oslo, "--json")
    assert json.loads(whole)["id"] == oslo
    code, _, err = cli("traces", "--store", store, "--show", oslo, "--user", "bob")  # not bob's
    assert code == 2 and "no trace of user 'bob'" in err
    code, out, _ = cli("traces", "--store", store, "--reports")
    assert code == 0 and "3 cases" in out and "67%" in out
    code, out, _ = cli("traces", "--store", store, "--delete", oslo)
    assert code == 0 and oslo not in cli("traces", "--store", store)[1]
    code, _, err = cli("traces", "--store", store, "--user", "bob")
    assert code == 0 and "no traces for user 'bob'" in err


def test_eval_of_a_function_and_clear_errors(tmp_path: Path, cli) -> None:  # noqa: ANN001
    (tmp_path / "cases.json").write_text(json.dumps({"cases": [{"inputs": "abc", "expected": "ABC"}]}))
    code, out, _ = cli("eval", "cases.json", "--task", "myapp:shout", "--no-store", "--min-pass", "1")
    assert code == 0 and "pass rate 100%" in out
    (tmp_path / "bad.yaml").write_text("cases:\n  - {inputs: x, evaluators: [fuzzy]}\n")
    code, _, err = cli("eval", "bad.yaml", "--task", "myapp:shout", "--no-store")
    assert code == 2 and "unknown evaluator 'fuzzy'" in err and "Traceback" not in err
    code, _, err = cli("eval", "cases.json", "--task", "myapp:nothing", "--no-store")
    assert code == 2 and "has no attribute 'nothing'" in err

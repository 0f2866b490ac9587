"""`Crew.test` and `Crew.train`, CrewAI's way, on `chatagent.evals`.

    crew.test(n_iterations=3, eval_llm={"model": "qwen-plus"})     # prints CrewAI's table, returns the report
    crew.train(n_iterations=2, filename="trained_agents_data.json")  # a person reviews every task

`test` evaluates the crew `n_iterations` times on `inputs` (one case, repeated): after each run, `eval_llm` scores
each task's output from 1 to 10 against its description and expected output (`TaskQuality`, reading the task from
the run's trace), and the table CrewAI prints follows (each task and the crew per run, their average, each run's
execution time). `train` runs the crew `n_iterations` times with every task paused for a person's review
(`feedback`: a function of the TaskOutput giving the person's words, else a prompt in the terminal); where they ask
for changes, the agent redoes the task. Then each agent that was given feedback has its model turn its initial
outputs, the feedback and the improved outputs into suggestions, a quality score and a summary, written as JSON to `filename`, keyed by agent
name; `Crew(..., trained_data=filename)` gives each agent its suggestions with every task.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from chatagent.agents.teams.task import TaskOutput
from chatagent.evals import Case, Context, EvaluationReport, Evaluator, Result, evaluate
from chatagent.llm import get_chat_model
from chatagent.schema import USER, Message, content_text
from chatagent.utils.jsonlenient import ToolArgumentError, parse_json

SCORE = (
    "Based on the task description and the expected output, evaluate the performance of the agent on the task "
    "from its output, with a score from 1 to 10 for completion, quality and overall performance.\n\n"
    "Task description: {description}\nExpected output: {expected}\nAgent: {agent}\nTask output: {output}\n\n"
    'Reply with only a JSON object: {{"quality": <a number from 1 to 10>}}'
)
TRAIN = (
    "Assess the quality of the training data based on the model's output, the human feedback and the improved "
    "output.\n\n{data}\nPlease provide:\n- a list of clear, actionable instructions derived from the human feedback "
    'to improve the agent\'s performance on future tasks ("suggestions")\n- a score from 0 to 10 for the improved '
    'output against the initial one ("quality")\n- step by step action items for the agent ("final_summary")\n\n'
    'Reply with only a JSON object: {{"suggestions": [...], "quality": <number>, "final_summary": "..."}}'
)


def _ask_json(llm: Any, prompt: str) -> dict[str, Any]:
    """The JSON object `llm` answers `prompt` with (ValueError when it gives none)."""
    reply = llm.chat([Message.unchecked(USER, prompt)], stream=False, extra_generate_cfg={"temperature": 0})
    text = content_text(reply[-1].content) if reply else ""
    try:
        value = parse_json(text)
    except ToolArgumentError:
        value = None
    if not isinstance(value, dict):
        raise ValueError(f"the evaluating model gave no JSON object: {' '.join(text.split())[:200]!r}")
    return value


class TaskQuality(Evaluator):
    """`llm`'s score (1 to 10) of task `index`'s output in the run, from its trace (score: that over 10)."""

    def __init__(self, index: int, llm: Any) -> None:
        self.index, self.llm = index, llm
        self.name = f"Task {index + 1}"

    def evaluate(self, ctx: Context) -> Result:
        steps = [s for s in (ctx.trace or {}).get("steps", []) if s.get("kind") == "task"
                 and (s.get("data") or {}).get("index") == self.index]  # fmt: skip
        if not steps:
            return Result(self.name, False, 0.0, "the task did not run (or the run was not recorded)")
        step = steps[-1]
        data = step.get("data") or {}
        asked = SCORE.format(description=data.get("description"), expected=data.get("expected"),
                             agent=data.get("agent"), output=data.get("output"))  # fmt: skip
        quality = float(_ask_json(self.llm, asked).get("quality", 0))
        quality = max(0.0, min(10.0, quality))
        return Result(self.name, None, quality / 10, f"{quality:.1f}/10",
                      {"quality": quality, "seconds": step.get("duration") or 0.0, "agent": data.get("agent")})  # fmt: skip


def test_crew(crew: Any, n_iterations: int, eval_llm: Any, inputs: dict[str, Any] | None = None,
              **options: Any) -> EvaluationReport:  # fmt: skip
    """`Crew.test` (see the module docstring): prints CrewAI's table; the evaluation's report."""
    if isinstance(n_iterations, bool) or not isinstance(n_iterations, int) or n_iterations < 1:
        raise ValueError(f"n_iterations must be a positive integer, got {n_iterations!r}")
    llm = get_chat_model(eval_llm)
    scores = [TaskQuality(k, llm) for k in range(len(crew.tasks))]
    case = Case(dict(inputs or {}) or {"input": ""}, name=crew.name, evaluators=scores)
    options.setdefault("progress", False)
    report = evaluate(crew, [case], repeat=n_iterations, concurrency=1, name=f"{crew.name} test", **options)
    print(scores_table(report, crew))
    return report


def scores_table(report: EvaluationReport, crew: Any) -> str:
    """CrewAI's table of a crew's test: each task's score per run and on average, the crew's, the times."""
    runs = report.cases[0].attempts
    rows = [["Tasks/Crew/Agents", *[f"Run {i}" for i in range(1, len(runs) + 1)], "Avg. Total", "Agents"]]
    per_run: list[list[float]] = [[] for _ in runs]
    for k, task in enumerate(crew.tasks):
        got = []
        for i, run in enumerate(runs):
            r = next((r for r in run.results if r.name == f"Task {k + 1}"), None)
            q = (r.data or {}).get("quality") if r is not None else None
            got.append(q)
            if q is not None:
                per_run[i].append(q)
        known = [q for q in got if q is not None]
        agent = crew.agent_for(task).name
        rows.append([f"Task {k + 1}", *["-" if q is None else f"{q:.1f}" for q in got],
                     f"{statistics.fmean(known):.1f}" if known else "-", f"- {agent}"])  # fmt: skip
    crew_scores = [statistics.fmean(s) if s else None for s in per_run]
    known = [s for s in crew_scores if s is not None]
    rows.append(["Crew", *["-" if s is None else f"{s:.2f}" for s in crew_scores],
                 f"{statistics.fmean(known):.1f}" if known else "-", ""])  # fmt: skip
    times = [int(run.seconds) for run in runs]
    rows.append(["Execution Time (s)", *map(str, times), str(int(statistics.fmean(times))) if times else "-", ""])
    widths = [max(len(r[i]) for r in rows) + 2 for i in range(len(rows[0]))]

    def line(left: str, mid: str, right: str, fill: str) -> str:
        return left + mid.join(fill * w for w in widths) + right

    out = ["Tasks Scores".center(sum(widths) + len(widths) + 1), "(1-10 Higher is better)".center(sum(widths) + len(widths) + 1),
           line("┏", "┳", "┓", "━"), "┃" + "┃".join(f" {c:<{w - 1}}" for c, w in zip(rows[0], widths, strict=True)) + "┃",
           line("┡", "╇", "┩", "━")]  # fmt: skip
    out += ["│" + "│".join(f" {c:<{w - 1}}" for c, w in zip(r, widths, strict=True)) + "│" for r in rows[1:]]
    out.append(line("└", "┴", "┘", "─"))
    return "\n".join(out)


def train_crew(
    crew: Any, n_iterations: int, filename: str | os.PathLike[str], inputs: dict[str, Any] | None,
    feedback: Callable[[TaskOutput], str] | None, start: Callable[[dict[str, Any]], list[dict[str, Any]]],
    review: Callable[[str], dict[str, Any]],
) -> dict[str, Any]:  # fmt: skip
    """`Crew.train` (see the module docstring): the trained data written to `filename`, returned. `start` makes the
    message that starts the crew on its inputs, `review` a person's reply to a paused task (the crew's own)."""
    if isinstance(n_iterations, bool) or not isinstance(n_iterations, int) or n_iterations < 1:
        raise ValueError(f"n_iterations must be a positive integer, got {n_iterations!r}")
    ask = feedback or _ask_in_terminal
    reviewed = type(crew)(agents=crew.agents, tasks=[replace(t, human_input=True) for t in crew.tasks],
                          process=crew.process, manager=crew.manager, name=crew.name)  # fmt: skip
    agent = reviewed.as_agent()
    data: dict[str, dict[int, dict[str, str]]] = {}
    for iteration in range(n_iterations):
        conversation = start(dict(inputs or {}))  # each pause is answered in the conversation, as a session would
        out = _step(agent, conversation)
        while out.pending is not None and "approval" not in out.pending:
            done = out.tasks_output[-1]
            said = ask(done)
            entry = {"initial_output": done.raw, "human_feedback": said, "improved_output": done.raw}
            out = _step(agent, conversation, review(said))
            if said.strip():  # the agent redid the task, which paused again with the improved answer
                entry["improved_output"] = out.tasks_output[-1].raw if out.tasks_output else done.raw
                out = _step(agent, conversation, review(""))
                data.setdefault(str(done.agent), {})[iteration] = entry  # (an accepted answer teaches nothing)
    trained: dict[str, Any] = {}
    for member in crew.agents:
        entries = data.get(str(member.name))
        if not entries:
            continue
        text = "".join(f"Iteration: {i}\nInitial Output:\n{e['initial_output']}\n\nHuman Feedback:\n"
                       f"{e['human_feedback']}\n\nImproved Output:\n{e['improved_output']}\n\n{'-' * 48}\n\n"
                       for i, e in sorted(entries.items()))  # fmt: skip
        answer = _ask_json(member.llm, TRAIN.format(data=text))
        trained[str(member.name)] = {"suggestions": [str(s) for s in answer.get("suggestions") or []],
                                     "quality": float(answer.get("quality") or 0),
                                     "final_summary": str(answer.get("final_summary") or "")}  # fmt: skip
    Path(filename).write_text(json.dumps(trained, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return trained


def _step(agent: Any, conversation: list[dict[str, Any]], reply: dict[str, Any] | None = None) -> Any:
    """Run the crew's agent on the conversation (with a person's `reply` to its pause added), the response added
    to it; the crew's output."""
    if reply is not None:
        conversation.append(reply)
    run = agent.run(list(conversation))
    response: list[dict[str, Any]] = []
    for response in run:  # noqa: B007 (the last one is the whole response)
        pass
    conversation.extend(response)
    return run.context.output


def trained_instructions(filename: str | os.PathLike[str]) -> dict[str, list[str]]:
    """Each agent's suggestions in a file `train` wrote (ValueError naming the file when it is not one)."""
    try:
        data = json.loads(Path(filename).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot read the trained data {filename}: {e}") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ValueError(f"{filename} is not trained data (Crew.train writes it: agent name -> suggestions)")
    return {str(k): [str(s) for s in v.get("suggestions") or []] for k, v in data.items()}


def _ask_in_terminal(output: TaskOutput) -> str:
    print(f"\n{output.agent}'s answer to: {output.description}\n\n{output.raw}\n")
    return input("Feedback (what to change; nothing to accept it): ")


__all__ = ["TaskQuality", "scores_table", "test_crew", "train_crew", "trained_instructions"]

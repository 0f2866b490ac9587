"""Where a crew's run stands in a conversation: the marks its messages carry (its inputs, each task's progress and
output, a pause for a person's review and the feedback), read back into the inputs, the outputs of the tasks done
and what the next run goes on with."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from chatagent.agents.teams.task import Task, TaskOutput
from chatagent.run.approval import PENDING_APPROVAL, is_approval
from chatagent.run.interrupts import PENDING_QUESTIONS, is_answer, is_decision
from chatagent.schema import USER, Message, content_text

CREW_INPUTS = "crew_inputs"  # extra of the message that starts a crew: its inputs
CREW_DONE = "crew_done"  # extra of the message that starts a crew: outputs of its first tasks, done already (replay)
CREW_TASK = "crew_task"  # extra of a task's progress message: {'index', 'agent', 'description'}
TASK_OUTPUT = "crew_task_output"  # extra of a task's answer: the TaskOutput as a dict
PENDING_HUMAN_INPUT = "pending_human_input"  # extra of the message that pauses a crew for a person's review
HUMAN_FEEDBACK = "human_feedback"  # extra of the person's reply to it


class CrewProgress:
    """Where a crew is in a conversation (given its tasks): its inputs, the outputs of the tasks done, a task paused for review and
    the person's feedback on it, or a task paused for tool approval or a tool's question
    (`chatagent.ask_user`) and its agent's messages so far (with the person's decision last)."""

    def __init__(self, tasks: Sequence[Task], messages: list[Message]) -> None:
        self.inputs: dict[str, Any] = {}
        self.outputs: list[TaskOutput] = []
        self.review: int | None = None  # the task whose answer awaits (or got) a person's feedback
        self.feedback: str | None = None
        self.approving: int | None = None  # the task whose agent's tool call awaits (or got) a person's decision
        self.worked: list[Message] = []  # that agent's messages so far, the decision (approval or answers) last
        self.announced: int | None = None  # a resumed turn: the task it had announced (and not completed)
        last = messages[-1] if messages else None
        if last is not None and last.role != USER and any(m.role == USER for m in messages):
            # a turn resumed (its process died, its run failed): the tasks it completed are kept, the next one runs
            self._restore(tasks, messages)
            task = (last.extra or {}).get(CREW_TASK)
            if task is not None and task["index"] == len(self.outputs):
                self.announced = task["index"]  # shown already: not announced twice
            return
        if last is None or last.role != USER:
            raise ValueError("a crew starts (or resumes) on a user message")
        before = messages[-2].extra if len(messages) >= 2 else None
        if before and (PENDING_APPROVAL in before or PENDING_QUESTIONS in before) and is_decision(last):
            start = self._restore(tasks, messages)
            task_at = max(i for i in range(start, len(messages)) if CREW_TASK in (messages[i].extra or {}))
            self.approving = (messages[task_at].extra or {})[CREW_TASK]["index"]
            self.worked = messages[task_at + 1 :]
            return
        if not (before and PENDING_HUMAN_INPUT in before):
            if last.extra and HUMAN_FEEDBACK in last.extra:
                raise ValueError("the feedback answers no crew paused for review (it must follow the pause)")
            if is_decision(last):
                raise ValueError("the approval or answer answers no crew paused for it (it must follow the pause)")
            self.inputs = dict((last.extra or {}).get(CREW_INPUTS) or _inputs_from_text(content_text(last.content)))
            self.outputs = [task_output_of(tasks[r["index"]], r) for r in (last.extra or {}).get(CREW_DONE) or ()]
            return
        self.feedback = content_text(last.content).strip()
        self._restore(tasks, messages)
        self.review = len(self.outputs) - 1

    def _restore(self, tasks: Sequence[Task], messages: list[Message]) -> int:
        """Read the inputs and the outputs of the tasks done from a paused crew's conversation; where it started."""
        start = max((i for i, m in enumerate(messages) if m.extra and CREW_INPUTS in m.extra), default=-1)
        if start < 0:
            start = max(i for i, m in enumerate(messages[:-1]) if m.role == USER and not _is_feedback(m, messages, i)
                        and not is_approval(m) and not is_answer(m))  # fmt: skip
            self.inputs = _inputs_from_text(content_text(messages[start].content))
        else:
            self.inputs = dict((messages[start].extra or {})[CREW_INPUTS])
        done: dict[int, TaskOutput] = {}
        for m in messages[start:]:
            record = (m.extra or {}).get(TASK_OUTPUT)
            if record is not None:
                done[record["index"]] = task_output_of(tasks[record["index"]], record)
        self.outputs = [done[k] for k in sorted(done)]
        return start


def _is_feedback(m: Message, messages: list[Message], i: int) -> bool:
    extra = messages[i - 1].extra if i > 0 else None
    return extra is not None and PENDING_HUMAN_INPUT in extra


def _inputs_from_text(text: str) -> dict[str, Any]:
    """A crew's inputs from a user's message: a JSON object as it is, other text as the input `input`."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {"input": text}


def task_output_of(task: Task, record: dict[str, Any]) -> TaskOutput:
    data = record.get("json_dict")
    model = task.output_pydantic.model_validate(data) if task.output_pydantic is not None and data else None
    out = TaskOutput(record["description"], record["raw"], record.get("agent"), model, data,
                     record.get("expected_output", ""), task.name)  # fmt: skip
    out.output_format = "pydantic" if model is not None else "json" if data is not None else "raw"
    return out


def task_record(index: int, out: TaskOutput) -> dict[str, Any]:
    return {"index": index, "description": out.description, "raw": out.raw, "agent": out.agent,
            "json_dict": out.json_dict, "expected_output": out.expected_output}  # fmt: skip


__all__ = [
    "CREW_DONE", "CREW_INPUTS", "CREW_TASK", "HUMAN_FEEDBACK", "PENDING_HUMAN_INPUT", "TASK_OUTPUT", "CrewProgress",
    "task_output_of", "task_record",
]  # fmt: skip

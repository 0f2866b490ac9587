"""Task: a piece of work with an expected output, done by an agent of a Crew (see `chatagent.agents.teams.crew`).

    Task(description='Summarise {topic} in the report', expected_output='three bullet points', agent=writer,
         context=[research], output_pydantic=Summary, guardrail=lambda out: (len(out.raw) < 800, 'Too long'))

`{placeholders}` in the description and expected output are filled from the crew's inputs. The outputs of the
tasks in `context` are given to the agent with the task (by default, those of every task before it), each marked as
data from its task (`source="task N"`: an earlier agent may have been told anything by what it read). The answer
is validated against `output_pydantic` (an invalid one is sent back with what is wrong, as structured output
does) and checked by `guardrail`: a function of the TaskOutput returning `(True, value)` or `(False, feedback)`,
or a text the agent's model judges the answer by; a failed check sends the feedback back to the agent, up to
`guardrail_max_retries` times; `guardrails=[...]` checks the answer with each in turn. `human_input=True` pauses
the crew after the task for a person's review.

CrewAI's task settings work too: `output_json` (a pydantic model: the answer is validated against it and kept as
`json_dict` only), `output_file` (the answer written there after the task, its folder made unless
`create_directory=False`), `markdown` (the agent is asked to answer in Markdown), `callback` (called with the
TaskOutput), `condition` (a function of the previous task's output: when it says False the task is skipped and
its output is empty), `async_execution` (CrewAI runs such tasks concurrently until the next synchronous task;
here they run one after another, each seeing the outputs of the tasks before the group, as in CrewAI).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chatagent.errors import ChatAgentError
from chatagent.llm.prepare import untrusted
from chatagent.tools.tool import is_pydantic_model

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
Guardrail = Callable[["TaskOutput"], "tuple[bool, Any]"]
PROMPT = "{description}\n\nYour final answer must be: {expected_output}. Give the complete answer itself, not a summary of it."
MARKDOWN = (
    "\n\nYour final answer MUST be formatted in Markdown syntax: # for headers, **bold**, *italic*, - or * for "
    "lists, ``` for code blocks."
)
CONTEXT = "\n\nThe work done so far, to build on:\n{context}"
JUDGE = (
    "Check a task's answer against this requirement: {requirement}\n\nThe answer:\n{answer}\n\n"
    'Reply with only a JSON object: {{"valid": true or false, "feedback": "what to change, if not valid"}}'
)


class TaskFailed(ChatAgentError):
    """A task's answer did not pass its checks (output_pydantic, guardrail) within the retries allowed."""


@dataclass
class TaskOutput:
    """What a task came to: its description, the answer (`raw`; `pydantic` and `json_dict` with output_pydantic),
    the agent that gave it, and the expected output."""

    description: str
    raw: str
    agent: str | None = None
    pydantic: Any = None
    json_dict: dict[str, Any] | None = None
    expected_output: str = ""
    name: str | None = None
    output_format: str = "raw"  # 'raw', 'json' (output_json) or 'pydantic' (output_pydantic)
    messages: list[Any] = field(default_factory=lambda: [])

    @property
    def summary(self) -> str:
        """The first ten words of the description (CrewAI's summary)."""
        return " ".join(self.description.split()[:10]) + "..."

    def to_dict(self) -> dict[str, Any]:
        """The structured answer as a dict (json_dict, else the pydantic model's dump), {} for a plain answer."""
        if self.json_dict is not None:
            return dict(self.json_dict)
        return self.pydantic.model_dump() if self.pydantic is not None else {}

    def __str__(self) -> str:
        if self.pydantic is not None:
            return str(self.pydantic)
        if self.json_dict is not None:
            return str(self.json_dict)
        return self.raw


@dataclass(eq=False)
class Task:
    """A task for a Crew (see the module docstring)."""

    description: str
    expected_output: str
    agent: Any = None
    context: Sequence[Task] | None = None
    output_pydantic: type[Any] | None = None
    guardrail: Guardrail | str | None = None
    tools: list[Any] | None = None
    human_input: bool = False
    name: str | None = None
    guardrail_max_retries: int = 3
    output_json: type[Any] | None = None
    output_file: str | None = None
    create_directory: bool = True
    markdown: bool = False
    callback: Callable[[TaskOutput], Any] | None = None
    condition: Callable[[TaskOutput], bool] | None = None
    async_execution: bool = False
    guardrails: Sequence[Guardrail | str] | None = None

    def __post_init__(self) -> None:
        for what in ("description", "expected_output"):
            if not isinstance(getattr(self, what), str) or not getattr(self, what).strip():
                raise ValueError(f"a Task needs a {what} (a non-empty text)")
        if self.guardrail is not None and not (callable(self.guardrail) or isinstance(self.guardrail, str)):
            raise TypeError("guardrail must be a function of the TaskOutput or a text the answer is judged by")
        for what in ("output_pydantic", "output_json"):
            if getattr(self, what) is not None and not is_pydantic_model(getattr(self, what)):
                raise TypeError(f"{what} must be a pydantic model class")
        if self.output_pydantic is not None and self.output_json is not None:
            raise ValueError("give output_pydantic or output_json, not both")
        for g in self.guardrails or ():
            if not (callable(g) or isinstance(g, str)):
                raise TypeError("guardrails must be functions of the TaskOutput or texts the answer is judged by")
        for what in ("callback", "condition"):
            if getattr(self, what) is not None and not callable(getattr(self, what)):
                raise TypeError(f"{what} must be a function of the TaskOutput")
        if not isinstance(self.guardrail_max_retries, int) or self.guardrail_max_retries < 0:
            raise ValueError("guardrail_max_retries must be an integer >= 0")

    def filled(self, inputs: Mapping[str, Any]) -> tuple[str, str]:
        """(description, expected output) with the inputs put in their placeholders."""
        return fill(self.description, inputs), fill(self.expected_output, inputs)

    @property
    def output_model(self) -> type[Any] | None:
        """The model the answer is validated against (output_pydantic or output_json)."""
        return self.output_pydantic if self.output_pydantic is not None else self.output_json

    def checks(self) -> list[Guardrail | str]:
        """The guardrails, in the order they check an answer."""
        return ([self.guardrail] if self.guardrail is not None else []) + list(self.guardrails or ())

    def save_output(self, output: TaskOutput, inputs: Mapping[str, Any]) -> None:
        """Write the answer to `output_file` (placeholders filled), making its folder unless told not to."""
        if not self.output_file:
            return
        path = Path(fill(self.output_file, inputs))
        if self.create_directory:
            path.parent.mkdir(parents=True, exist_ok=True)
        elif not path.parent.is_dir():
            raise FileNotFoundError(f"the folder of output_file does not exist: {os.fspath(path.parent)}")
        path.write_text(output.raw, encoding="utf-8")


def placeholders(text: str) -> set[str]:
    """The `{names}` in a text."""
    return set(_PLACEHOLDER.findall(text))


def fill(text: str, inputs: Mapping[str, Any]) -> str:
    """`text` with each `{name}` replaced by `inputs[name]` (other braces are left alone)."""
    return _PLACEHOLDER.sub(lambda m: str(inputs[m.group(1)]) if m.group(1) in inputs else m.group(0), text)


def missing_inputs(tasks: Sequence[Task], inputs: Mapping[str, Any]) -> list[str]:
    """The placeholders of the tasks that the inputs do not fill, sorted."""
    needed: set[str] = set()
    for t in tasks:
        needed |= placeholders(t.description) | placeholders(t.expected_output)
    return sorted(needed - set(inputs))


def task_prompt(
    description: str, expected_output: str, context: Sequence[tuple[int, TaskOutput]], markdown: bool = False
) -> str:
    """What the agent is asked: the task, the expected output, and the work it builds on (task number, output): each
    earlier answer marked as data from its task (`source="task N"`), since it may carry what a page or a tool told
    that task's agent."""
    text = PROMPT.format(description=description, expected_output=expected_output) + (MARKDOWN if markdown else "")
    if context:
        done = (f"Task {n} ({c.description}):\n{untrusted(c.raw, f'task {n}')}" for n, c in context)
        text += CONTEXT.format(context="\n\n".join(done))
    return text


def check_with(guardrail: Guardrail, output: TaskOutput) -> tuple[bool, Any]:
    """A guardrail function's verdict as (passed, the value or the feedback)."""
    verdict = guardrail(output)
    if isinstance(verdict, bool):
        return verdict, output.raw if verdict else "the answer did not pass the check"
    if not (isinstance(verdict, tuple) and len(verdict) == 2 and isinstance(verdict[0], bool)):
        raise TypeError(f"a guardrail returns (True, value) or (False, feedback), got {verdict!r:.80}")
    return verdict


__all__ = ["Task", "TaskFailed", "TaskOutput", "check_with", "fill", "missing_inputs", "placeholders", "task_prompt"]

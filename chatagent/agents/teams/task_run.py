"""One task of a crew run as part of the crew's run: the agent asked, its answer validated (output_pydantic) and
checked (guardrail), and sent back with what is wrong until it passes or the retries are used up."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from chatagent.agent import Agent
from chatagent.agents.basic import BasicAgent
from chatagent.agents.teams.task import JUDGE, Task, TaskFailed, TaskOutput, check_with, task_prompt
from chatagent.plugins.structured import parse_structured
from chatagent.run.interrupts import pending_questions
from chatagent.run.nested import answer_of
from chatagent.run.requests import Asking
from chatagent.run.subagent import hidden, run_subagent
from chatagent.schema import ASSISTANT, USER, Message
from chatagent.tools.arguments import ToolArgumentError, parse_json
from chatagent.tools.calling import ToolCache
from chatagent.tools.registry import make_tools

FAILED_CHECK = "Your answer did not pass a check: {feedback}\nGive the corrected, complete answer."
FEEDBACK = "A person reviewed your answer and asks for changes: {feedback}\nGive the revised, complete answer."


def run_task(
    task: Task,
    agent: Agent,
    index: int,
    inputs: dict[str, Any],
    context: Sequence[tuple[int, TaskOutput]],
    start: int,
    lang: str,
    redo: TaskOutput | None = None,
    feedback: str | None = None,
    worked: list[Message] | None = None,
    extra_prompt: str = "",
    instructions: Sequence[str] = (),
) -> Asking[tuple[TaskOutput | None, int, list[dict[str, Any]]]]:
    """Run `task` with `agent`, its messages shown from `start`: (its output, how many messages it showed, []), or
        (None, how many, what waits: `pending_questions`) when a tool call of the agent waits for a person (its approval,
    or the answer to a question it asked).
        `redo` and `feedback`: the answer a person sent back, and what they said; `worked`: the agent's messages when it
        paused for a person, the person's decision last (it goes on from there); `extra_prompt`: text put before the task
        (what the crew's memory and knowledge recalled for it); `instructions`: what training taught the agent
        (`Crew.train`)."""
    description, expected = task.filled(inputs)
    worker = _worker(agent, task)
    prompt = extra_prompt + task_prompt(description, expected, context, task.markdown)
    if instructions:  # from training (Crew.train), in CrewAI's words
        prompt += "\n\nYou MUST follow these instructions:\n - " + "\n - ".join(instructions)
    conversation = [Message.unchecked(USER, prompt)]
    if redo is not None:
        conversation += [Message.unchecked(ASSISTANT, redo.raw), Message.unchecked(USER, FEEDBACK.format(
            feedback=feedback))]  # fmt: skip
    conversation += worked or []
    shown = 0
    for attempt in range(task.guardrail_max_retries + 1):
        reply = yield from run_subagent(worker, conversation, lang, start + shown)
        shown += len(reply)
        waiting = pending_questions(reply)  # a tool call waits for approval, or asked a person something
        if waiting:
            return None, shown, waiting
        raw = answer_of(reply)
        out = TaskOutput(description, raw, agent.name, None, None, expected, task.name)
        model = task.output_model
        if model is not None:
            try:
                parsed = parse_structured(raw, model)
            except ToolArgumentError as e:
                raise TaskFailed(f"task {index + 1}: the answer does not match {model.__name__}: {e}") from None
            out.json_dict = parsed.model_dump(mode="json")
            if task.output_pydantic is not None:
                out.pydantic, out.output_format = parsed, "pydantic"
            else:
                out.output_format = "json"
        checks = task.checks()
        if not checks:
            return out, shown, []
        passed, value = True, out.raw
        for guardrail in checks:
            passed, value = yield from _check(guardrail, out, agent, lang)
            if not passed:
                break
            if isinstance(value, str) and model is None:
                out.raw = value
        if passed:
            return out, shown, []
        if attempt == task.guardrail_max_retries:
            raise TaskFailed(f"task {index + 1} did not pass its guardrail after {attempt + 1} tries: {value}")
        conversation = conversation + reply + [Message.unchecked(USER, FAILED_CHECK.format(feedback=value))]
    raise AssertionError("unreachable: the last attempt returns or raises")


def _worker(agent: Agent, task: Task) -> Agent:
    """`agent` as the task needs it: with the task's tools instead of its own, and its output model (a copy)."""
    if task.tools is None and task.output_model is None:
        return agent
    worker = copy.copy(agent)
    if task.tools is not None:
        worker.function_list = list(task.tools)
        worker.function_map = make_tools(task.tools)
        worker._tool_cache = ToolCache()
    if task.output_model is not None:
        worker.response_format = task.output_model
        worker._structured = None
    return worker


def _check(guardrail: Any, out: TaskOutput, agent: Agent, lang: str) -> Asking[tuple[bool, Any]]:
    """A guardrail's verdict on `out`: a function's, run off the event loop, or the agent's model's judgement."""
    if callable(guardrail):
        return (yield from agent._blocking(check_with, guardrail, out))
    assert isinstance(guardrail, str)
    judge = BasicAgent(llm=agent.llm, name="guardrail")
    ask = Message.unchecked(USER, JUDGE.format(requirement=guardrail, answer=out.raw))
    reply = yield from run_subagent(judge, [ask], lang, 0, hidden)
    try:
        verdict = parse_json(answer_of(reply))
    except ToolArgumentError:
        verdict = None
    if not isinstance(verdict, dict) or not isinstance(verdict.get("valid"), bool):
        return False, f"the check of the requirement '{guardrail}' gave no verdict; make the answer meet it clearly"
    return verdict["valid"], out.raw if verdict["valid"] else str(verdict.get("feedback") or guardrail)


__all__ = ["run_task"]

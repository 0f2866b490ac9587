"""Crew: agents working through tasks, one after another or under a manager.

    crew = Crew(agents=[writer, editor], tasks=[
        Task('Write about {topic}', 'one paragraph', agent=writer),
        Task('Edit it', 'the edited paragraph', agent=editor)])
    out = crew.kickoff(inputs={'topic': 'rivers'})      # out.raw, out.tasks_output[i].raw / .pydantic / .agent

`process='sequential'` runs each task with its agent; `'hierarchical'` gives each task to a manager (`manager`: an
agent, or a model config) that delegates to the crew's agents through delegation tools and checks their work.
The crew runs as an agent (`crew.as_agent()`) on chatagent's run machinery, so `crew.run(inputs)` streams like
`Agent.run` (a progress message per task, then the task's messages named after its agent), `crew.arun` is the
same on asyncio, plugins, events and traces see every model and tool call, and usage adds up in `out.usage`.

A task with `human_input=True` pauses the crew after it, as tool approval does: the response ends with a message
marked `extra['pending_human_input']` (`out.pending`). Resume with the person's feedback: `kickoff(feedback=...,
session=s)` on the session it paused in ('' accepts the answer; other text sends it back to the agent), or append
`human_feedback(text)` to the conversation and run the crew's agent again. A tool call of a task's agent that waits
for approval pauses the crew too (`out.pending['approval']`, and `pending_approval(response)` as for any run):
`kickoff(approval=True | False | {call_id: bool}, session=s)`, or `approval_message(...)` appended, lets the agent
go on where it stopped. So does a tool that asks a person something (`chatagent.ask_user`: `out.pending['questions']`,
`pending_questions(response)`), answered with `kickoff(answers={question id: answer}, session=s)` or
`answer_message(...)` appended.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chatagent.agent import Agent, current_run
from chatagent.agents.teams.crew_evaluation import test_crew, train_crew, trained_instructions
from chatagent.agents.teams.crew_progress import (
    CREW_DONE,
    CREW_INPUTS,
    CREW_TASK,
    HUMAN_FEEDBACK,
    PENDING_HUMAN_INPUT,
    TASK_OUTPUT,
    CrewProgress,
    task_output_of,
    task_record,
)
from chatagent.agents.teams.delegation import make_manager
from chatagent.agents.teams.task import Task, TaskOutput, missing_inputs
from chatagent.agents.teams.task_run import run_task
from chatagent.llm.base import Usage
from chatagent.llm.prepare import untrusted
from chatagent.run.approval import approval_message
from chatagent.run.events import end_step, start_step
from chatagent.run.interrupts import answer_message
from chatagent.schema import ASSISTANT, USER, Message, to_messages
from chatagent.schema.fragment import Fragment
from chatagent.utils.kwargs import reject_unknown

if TYPE_CHECKING:
    from chatagent.evals import EvaluationReport
    from chatagent.run.handle import ARun, Run

REVIEW = (
    "Please review the answer to task {n} ({description}). Reply with what to change, or with nothing to accept it."
)


@dataclass
class CrewOutput:
    """What a crew came to: the last task's answer (`raw`, `pydantic`, `json_dict`), every task's output, the
    tokens used, and `pending` (what waits for a person's review) when the crew paused."""

    raw: str = ""
    tasks_output: list[TaskOutput] = field(default_factory=lambda: [])
    usage: Usage = field(default_factory=Usage)
    pending: dict[str, Any] | None = None

    @property
    def pydantic(self) -> Any:
        return self.tasks_output[-1].pydantic if self.tasks_output and not self.pending else None

    @property
    def json_dict(self) -> dict[str, Any] | None:
        return self.tasks_output[-1].json_dict if self.tasks_output and not self.pending else None

    @property
    def token_usage(self) -> Usage:
        """`usage` (CrewAI's name)."""
        return self.usage

    def __str__(self) -> str:
        return self.raw


def human_feedback(text: str = "") -> dict[str, Any]:
    """The message that resumes a crew paused for review: `text` is the feedback ('' accepts the answer)."""
    if not isinstance(text, str):
        raise TypeError(f"feedback must be a text, got {type(text).__name__}")
    return {"role": USER, "content": text, "extra": {HUMAN_FEEDBACK: True}}


class Crew:
    """Agents working through tasks (see the module docstring).

    Args:
        agents: the crew's agents (named, each name once).
        tasks: the tasks, in order.
        process: 'sequential' (each task by its agent; a task without one goes to the only agent) or 'hierarchical'.
        manager: for 'hierarchical': the manager agent (a tool-calling agent) or its model (a config dict or model).
        name: the crew's name, on its progress messages.
        task_callback: called with each task's TaskOutput when the task is done (after the task's own callback).
        before_kickoff_callbacks: functions of the inputs, called in turn before the crew starts; each returns the
            inputs the next one (and the crew) gets.
        after_kickoff_callbacks: functions of the CrewOutput, called in turn when the crew ends; each returns the
            output the next one (and the caller) gets.
        context_sources: what gives each task more to go on and learns from its output (the crew's memory and
            knowledge): objects with `context_for(task_text, agent) -> str` and `task_done(output)`, both
            blocking calls run off the event loop; their text reaches the agent marked as untrusted data.
        trained_data: a file `train` wrote: each agent gets its suggestions with every task (CrewAI's trained data).
    """

    def __init__(
        self,
        agents: Sequence[Agent] = (),
        tasks: Sequence[Task] = (),
        process: str = "sequential",
        manager: Any = None,
        *,
        name: str = "crew",
        task_callback: Callable[[TaskOutput], Any] | None = None,
        before_kickoff_callbacks: Sequence[Callable[[dict[str, Any]], Any]] = (),
        after_kickoff_callbacks: Sequence[Callable[[CrewOutput], Any]] = (),
        context_sources: Sequence[Any] = (),
        trained_data: str | os.PathLike[str] | None = None,
        **kwargs: Any,
    ) -> None:
        manager = kwargs.pop("manager_agent", None) or kwargs.pop("manager_llm", None) or manager  # CrewAI's names
        reject_unknown(type(self), kwargs)
        self.task_callback = task_callback
        self.before_kickoff_callbacks = list(before_kickoff_callbacks)
        self.after_kickoff_callbacks = list(after_kickoff_callbacks)
        self.context_sources = list(context_sources)
        self.agents = list(agents)
        self.tasks = list(tasks)
        self.process = process
        self.name = name
        if not self.tasks or not all(isinstance(t, Task) for t in self.tasks):
            raise ValueError("a Crew needs tasks: a list of Task")
        if not all(isinstance(a, Agent) for a in self.agents):
            raise TypeError("a Crew's agents must be Agents")
        names = [a.name for a in self.agents]
        if None in names or len(set(names)) != len(names):
            raise ValueError("a Crew's agents need names, each name once")
        if process not in ("sequential", "hierarchical"):
            raise ValueError(f"process must be 'sequential' or 'hierarchical', got {process!r}")
        for k, t in enumerate(self.tasks):
            if t.context is not None and any(c not in self.tasks[:k] for c in t.context):
                raise ValueError(f"task {k + 1}: its context names a task that does not come before it in the crew")
        self.manager: Agent | None = None
        if process == "hierarchical":
            if manager is None:
                raise ValueError("a hierarchical crew needs a manager: an agent, or a model config (manager=...)")
            if not self.agents:
                raise ValueError("a hierarchical crew needs agents to delegate to")
            self.manager = make_manager(manager, self.agents)
        else:
            for k, t in enumerate(self.tasks):
                if t.agent is None and len(self.agents) != 1:
                    raise ValueError(f"task {k + 1} has no agent (give Task(agent=...), or the crew one agent only)")
        self._agent = CrewAgent(self)
        #: each agent's instructions from training (`train`), given with its every task
        self.instructions = trained_instructions(trained_data) if trained_data is not None else {}

    def task_finished(self, task: Task, output: TaskOutput) -> None:
        """Called (off the event loop) when `task` is done, its file written: its callback, then the crew's."""
        if task.callback is not None:
            task.callback(output)
        if self.task_callback is not None:
            self.task_callback(output)

    def as_agent(self) -> Agent:
        """The agent that runs this crew on a conversation (for the web UI, `serve`, or as another agent's tool): the
        last user message starts it, its text as the input `input` (or its inputs, when it is a JSON object)."""
        return self._agent

    def agent_for(self, task: Task) -> Agent:
        """Who does `task`: the manager (hierarchical), its agent, or the crew's only agent."""
        if self.manager is not None:
            return self.manager
        return task.agent if task.agent is not None else self.agents[0]

    def run(
        self,
        inputs: dict[str, Any] | None = None,
        *,
        feedback: str | None = None,
        approval: bool | dict[str, bool] | None = None,
        answers: dict[str, Any] | None = None,
        session: Any = None,
        delta_stream: bool = False,
        done: Sequence[TaskOutput] = (),
        **kwargs: Any,
    ) -> Run[Any]:
        """The crew's run, streamed like `Agent.run` (see the module docstring). `done`: the outputs of the first
        tasks, from an earlier run: the crew goes on from the task after them (a replay). `feedback`, `approval` or
        `answers` (to a task's tools' questions) resume a crew paused in `session`."""
        return self._agent.run(self._start(inputs, feedback, approval, session, done, answers), session=session,
                               delta_stream=delta_stream, **kwargs)  # fmt: skip

    def arun(
        self,
        inputs: dict[str, Any] | None = None,
        *,
        feedback: str | None = None,
        approval: bool | dict[str, bool] | None = None,
        answers: dict[str, Any] | None = None,
        session: Any = None,
        delta_stream: bool = False,
        done: Sequence[TaskOutput] = (),
        **kwargs: Any,
    ) -> ARun[Any]:
        """`run()` on the running asyncio event loop."""
        return self._agent.arun(self._start(inputs, feedback, approval, session, done, answers), session=session,
                                delta_stream=delta_stream, **kwargs)  # fmt: skip

    def kickoff(self, inputs: dict[str, Any] | None = None, **kwargs: Any) -> CrewOutput:
        """Run the crew to its end (or to a pause for a person); its output. Takes `run()`'s arguments."""
        run = self.run(self._before_kickoff(inputs, kwargs), **kwargs)
        for _ in run:
            pass
        return self._after_kickoff(_output(run.context))

    def resume(self, *, session: Any, **kwargs: Any) -> CrewOutput:
        """Go on with the crew's turn in `session` that did not end (its process was killed, its run failed): the
        tasks it completed are kept, not done again; the next one runs, then the rest. Its output, as `kickoff()`'s;
        takes `Agent.resume`'s arguments (SessionError when there is nothing to resume)."""
        run = self._agent.resume(session=session, **kwargs)
        for _ in run:
            pass
        return _output(run.context)

    async def akickoff(self, inputs: dict[str, Any] | None = None, **kwargs: Any) -> CrewOutput:
        """`kickoff()` on the running asyncio event loop."""
        run = self.arun(self._before_kickoff(inputs, kwargs), **kwargs)
        async for _ in run:
            pass
        return self._after_kickoff(_output(run.context))

    def _before_kickoff(self, inputs: dict[str, Any] | None, kwargs: dict[str, Any]) -> dict[str, Any] | None:
        if any(kwargs.get(k) is not None for k in ("feedback", "approval", "answers")):
            return inputs  # a paused crew goes on: it started already
        for callback in self.before_kickoff_callbacks:
            given = dict(inputs or {})
            changed = callback(given)
            inputs = given if changed is None else changed
            if not isinstance(inputs, dict):
                raise TypeError(f"a before_kickoff callback returns the inputs (a dict), got {type(inputs).__name__}")
        return inputs

    def _after_kickoff(self, out: CrewOutput) -> CrewOutput:
        if out.pending:
            return out
        for callback in self.after_kickoff_callbacks:
            changed = callback(out)
            out = out if changed is None else changed
        return out

    def kickoff_for_each(
        self, inputs: Sequence[dict[str, Any]], *, pool: Any = None, **kwargs: Any
    ) -> list[CrewOutput]:
        """`kickoff(i)` for each of `inputs`, one after another; with `pool` (a `chatagent.workers.batch.Pool`) on
        the worker processes instead, bounded by their queue's limits. The outputs in the inputs' order."""
        if pool is not None:
            reject_unknown(type(self), kwargs)
            return pool.kickoff_for_each(self, [dict(i) for i in inputs])
        return [self.kickoff(dict(i), **kwargs) for i in inputs]

    def start_messages(self, inputs: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """The message that starts the crew on `inputs` (what `kickoff` runs its agent on)."""
        return self._start(inputs, None, None, None)

    def output_of(self, messages: Sequence[dict[str, Any]]) -> CrewOutput:
        """The output of the crew's last run in a stored conversation (`Session.messages()`)."""
        msgs = to_messages(list(messages))
        start = max((i for i, m in enumerate(msgs) if m.extra and CREW_INPUTS in m.extra), default=0)
        done: dict[int, TaskOutput] = {}
        for m in msgs[start:]:
            record = (m.extra or {}).get(TASK_OUTPUT)
            if record is not None:
                done[record["index"]] = task_output_of(self.tasks[record["index"]], record)
        outputs = [done[k] for k in sorted(done)]
        return CrewOutput(outputs[-1].raw if outputs else "", outputs)

    def test(self, n_iterations: int, eval_llm: Any, inputs: dict[str, Any] | None = None,
             **options: Any) -> EvaluationReport:  # fmt: skip
        """Run the crew `n_iterations` times and have `eval_llm` (a model or its config) score each task's output
        from 1 to 10: CrewAI's table printed, the evaluation's report returned (`evaluate`'s options apply:
        `store=False` keeps no traces). See `chatagent.agents.teams.crew_evaluation`."""
        return test_crew(self, n_iterations, eval_llm, inputs, **options)

    def train(self, n_iterations: int, filename: str, inputs: dict[str, Any] | None = None, *,
              feedback: Callable[[TaskOutput], str] | None = None) -> dict[str, Any]:  # fmt: skip
        """Run the crew `n_iterations` times, a person reviewing every task (`feedback`: a function of the
        TaskOutput giving what they say, '' to accept; else asked in the terminal); each agent's model turns the
        feedback into suggestions, written as JSON to `filename` (`Crew(..., trained_data=filename)` uses them)."""
        return train_crew(self, n_iterations, filename, inputs, feedback,
                          lambda given: self._start(given, None, None, None), human_feedback)  # fmt: skip

    def _start(
        self, inputs: dict[str, Any] | None, feedback: str | None, approval: Any, session: Any,
        done: Sequence[TaskOutput] = (), answers: dict[str, Any] | None = None,
    ) -> list[dict[str, Any]]:  # fmt: skip
        if len(done) >= len(self.tasks):
            raise ValueError(f"done holds {len(done)} outputs: the crew has {len(self.tasks)} tasks, one must be left")
        if feedback is not None or approval is not None or answers is not None:
            if [inputs, feedback, approval, answers].count(None) != 3:
                raise ValueError(
                    "give inputs to start the crew, or feedback, approval or answers to resume it: one of them"
                )
            if session is None:
                raise ValueError("feedback, approval and answers resume a crew paused in a session: give session=")
            if approval is not None:
                return [approval_message(approval)]
            return [human_feedback(feedback)] if feedback is not None else [answer_message(answers or {})]
        inputs = dict(inputs or {})
        missing = missing_inputs(self.tasks, inputs)
        if missing:
            raise ValueError(f"the tasks need inputs that were not given: {', '.join(missing)}")
        text = json.dumps(inputs, ensure_ascii=False, default=str) if inputs else "Start."
        extra: dict[str, Any] = {CREW_INPUTS: inputs}
        if done:
            extra[CREW_DONE] = [task_record(k, out) for k, out in enumerate(done)]
        return [{"role": USER, "content": text, "extra": extra}]


def _output(context: Any) -> CrewOutput:
    out = context.output
    if not isinstance(out, CrewOutput):
        raise RuntimeError("the crew's run ended without an output")
    out.usage = context.usage
    return out


class CrewAgent(Agent):
    """A crew as an agent: its `_run` works through the tasks (see the module docstring)."""

    async_safe = True

    def __init__(self, crew: Crew) -> None:
        first = crew.agent_for(crew.tasks[0])  # its model is the one a page names for the crew
        super().__init__(llm=first._llm_cfg, name=crew.name,
                         description=f"a crew of {', '.join(a.name or '' for a in crew.agents)}")  # fmt: skip
        self.crew = crew

    def _sub_agents(self) -> list[Agent]:
        return list(self.crew.agents) + ([self.crew.manager] if self.crew.manager is not None else [])

    def _with_system_message(self, msgs: list[Message]) -> list[Message]:
        return msgs

    def _run(self, messages: list[Message], lang: str = "en", **kwargs: Any) -> Iterator[list[Message]]:
        crew = self.crew
        progress = CrewProgress(crew.tasks, messages)
        missing = missing_inputs(crew.tasks, progress.inputs)
        if missing:
            raise ValueError(f"the tasks need inputs that were not given: {', '.join(missing)}")
        outputs = progress.outputs
        first = len(outputs)
        pos = 0
        if progress.review is not None and not progress.feedback:  # the person accepted the answer
            first = progress.review + 1
        elif progress.review is not None:
            first = progress.review
        elif progress.approving is not None:  # the task goes on where its agent paused
            first = progress.approving
        group = first  # where the current group of async tasks began: they see the outputs before it
        for k in range(first, len(crew.tasks)):
            task = crew.tasks[k]
            agent = crew.agent_for(task)
            redo = outputs[k] if progress.review == k else None
            worked = progress.worked if progress.approving == k else None
            if not (task.async_execution and k > 0 and crew.tasks[k - 1].async_execution):
                group = k
            if task.condition is not None and redo is None and worked is None and outputs \
                    and not (yield from self._blocking(task.condition, outputs[-1])):  # fmt: skip
                out = TaskOutput(task.filled(progress.inputs)[0], "", agent.name, None, None,
                                 task.filled(progress.inputs)[1], task.name)  # fmt: skip
                yield [
                    Fragment.unchecked(ASSISTANT, "", out.agent, None, None, {TASK_OUTPUT: task_record(k, out)}, pos)
                ]
                pos += 1
                del outputs[k:]
                outputs.append(out)
                continue
            if worked is None and progress.announced != k:
                yield [_progress_fragment(crew, k, task, agent, progress.inputs, pos)]
                pos += 1
            before = _context(crew, task, outputs[: group if task.async_execution else k])
            extra = ""
            if crew.context_sources and redo is None and worked is None:
                extra = yield from self._blocking(_recalled, crew.context_sources, task, agent, progress.inputs)
            run = current_run()
            description, expected = task.filled(progress.inputs)
            about = {"index": k, "agent": agent.name, "description": description, "expected": expected}
            step = (
                start_step(run.callbacks, "task", task.name or f"Task {k + 1}", run, about) if run.callbacks else None
            )
            try:
                out, shown, waiting = yield from run_task(
                    task, agent, k, progress.inputs, before, pos, lang, redo,
                    progress.feedback if redo is not None else None, worked, extra,
                    crew.instructions.get(str(agent.name), ()),
                )  # fmt: skip
            except BaseException as e:
                end_step(run.callbacks, step, "closed before the end" if isinstance(e, GeneratorExit) else
                         f"{type(e).__name__}: {e}")  # fmt: skip
                raise
            end_step(run.callbacks, step, None, {"output": out.raw if out is not None else None})
            pos += shown
            if out is None:  # a tool call of the task's agent waits for a person (approval, or a question)
                approval = [
                    {k: w[k] for k in ("id", "name", "arguments")} for w in waiting if w.get("kind") == "approval"
                ]
                pending = {"task": k, "agent": agent.name, "approval": approval} if approval else {
                    "task": k, "agent": agent.name, "questions": waiting}  # fmt: skip
                current_run().output = CrewOutput("", list(outputs), pending=pending)
                return
            yield [
                Fragment.unchecked(ASSISTANT, "", out.agent, None, None, {TASK_OUTPUT: task_record(k, out)}, pos - 1)
            ]
            del outputs[k:]
            outputs.append(out)
            yield from self._blocking(_task_done, crew, task, out, progress.inputs)
            if task.human_input:
                pending = {"task": k, "description": out.description, "agent": out.agent}
                note = REVIEW.format(n=k + 1, description=_first_line(out.description))
                yield [Fragment.unchecked(ASSISTANT, note, crew.name, None, None, {PENDING_HUMAN_INPUT: pending}, pos)]
                current_run().output = CrewOutput("", list(outputs), pending=pending)
                return
        current_run().output = CrewOutput(outputs[-1].raw if outputs else "", list(outputs))


def _recalled(sources: Sequence[Any], task: Task, agent: Agent, inputs: dict[str, Any]) -> str:
    """What the crew's memory and knowledge give a task, each marked as untrusted data, before the task's text."""
    text = "\n".join(task.filled(inputs))
    parts = []
    for source in sources:
        found = source.context_for(text, agent)
        if found:
            parts.append(untrusted(found, getattr(source, "source", "memory")))
    return "\n\n".join(parts) + "\n\n" if parts else ""


def _task_done(crew: Crew, task: Task, out: TaskOutput, inputs: dict[str, Any]) -> None:
    """After a task: its file written, its callback and the crew's called, the crew's memory told."""
    task.save_output(out, inputs)
    crew.task_finished(task, out)
    for source in crew.context_sources:
        source.task_done(out)


def _context(crew: Crew, task: Task, done: list[TaskOutput]) -> list[tuple[int, TaskOutput]]:
    """The outputs a task builds on, each with its task's number: those of its `context` tasks, or of every task
    before it."""
    if task.context is None:
        return list(enumerate(done, 1))
    return [(crew.tasks.index(t) + 1, done[crew.tasks.index(t)]) for t in task.context]


def _progress_fragment(crew: Crew, k: int, task: Task, agent: Agent, inputs: dict[str, Any], pos: int) -> Fragment:
    description = task.filled(inputs)[0]
    text = f"Task {k + 1}/{len(crew.tasks)} ({agent.name}): {_first_line(description)}"
    extra = {CREW_TASK: {"index": k, "agent": agent.name, "description": description}}
    return Fragment.unchecked(ASSISTANT, text, crew.name, None, None, extra, pos)


def _first_line(text: str, limit: int = 120) -> str:
    line = text.strip().split("\n", 1)[0]
    return line if len(line) <= limit else line[: limit - 3] + "..."


__all__ = ["Crew", "CrewAgent", "CrewOutput", "human_feedback"]

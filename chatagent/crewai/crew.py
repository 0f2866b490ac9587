"""CrewAI's `Crew`: chatagent's Crew (`chatagent.agents.teams.crew`) under CrewAI's keywords.

    crew = Crew(agents=[researcher, writer], tasks=[research, write], process=Process.sequential,
                memory=True, knowledge_sources=[StringKnowledgeSource(content="...")], planning=True)
    result = crew.kickoff(inputs={"topic": "rivers"})    # CrewOutput: raw, pydantic, json_dict, tasks_output,
                                                           # token_usage (UsageMetrics)
    crew.kickoff_for_each([{"topic": "a"}, {"topic": "b"}]);  await crew.kickoff_async(inputs)
    crew.replay(task_id)                                   # again from that task of the last kickoff

What CrewAI adds around the run lives here: the agents' `{placeholders}` filled from the inputs, the delegation
tools for an agent with `allow_delegation=True`, the crew's memory and knowledge given to every task (through
chatagent's `context_sources`, marked as untrusted data), a plan written before the crew starts (`planning`),
the task outputs of the last kickoff kept for `replay` and `output_log_file`, and CrewAI's events.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from chatagent.agents.teams.crew import Crew as ChatCrew
from chatagent.agents.teams.crew import CrewOutput as ChatCrewOutput
from chatagent.agents.teams.crew import human_feedback
from chatagent.agents.teams.crew_evaluation import trained_instructions
from chatagent.agents.teams.delegation import delegation_tools
from chatagent.agents.teams.task import TaskOutput
from chatagent.crewai.crews.crew_output import CrewOutput
from chatagent.crewai.events import base_events as ev
from chatagent.crewai.events.bus import crewai_event_bus
from chatagent.crewai.knowledge.knowledge import AgentsKnowledge, Knowledge, knowledge_of
from chatagent.crewai.llm import model_config
from chatagent.crewai.memory.unified_memory import Memory, TaskMemory
from chatagent.crewai.planning import plan_tasks
from chatagent.crewai.steps import StepCallbacks
from chatagent.crewai.storage import load_kickoff, save_kickoff
from chatagent.crewai.usage import UsageMetrics, usage_metrics
from chatagent.llm.base import Usage
from chatagent.utils.kwargs import reject_unknown

logger = logging.getLogger("chatagent.crewai")
TRAINED_AGENTS_DATA_FILE = "trained_agents_data.pkl"  # CrewAI's name (chatagent writes JSON in it)
# CrewAI settings that change nothing here (printing, telemetry, CrewAI's own executor and platform)
_ACCEPTED = ("verbose", "share_crew", "function_calling_llm", "prompt_file", "chat_llm", "security_config",
             "tracing", "stream", "skills", "checkpoint", "id", "config", "execution_context",
             "tool_failure_policy", "i18n")  # fmt: skip


class Crew(ChatCrew):
    """A CrewAI crew (see the module docstring)."""

    def __init__(
        self,
        agents: Sequence[Any] = (),
        tasks: Sequence[Any] = (),
        process: Any = "sequential",
        manager: Any = None,
        *,
        name: str | None = "crew",
        manager_llm: Any = None,
        manager_agent: Any = None,
        memory: Any = False,
        knowledge_sources: Sequence[Any] | None = None,
        embedder: Any = None,
        cache: bool = True,
        max_rpm: int | None = None,
        step_callback: Callable[[Any], Any] | None = None,
        task_callback: Callable[[TaskOutput], Any] | None = None,
        before_kickoff_callbacks: Sequence[Callable[[dict[str, Any]], Any]] = (),
        after_kickoff_callbacks: Sequence[Callable[[Any], Any]] = (),
        output_log_file: bool | str | None = None,
        planning: bool = False,
        planning_llm: Any = None,
        entity_memory: Any = None,
        trained_agents_file: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.settings = {k: kwargs.pop(k) for k in _ACCEPTED if k in kwargs}
        reject_unknown(type(self), kwargs)
        self.verbose = bool(self.settings.get("verbose", False))
        self.memory = memory
        self.embedder = embedder
        self.cache = cache
        self.max_rpm = max_rpm
        self.step_callback = step_callback
        self.crew_before_kickoff = list(before_kickoff_callbacks)
        self.crew_after_kickoff = list(after_kickoff_callbacks)
        self.output_log_file = output_log_file
        self.planning = planning
        self.planning_llm = planning_llm
        self.manager_llm, self.manager_agent = manager_llm, manager_agent
        self.knowledge_sources = list(knowledge_sources or [])
        self.knowledge: Knowledge | None = knowledge_of(self.knowledge_sources, embedder, "crew")
        self.usage_metrics: UsageMetrics | None = None
        self._memory: Memory | None = _crew_memory(memory, embedder)
        sources: list[Any] = []
        if self.knowledge is not None:
            sources.append(self.knowledge)
        if any(getattr(a, "knowledge", None) is not None for a in agents):
            sources.append(AgentsKnowledge())
        if self._memory is not None or any(isinstance(getattr(a, "memory", None), Memory) for a in agents):
            sources.append(TaskMemory(self._memory, agents=agents))  # the agents' own memories, else the crew's
        self.entity_memory = entity_memory
        if entity_memory is not None:
            if not callable(getattr(entity_memory, "context_for", None)):
                raise TypeError("entity_memory is an EntityMemory (chatagent.crewai.memory.entity.entity_memory)")
            if isinstance(getattr(entity_memory, "agents", None), dict):
                entity_memory.agents.update({a.role: a for a in agents})  # whose model draws a task's entities
            sources.append(entity_memory)
        for agent in agents:
            known = getattr(agent, "knowledge", None)
            if embedder is not None and isinstance(known, Knowledge) and known.embedder is None:
                agent.knowledge = Knowledge(known.collection_name, known.sources, embedder, known.config)
            if max_rpm and isinstance(getattr(agent, "extra_generate_cfg", None), dict):
                agent.extra_generate_cfg.setdefault("max_rpm", max_rpm)  # the agent's own max_rpm wins
            if not cache:
                agent._tool_cache = None
        manager = manager_agent if manager_agent is not None else manager_llm if manager_llm is not None else manager
        if manager is not None and not hasattr(manager, "function_map"):
            manager = model_config(manager)
        if str(process) == "hierarchical" and manager is None:
            raise ValueError("a hierarchical crew needs manager_llm or manager_agent")
        super().__init__(agents, tasks, str(getattr(process, "value", process)), manager, name=name or "crew",
                         task_callback=task_callback, context_sources=sources)  # fmt: skip
        self.trained_agents_file = trained_agents_file
        self.instructions = _trained(trained_agents_file)
        if self.manager is None:
            _give_delegation_tools(self.agents)

    # ---- running ----------------------------------------------------------------------------------------------

    def kickoff(self, inputs: dict[str, Any] | None = None, **kwargs: Any) -> CrewOutput:  # type: ignore[override]
        """Run the crew on `inputs`; its CrewOutput."""
        inputs = self._prepared(inputs, kwargs)
        if kwargs.get("session") is None and any(t.human_input for t in self.tasks):
            return self._kickoff_asking(inputs, kwargs)
        chunks = crewai_event_bus.listens(ev.LLMStreamChunkEvent)
        run = self.run(inputs, callbacks=self._callbacks(), delta_stream=chunks, **kwargs)
        for step in run:
            if chunks:
                self._stream_chunks(step)
        return self._finished(run.context, inputs)

    def _stream_chunks(self, fragments: Any) -> None:
        """Each piece of an agent's answer text as CrewAI's LLMStreamChunkEvent (the crew's own notes left out)."""
        for fragment in fragments:  # dicts (the crew was given dicts)
            text = fragment.get("content")
            if isinstance(text, str) and text and fragment.get("role") == "assistant" \
                    and fragment.get("name") != self.name and not fragment.get("function_call"):  # fmt: skip
                crewai_event_bus.emit(self, ev.LLMStreamChunkEvent(chunk=text, agent_role=fragment.get("name")))

    def _kickoff_asking(self, inputs: dict[str, Any], kwargs: dict[str, Any]) -> CrewOutput:
        """A crew with `human_input` tasks, run in the terminal as CrewAI does: after such a task the person is
        asked for feedback (Enter accepts the answer; other text sends it back to the agent)."""
        reject_unknown(type(self), {k: v for k, v in kwargs.items() if k not in ("done",)})
        conversation: list[Any] = self._start(inputs, None, None, None, kwargs.get("done", ()))
        total = Usage()
        while True:
            run = self.as_agent().run(list(conversation), callbacks=self._callbacks())
            response: list[Any] = []
            for step in run:
                response = step
            total.merge(run.context.usage)
            pending = getattr(run.context.output, "pending", None)
            if not pending or "approval" in pending:
                break
            conversation += response
            done = run.context.output.tasks_output[-1]
            said = input(f"\n## Final Result: {done.raw}\n\n=====\n## Please provide feedback on the Final Result "
                         "and the Agent's actions (Enter to accept):\n")  # fmt: skip
            conversation.append(human_feedback(said))
        run.context.usage = total
        return self._finished(run.context, inputs)

    async def kickoff_async(self, inputs: dict[str, Any] | None = None, **kwargs: Any) -> CrewOutput:
        """`kickoff()` on the running event loop."""
        inputs = await asyncio.to_thread(self._prepared, inputs, kwargs)
        run = self.arun(inputs, callbacks=self._callbacks(), **kwargs)
        async for _ in run:
            pass
        return await asyncio.to_thread(self._finished, run.context, inputs)

    akickoff = kickoff_async  # type: ignore[assignment]

    def kickoff_for_each(self, inputs: Sequence[dict[str, Any]]) -> list[CrewOutput]:
        """`kickoff` once per inputs, one after another; the usage of all of them is `usage_metrics`."""
        results = [self.copy().kickoff(i) for i in _each(inputs)]
        self.usage_metrics = _summed(results)
        return results

    async def kickoff_for_each_async(self, inputs: Sequence[dict[str, Any]]) -> list[CrewOutput]:
        """`kickoff_async` once per inputs, concurrently."""
        results = await asyncio.gather(*(self.copy().kickoff_async(i) for i in _each(inputs)))
        self.usage_metrics = _summed(list(results))
        return list(results)

    def replay(self, task_id: str, inputs: dict[str, Any] | None = None) -> CrewOutput:
        """Run the last kickoff again from the task with id `task_id` (an id `chatagent log-tasks-outputs` shows):
        the tasks before it keep their stored outputs."""
        stored = load_kickoff()
        if stored is None:
            raise ValueError("no kickoff of a crew is stored to replay: kickoff first")
        index = next((k for k, t in enumerate(stored["tasks"]) if t["task_id"] == str(task_id)), None)
        if index is None:
            raise ValueError(f"task {task_id!r} is not among the tasks of the last kickoff")
        if len(stored["tasks"]) != len(self.tasks):
            raise ValueError("the stored kickoff was of a crew with another number of tasks")
        given = {**stored["inputs"], **(inputs or {})}
        done = [_stored_output(t) for t in stored["tasks"][:index]]
        for task, out in zip(self.tasks, done, strict=False):
            task.output = out  # type: ignore[attr-defined]
        return self.kickoff(given, done=done)

    def test(self, n_iterations: int, eval_llm: Any = None, inputs: dict[str, Any] | None = None,
             **options: Any) -> Any:  # fmt: skip
        """Run the crew `n_iterations` times, `eval_llm` (an LLM, a model name, ...) scoring each task 1 to 10
        (chatagent's `Crew.test`: CrewAI's table printed, the evaluation's report returned)."""
        for agent in list[Any](self.agents):
            if hasattr(agent, "interpolate_inputs"):
                agent.interpolate_inputs(dict(inputs or {}))
        return super().test(n_iterations, model_config(eval_llm), inputs, **options)

    def train(self, n_iterations: int, filename: str, inputs: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        """Run the crew `n_iterations` times, a person reviewing each task; the suggestions drawn from it written to
        `filename` (chatagent's `Crew.train`)."""
        for agent in list[Any](self.agents):
            if hasattr(agent, "interpolate_inputs"):
                agent.interpolate_inputs(dict(inputs or {}))
        return super().train(n_iterations, filename, inputs, **kwargs)

    def copy(self) -> Crew:
        """A crew of copies of the agents and tasks (what kickoff_for_each runs each inputs on)."""
        given: list[Any] = list(self.agents)
        agents = {id(a): a.copy() if callable(getattr(a, "copy", None)) else a for a in given}
        tasks: list[Any] = []
        for t in list[Any](self.tasks):
            tasks.append(t.copy(agents, tasks) if callable(getattr(t, "copy", None)) else t)
        return Crew(list(agents.values()), tasks, self.process, name=self.name, manager_llm=self.manager_llm,
                    manager_agent=self.manager_agent, memory=self.memory, knowledge_sources=self.knowledge_sources,
                    embedder=self.embedder, cache=self.cache, max_rpm=self.max_rpm, step_callback=self.step_callback,
                    task_callback=self.task_callback, before_kickoff_callbacks=self.crew_before_kickoff,
                    after_kickoff_callbacks=self.crew_after_kickoff, output_log_file=self.output_log_file,
                    planning=self.planning, planning_llm=self.planning_llm, entity_memory=self.entity_memory,
                    **self.settings)  # fmt: skip

    # ---- around the run -----------------------------------------------------------------------------------

    def _prepared(self, inputs: dict[str, Any] | None, kwargs: dict[str, Any]) -> dict[str, Any]:
        resuming = kwargs.get("feedback") is not None or kwargs.get("approval") is not None
        inputs = dict(inputs or {})
        if resuming:
            return inputs
        for callback in self.crew_before_kickoff:
            changed = callback(inputs)
            inputs = inputs if changed is None else changed
            if not isinstance(inputs, dict):
                raise TypeError(f"a before_kickoff callback returns the inputs (a dict), got {type(inputs).__name__}")
        crewai_event_bus.emit(self, ev.CrewKickoffStartedEvent(crew_name=self.name, inputs=inputs))
        for agent in list[Any](self.agents):
            if hasattr(agent, "interpolate_inputs"):
                agent.interpolate_inputs(inputs)
        if self.planning and not kwargs.get("done"):
            plan_tasks(self, inputs)
        return inputs

    def _callbacks(self) -> list[Any]:
        found: list[Any] = [crewai_event_bus.run_listener(self)]
        steps = {a.name: a.step_callback for a in list[Any](self.agents) if getattr(a, "step_callback", None)}
        if self.step_callback is not None or steps:
            found.append(StepCallbacks(self.step_callback, steps))
        return [c for c in found if c is not None]

    def task_finished(self, task: Any, output: TaskOutput) -> None:
        task.output = output
        crewai_event_bus.emit(self, ev.TaskCompletedEvent(output=output, task_name=output.name or "", task=task))
        super().task_finished(task, output)
        self._log(output)

    def _log(self, output: TaskOutput) -> None:
        if not self.output_log_file:
            return
        path = Path("logs.txt" if self.output_log_file is True else str(self.output_log_file))
        entry = {"task": output.description, "agent": output.agent, "output": output.raw}
        if path.suffix == ".json":
            entries = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []
            path.write_text(json.dumps([*entries, entry], ensure_ascii=False, indent=2), encoding="utf-8")
        else:
            with path.open("a", encoding="utf-8") as f:
                f.write(f"task_name=\"{output.description}\", agent=\"{output.agent}\", status=\"completed\", "
                        f"output=\"{output.raw}\"\n")  # fmt: skip

    def _finished(self, context: Any, inputs: dict[str, Any]) -> CrewOutput:
        out = context.output
        if not isinstance(out, ChatCrewOutput):
            raise RuntimeError("the crew's run ended without an output")
        last = out.tasks_output[-1] if out.tasks_output and not out.pending else None
        result = CrewOutput(out.raw, last.pydantic if last else None, last.json_dict if last else None,
                            list(out.tasks_output), usage_metrics(context.usage))  # fmt: skip
        self.usage_metrics = result.token_usage
        for task, task_out in zip(self.tasks, out.tasks_output, strict=False):
            task.output = task_out  # type: ignore[attr-defined]
        if not out.pending:
            save_kickoff(inputs, [(str(getattr(t, "id", k)), o) for k, (t, o) in
                                  enumerate(zip(self.tasks, out.tasks_output, strict=False))])  # fmt: skip
        if self._memory is not None:
            self._memory.drain_writes()
        crewai_event_bus.emit(
            self,
            ev.CrewKickoffCompletedEvent(
                crew_name=self.name, output=result, total_tokens=result.token_usage.total_tokens
            ),
        )
        for callback in self.crew_after_kickoff:
            changed = callback(result)
            result = result if changed is None else changed
        return result

    def reset_memories(self, command_type: str = "all") -> None:
        """Forget what the crew remembered ('memory', 'knowledge', 'kickoff_outputs' or 'all')."""
        if command_type not in ("all", "memory", "entity", "knowledge", "kickoff_outputs", "agent_knowledge"):
            raise ValueError(f"unknown memory type {command_type!r}: memory, knowledge, kickoff_outputs or all")
        if command_type in ("all", "memory") and self._memory is not None:
            self._memory.reset()
        if command_type in ("all", "memory", "entity") and self.entity_memory is not None:
            self.entity_memory.reset()
        if command_type in ("all", "knowledge") and self.knowledge is not None:
            self.knowledge.reset()
        if command_type in ("all", "agent_knowledge", "knowledge"):
            for agent in list[Any](self.agents):
                if getattr(agent, "knowledge", None) is not None:
                    agent.knowledge.reset()
        if command_type in ("all", "kickoff_outputs"):
            save_kickoff(None, [])

    def __repr__(self) -> str:
        return f"Crew(id={id(self)}, process={self.process}, number_of_agents={len(self.agents)}, " \
               f"number_of_tasks={len(self.tasks)})"  # fmt: skip


def _trained(given: str | None) -> dict[str, list[str]]:
    """Each agent's suggestions from `chatagent train` (CrewAI's trained agents data): the file given, else
    $CREWAI_TRAINED_AGENTS_FILE or trained_agents_data.pkl here when there is one (a file that is not what `train`
    writes is then passed over with a warning; pickles are never loaded)."""
    path = given or os.environ.get("CREWAI_TRAINED_AGENTS_FILE") or TRAINED_AGENTS_DATA_FILE
    if given is None and not Path(path).is_file():
        return {}
    try:
        return trained_instructions(path)
    except ValueError:
        if given is not None:
            raise
        logger.warning("%s is no trained data chatagent train wrote: the crew runs without it", Path(path).name)
        return {}


def _crew_memory(memory: Any, embedder: Any) -> Memory | None:
    if memory is True:
        return Memory(embedder=embedder)
    if memory is False or memory is None:
        return None
    if isinstance(memory, Memory):
        return memory
    raise TypeError(f"memory is True, False or a Memory, got {type(memory).__name__}")


def _give_delegation_tools(agents: Sequence[Any]) -> None:
    """An agent with allow_delegation=True in a crew of several gets the tools to delegate to the others."""
    for agent in agents:
        if not getattr(agent, "allow_delegation", False):
            continue
        others = [a for a in agents if a is not agent]
        if not others:
            continue
        for made in delegation_tools(others):
            agent.function_map[made.name] = made


def _each(inputs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(inputs, dict) or not all(isinstance(i, dict) for i in inputs):
        raise TypeError("kickoff_for_each takes a list of inputs (dicts)")
    return list(inputs)


def _summed(results: list[CrewOutput]) -> UsageMetrics:
    total = UsageMetrics()
    for r in results:
        total.add_usage_metrics(r.token_usage)
    return total


def _stored_output(entry: dict[str, Any]) -> TaskOutput:
    out = TaskOutput(entry["description"], entry["raw"], entry.get("agent"), None, entry.get("json_dict"),
                     entry.get("expected_output", ""), entry.get("name"))  # fmt: skip
    out.output_format = "json" if out.json_dict is not None else "raw"
    return out


__all__ = ["Crew", "CrewOutput"]

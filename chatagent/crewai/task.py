"""CrewAI's `Task`: chatagent's Task (`chatagent.agents.teams.task`) under CrewAI's keywords, with `config`
(a task's YAML entry), `output` (its TaskOutput once done) and an `id`.

    Task(description="Research {topic}", expected_output="Three bullet points", agent=researcher,
         context=[earlier], output_pydantic=Notes, output_file="out/notes.md", callback=print,
         guardrail=lambda out: (len(out.raw) < 800, "Too long"), async_execution=False, markdown=True)
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from chatagent.agents.teams.task import Task as ChatTask
from chatagent.agents.teams.task import TaskOutput, task_prompt
from chatagent.crewai.crew import Crew
from chatagent.crewai.tools.base_tool import as_chatagent_tool
from chatagent.utils.kwargs import reject_unknown

# CrewAI settings that change nothing here
_ACCEPTED = ("converter_cls", "security_config", "allow_crewai_trigger_context", "input_files", "used_tools",
             "tools_errors", "delegations", "i18n", "processed_by_agents", "prompt_context", "callbacks")  # fmt: skip
_FIELDS = ("description", "expected_output", "agent", "context", "output_pydantic", "output_json", "output_file",
           "create_directory", "markdown", "callback", "async_execution", "guardrail", "guardrails",
           "guardrail_max_retries", "human_input", "name", "tools")  # fmt: skip


class Task(ChatTask):
    """A CrewAI task (see the module docstring)."""

    def __init__(self, description: str = "", expected_output: str = "", *, config: dict[str, Any] | None = None,
                 **kwargs: Any) -> None:  # fmt: skip
        given = dict(config or {})
        for key, value in given.items():  # a task's YAML entry (CrewBase resolved its agent, context, tools)
            if key == "description" and not description:
                description = value
            elif key == "expected_output" and not expected_output:
                expected_output = value
            elif key not in ("description", "expected_output"):
                kwargs.setdefault(key, value)
        self.settings = {k: kwargs.pop(k) for k in _ACCEPTED if k in kwargs}
        if "max_retries" in kwargs:  # CrewAI's older name
            kwargs.setdefault("guardrail_max_retries", kwargs.pop("max_retries"))
        condition = kwargs.pop("condition", None)
        reject_unknown(type(self), {k: v for k, v in kwargs.items() if k not in _FIELDS})
        self.config = config
        tools = kwargs.pop("tools", None)
        context = kwargs.pop("context", None)
        if isinstance(kwargs.get("agent"), str):
            raise ValueError(
                f"the task's agent {kwargs['agent']!r} is a name: CrewBase resolves names of @agent methods"
            )
        super().__init__(description, expected_output, tools=[as_chatagent_tool(t) for t in tools]
                         if tools is not None else None, condition=condition, **kwargs)  # fmt: skip
        self.context = list(context) if isinstance(context, Sequence) and not isinstance(context, str) else None
        self.crew_tools = list(tools or [])
        self.id = uuid.uuid4()
        self.output: TaskOutput | None = None

    def copy(self, agents: dict[int, Any] | None = None, tasks: Sequence[Task] = ()) -> Task:
        """A copy of the task (`agents`: id of an agent -> its copy; `tasks`: the copies of the tasks before it)."""
        fields = {f: getattr(self, f) for f in _FIELDS if f not in ("tools", "context")}
        if agents and self.agent is not None:
            fields["agent"] = agents.get(id(self.agent), self.agent)
        made = Task(**fields, tools=self.crew_tools or None, condition=self.condition)
        if self.context is not None and tasks:
            made.context = [t for t in tasks if any(t.description == c.description for c in self.context)]
        return made

    def interpolate_inputs(self, inputs: dict[str, Any]) -> None:
        """CrewAI's call: placeholders are filled when the crew runs the task (their texts are kept)."""

    @property
    def key(self) -> str:
        return f"{self.description}|{self.expected_output}"

    def prompt(self) -> str:
        """What the agent is asked (without the work it builds on)."""
        return task_prompt(self.description, self.expected_output, [], self.markdown)

    def execute_sync(self, agent: Any = None, context: str | None = None, tools: Any = None) -> TaskOutput:
        """Run this task alone with `agent` (or its own)."""
        self.output = self._alone(agent, context, tools).kickoff().tasks_output[0]
        return self.output

    async def execute_async(self, agent: Any = None, context: str | None = None, tools: Any = None) -> TaskOutput:
        """`execute_sync` on the running event loop."""
        self.output = (await self._alone(agent, context, tools).kickoff_async()).tasks_output[0]
        return self.output

    def _alone(self, agent: Any, context: str | None, tools: Any) -> Crew:
        worker = agent or self.agent
        if worker is None:
            raise ValueError("execute_sync needs an agent: the task's own or one given")
        task: Task = self
        if context or tools is not None or worker is not self.agent:
            task = Task(description=self.description + (f"\n\nContext:\n{context}" if context else ""),
                        expected_output=self.expected_output, agent=worker,
                        tools=tools if tools is not None else self.crew_tools or None,
                        output_pydantic=self.output_pydantic, output_json=self.output_json)  # fmt: skip
        return Crew(agents=[worker], tasks=[task])

    def __repr__(self) -> str:
        return f"Task(description={self.description!r}, expected_output={self.expected_output!r})"

    __hash__ = object.__hash__


__all__ = ["Task"]

"""CrewAI's `Agent`: a role, a goal and a backstory, on chatagent's tool-calling agent.

    researcher = Agent(role="{topic} Researcher", goal="Find facts about {topic}", backstory="Careful.",
                       llm=LLM(model="openai/gpt-4o-mini"), tools=[search], allow_delegation=False, max_iter=10)
    researcher.kickoff("What is new in rivers?")        # LiteAgentOutput (raw, pydantic, agent_role, usage)

The agent is a `chatagent.agents.FnCallAgent` named after its role, whose system message says who it is;
`{placeholders}` in role, goal and backstory are filled from a crew's inputs (`interpolate_inputs`). CrewAI's
settings map onto chatagent's: `max_iter` -> `max_llm_calls`, `max_rpm` -> the model's pace, `max_execution_time`
-> the run's deadline, `max_retry_limit` -> the model's retries, `cache` -> the tools' result cache, `tools`
(CrewAI tools or chatagent's) -> `function_list`, `knowledge_sources` -> what each task of the agent is given
from them, `inject_date` -> today's date in the task, `system_template` -> the system message (with `{role}`,
`{goal}`, `{backstory}`), `step_callback` -> called with each message the agent adds.
"""

from __future__ import annotations

import asyncio
import copy as _copy
import datetime
import logging
from collections.abc import Sequence
from typing import Any

from chatagent.agents.teams.task import fill
from chatagent.crewai.agents.agent_builder.base_agent import BaseAgent
from chatagent.crewai.events import base_events as ev
from chatagent.crewai.events.bus import crewai_event_bus
from chatagent.crewai.knowledge.knowledge import Knowledge, knowledge_of
from chatagent.crewai.lite_agent_output import LiteAgentOutput
from chatagent.crewai.llm import model_config
from chatagent.crewai.memory.unified_memory import Memory, agent_memory, recalled
from chatagent.crewai.steps import StepCallbacks
from chatagent.crewai.tools.base_tool import as_chatagent_tool
from chatagent.crewai.usage import usage_metrics
from chatagent.llm.prepare import untrusted
from chatagent.plugins.structured import parse_structured
from chatagent.tools.calling import ToolCache
from chatagent.tools.registry import make_tools
from chatagent.utils.kwargs import reject_unknown

logger = logging.getLogger("chatagent.crewai")
# CrewAI settings of its own executor that chatagent's agent does not have: a warning says they change nothing
_NO_EFFECT = ("reasoning", "function_calling_llm", "prompt_template", "response_template", "allow_code_execution")
SYSTEM = "You are {role}. {backstory}\nYour personal goal is: {goal}"
# CrewAI settings that change nothing here: printing, and features of CrewAI's own executor
_ACCEPTED = ("verbose", "use_system_prompt", "allow_code_execution", "code_execution_mode", "multimodal",
             "respect_context_window", "function_calling_llm", "prompt_template", "response_template",
             "reasoning", "max_reasoning_attempts", "embedder", "knowledge_config", "security_config",
             "i18n", "crew", "agent_executor", "cache_handler", "tools_handler", "callbacks",
             "max_tokens")  # fmt: skip


class Agent(BaseAgent):
    """CrewAI's agent (see the module docstring)."""

    def __init__(
        self,
        role: str = "",
        goal: str = "",
        backstory: str = "",
        llm: Any = None,
        tools: Sequence[Any] | None = None,
        *,
        allow_delegation: bool = False,
        max_iter: int = 25,
        max_rpm: int | None = None,
        max_execution_time: float | None = None,
        max_retry_limit: int = 2,
        memory: Any = None,
        knowledge_sources: Sequence[Any] | None = None,
        inject_date: bool = False,
        date_format: str = "%Y-%m-%d",
        system_template: str | None = None,
        step_callback: Any = None,
        cache: bool = True,
        config: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        for key, value in dict(config or {}).items():  # an agent's YAML entry (CrewBase resolved llm and tools)
            if key == "role":
                role = role or value
            elif key == "goal":
                goal = goal or value
            elif key == "backstory":
                backstory = backstory or value
            elif key == "llm":
                llm = llm if llm is not None else value
            elif key == "tools":
                tools = tools if tools is not None else value
            elif key == "knowledge_sources":
                knowledge_sources = knowledge_sources if knowledge_sources is not None else value
            else:
                kwargs.setdefault(key, value)
        allow_delegation = bool(kwargs.pop("allow_delegation", allow_delegation))
        max_iter = int(kwargs.pop("max_iter", max_iter))
        max_rpm = kwargs.pop("max_rpm", max_rpm)
        max_execution_time = kwargs.pop("max_execution_time", max_execution_time)
        inject_date = bool(kwargs.pop("inject_date", inject_date))
        date_format = str(kwargs.pop("date_format", date_format))
        settings = {k: kwargs.pop(k) for k in _ACCEPTED if k in kwargs}
        reject_unknown(type(self), kwargs)
        for what, value in (("role", role), ("goal", goal), ("backstory", backstory)):
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"an Agent needs a {what} (a non-empty text)")
        cfg = model_config(llm)
        generate: dict[str, Any] = {"max_retries": max_retry_limit}
        if max_rpm:
            generate["max_rpm"] = max_rpm
        self.crew_tools = list(tools or [])
        super().__init__(function_list=[as_chatagent_tool(t) for t in self.crew_tools], llm=cfg,
                         name=role.strip(), description=goal.strip(), max_llm_calls=max(1, int(max_iter)),
                         generate_cfg=generate)  # fmt: skip
        if not cache:
            self._tool_cache = None
        self._templates = (role, goal, backstory)
        self.role, self.goal, self.backstory = role, goal, backstory
        self.llm_setting = llm
        self.allow_delegation = allow_delegation
        self.max_iter = max_iter
        self.max_rpm = max_rpm
        self.max_execution_time = max_execution_time
        self.max_retry_limit = max_retry_limit
        self.memory = agent_memory(memory)  # what the agent learns in a kickoff or a task, recalled in the next
        self.knowledge_sources = list(knowledge_sources or [])
        self.knowledge: Knowledge | None = knowledge_of(self.knowledge_sources, settings.get("embedder"),
                                                        config=settings.get("knowledge_config"))  # fmt: skip
        ignored = sorted(k for k in _NO_EFFECT if settings.get(k))
        if ignored:
            logger.warning("Agent %r: %s change nothing on chatagent.crewai (see docs/crewai.md)", role.strip()[:60],
                           ", ".join(ignored))  # fmt: skip
        self.inject_date = inject_date
        self.date_format = date_format
        self.system_template = system_template
        self.step_callback = step_callback
        self.cache = cache
        self.verbose = bool(settings.get("verbose", False))
        self.settings = settings
        self._compose()

    # ---- who the agent is ---------------------------------------------------------------------------------

    def interpolate_inputs(self, inputs: dict[str, Any]) -> None:
        """Fill `{placeholders}` of role, goal and backstory from `inputs` (from the texts first given)."""
        role, goal, backstory = (_fill(t, inputs) for t in self._templates)
        self.role, self.goal, self.backstory = role, goal, backstory
        self.name, self.description = role.strip(), goal.strip()
        self._compose()

    def _compose(self) -> None:
        template = self.system_template or SYSTEM
        text = template.replace("{role}", self.role).replace("{goal}", self.goal).replace("{backstory}",
                                                                                           self.backstory)  # fmt: skip
        if self.inject_date:
            text += f"\n\nCurrent Date: {datetime.datetime.now().strftime(self.date_format)}"
        self.system_message = text

    @property
    def tools(self) -> list[Any]:
        """The agent's tools as they were given."""
        return self.crew_tools

    @tools.setter
    def tools(self, tools: Sequence[Any]) -> None:
        self.crew_tools = list(tools)
        self.function_list = [as_chatagent_tool(t) for t in self.crew_tools]
        self.function_map = make_tools(self.function_list)

    @property
    def key(self) -> str:
        return self.role

    def copy(self) -> Agent:
        """A copy of the agent with its own tools' map and cache (what `kickoff_for_each` gives each run)."""
        made = _copy.copy(self)
        made.function_map = dict(self.function_map)
        if self._tool_cache is not None:
            made._tool_cache = ToolCache()
        return made

    # ---- running alone ----------------------------------------------------------------------------------

    def kickoff(
        self, messages: str | list[dict[str, Any]], response_format: Any = None, **kwargs: Any
    ) -> LiteAgentOutput:
        """Run the agent alone on `messages` (a text, or a conversation); its answer (`response_format`: a pydantic
        model the answer is parsed into, `.pydantic`)."""
        reject_unknown(type(self), {k: v for k, v in kwargs.items() if k not in ("input_files",)})
        convo = [{"role": "user", "content": messages}] if isinstance(messages, str) else [dict(m) for m in messages]
        if not convo:
            raise ValueError("kickoff needs a message")
        asked = _text_of(convo[-1])
        if self.knowledge is not None:
            found = self.knowledge.context_for(asked, self)
            if found:
                convo[-1]["content"] = f"{untrusted(found, 'knowledge')}\n\n{_text_of(convo[-1])}"
        if self.memory is not None:
            found = recalled(self.memory, asked, 5)
            if found:
                block = untrusted(f"Relevant memories:\n{found}", "memory")
                convo[-1]["content"] = f"{block}\n\n{_text_of(convo[-1])}"
        extra: dict[str, Any] = {}
        if response_format is not None:
            extra["response_format"] = response_format
        if self.max_execution_time:
            extra["deadline"] = float(self.max_execution_time)
        listener = crewai_event_bus.run_listener(self)
        steps = StepCallbacks(None, {self.name or "": self.step_callback}) if self.step_callback else None
        callbacks = [c for c in (listener, steps) if c is not None]
        if callbacks:
            extra["callbacks"] = callbacks
        crewai_event_bus.emit(self, ev.LiteAgentExecutionStartedEvent(agent_role=self.role, messages=convo))
        run = self.run(convo, **extra)
        response: list[dict[str, Any]] = []
        for step in run:
            response = step
        raw = _answer(response)
        parsed = run.context.output if response_format is not None else None
        if response_format is not None and parsed is None:
            parsed = parse_structured(raw, response_format)
        if self.memory is not None and raw:
            self._learn(self.memory, asked, raw)
        crewai_event_bus.emit(self, ev.LiteAgentExecutionCompletedEvent(agent_role=self.role, output=raw))
        return LiteAgentOutput(raw, parsed, self.role, usage_metrics(run.context.usage).model_dump(),
                               [dict(m) for m in response])  # fmt: skip

    def _learn(self, memory: Memory, asked: str, answer: str) -> None:
        """Keep what a kickoff was asked and answered in the agent's `memory` (what fails is logged: the answer
        stands)."""
        try:
            memory.remember(f"Input: {asked}\nAgent: {self.role}\nResult: {answer}", scope="/agent",
                            metadata={"agent": self.role}, agent_role=self.role)  # fmt: skip
        except Exception as e:  # noqa: BLE001 (a memory that fails costs the memory, not the answer)
            logger.warning("Agent %r: the kickoff could not be remembered: %s", self.role[:60], type(e).__name__)

    async def kickoff_async(self, messages: str | list[dict[str, Any]], response_format: Any = None,
                            **kwargs: Any) -> LiteAgentOutput:  # fmt: skip
        """`kickoff()` off the event loop."""
        return await asyncio.to_thread(self.kickoff, messages, response_format, **kwargs)

    def __repr__(self) -> str:
        return f"Agent(role={self.role!r}, goal={self.goal!r}, backstory={self.backstory!r})"


def _fill(text: str, inputs: dict[str, Any]) -> str:
    return fill(text, inputs)


def _text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else str(content or "")


def _answer(response: list[dict[str, Any]]) -> str:
    for m in reversed(response):
        if m.get("role") == "assistant" and not m.get("function_call"):
            return _text_of(m)
    return ""


__all__ = ["Agent"]

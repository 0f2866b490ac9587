"""CrewAI's programming model on chatagent: CrewAI code runs after renaming `crewai` to `chatagent.crewai` in its
imports (`from chatagent.crewai import Agent, Crew, Task, Process, LLM`, `from chatagent.crewai.flow.flow import
Flow, start, listen`, `from chatagent.crewai.project import CrewBase, agent, task, crew`, ...).

The face is thin: the work is done by chatagent's own Crew and Task (`chatagent.agents.teams`), Flow
(`chatagent.flows`), tool-calling agent, long-term memory and retrieval. See docs/crewai.md ("Coming from CrewAI")
for what carries over and what differs on purpose. Names are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chatagent.utils.lazy import lazy_exports

__version__ = "1.15.30"  # the CrewAI release whose programming model this face follows

_EXPORTS: dict[str, str] = {
    "Agent": "chatagent.crewai.agent",
    "BaseAgent": "chatagent.crewai.agents.agent_builder.base_agent",
    "BaseLLM": "chatagent.crewai.llm",
    "Crew": "chatagent.crewai.crew",
    "CrewOutput": "chatagent.crewai.crews.crew_output",
    "Flow": "chatagent.crewai.flow.flow",
    "Knowledge": "chatagent.crewai.knowledge.knowledge",
    "LLM": "chatagent.crewai.llm",
    "LLMGuardrail": "chatagent.crewai.tasks.llm_guardrail",
    "LiteAgentOutput": "chatagent.crewai.lite_agent_output",
    "Memory": "chatagent.crewai.memory.unified_memory",
    "Process": "chatagent.crewai.process",
    "Task": "chatagent.crewai.task",
    "TaskOutput": "chatagent.crewai.tasks.task_output",
}

__all__ = [
    "LLM",
    "Agent",
    "BaseAgent",
    "BaseLLM",
    "Crew",
    "CrewOutput",
    "Flow",
    "Knowledge",
    "LLMGuardrail",
    "LiteAgentOutput",
    "Memory",
    "Process",
    "Task",
    "TaskOutput",
]

if TYPE_CHECKING:
    from chatagent.crewai.agent import Agent
    from chatagent.crewai.agents.agent_builder.base_agent import BaseAgent
    from chatagent.crewai.crew import Crew
    from chatagent.crewai.crews.crew_output import CrewOutput
    from chatagent.crewai.flow.flow import Flow
    from chatagent.crewai.knowledge.knowledge import Knowledge
    from chatagent.crewai.lite_agent_output import LiteAgentOutput
    from chatagent.crewai.llm import LLM, BaseLLM
    from chatagent.crewai.memory.unified_memory import Memory
    from chatagent.crewai.process import Process
    from chatagent.crewai.task import Task
    from chatagent.crewai.tasks.llm_guardrail import LLMGuardrail
    from chatagent.crewai.tasks.task_output import TaskOutput

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

"""`crewai.agents.agent_builder.base_agent.BaseAgent`: what every CrewAI agent is (CrewBase classes type their
`agents: list[BaseAgent]` with it). chatagent's CrewAI `Agent` is one."""

from __future__ import annotations

from chatagent.agents.fncall import FnCallAgent


class BaseAgent(FnCallAgent):
    """The base of CrewAI's agents: a chatagent tool-calling agent with a role, a goal and a backstory."""

    role: str = ""
    goal: str = ""
    backstory: str = ""


__all__ = ["BaseAgent"]

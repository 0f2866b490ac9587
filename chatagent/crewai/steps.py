"""`step_callback` (of a crew or an agent): told of each step of the agents, a model reply or a tool's result, as an
AgentStep (chatagent's run events underneath)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chatagent.run.events import Callbacks, Event


@dataclass
class AgentStep:
    """What a step_callback is given after each step of an agent: its text (a model reply), or a tool's result."""

    agent: str | None
    text: str = ""
    tool: str | None = None
    tool_input: str | None = None
    result: Any = None


class StepCallbacks(Callbacks):
    """The crew's and each agent's step_callback, told of every model reply and tool result of the agents."""

    def __init__(self, crew_callback: Callable[[Any], Any] | None, agents: dict[str, Callable[[Any], Any]]) -> None:
        self.crew_callback, self.agents = crew_callback, agents

    def _tell(self, step: AgentStep) -> None:
        for callback in (self.agents.get(step.agent or ""), self.crew_callback):
            if callback is not None:
                callback(step)

    def on_llm_end(self, event: Event) -> None:
        if event.error is None and (event.agent in self.agents or self.crew_callback is not None):
            output = event.data.get("output") or []
            text = "".join(str(m.get("content") or "") for m in output if hasattr(m, "get"))
            self._tell(AgentStep(event.agent, text))

    def on_tool_end(self, event: Event) -> None:
        self._tell(AgentStep(event.agent, "", event.tool, event.arguments, event.result))


__all__ = ["AgentStep", "StepCallbacks"]

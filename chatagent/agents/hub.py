"""MultiAgentHub: what an agent that manages other agents has (GroupChat and Router are ones).

    class Panel(Agent, MultiAgentHub):
        def __init__(self, agents, **kwargs):
            super().__init__(**kwargs)
            self._agents = agents                 # checked when read: a non-empty list of uniquely named Agents
        def _run(self, messages, lang='en', **kwargs):
            for name in self.agent_names: ...

`agents` is the list, `agent_names` their names, `nonuser_agents` those that are not people (UserAgent or
any agent with `is_human = True`). The web UI shows each speaker of a hub by name.
"""

from __future__ import annotations

from typing import cast

from chatagent.agent import Agent


class MultiAgentHub:
    """A mixin for agents holding other agents in `self._agents` (see the module docstring)."""

    _agents: list[Agent]
    _agent_noun = "agent"  # what the error messages call them

    @property
    def agents(self) -> list[Agent]:
        return check_agents(getattr(self, "_agents", None), type(self).__name__, self._agent_noun)

    @agents.setter
    def agents(self, value: list[Agent]) -> None:
        value = list(value)
        check_agents(value, type(self).__name__, self._agent_noun)
        self._agents = value

    @property
    def agent_names(self) -> list[str]:
        return [a.name for a in self.agents if a.name is not None]  # (all of them: check_agents)

    @property
    def nonuser_agents(self) -> list[Agent]:
        """The agents that are not people."""
        return [a for a in self.agents if not getattr(a, "is_human", False)]


def check_agents(agents: object, owner: str, noun: str = "agent") -> list[Agent]:
    """`agents`, checked: ValueError/TypeError unless it is a non-empty list of Agents with unique, non-empty names."""
    if not isinstance(agents, list) or not agents:
        raise ValueError(f"{owner} needs at least one {noun}: a non-empty list of Agents")
    bad = next((a for a in agents if not isinstance(a, Agent)), None)
    if bad is not None:
        raise TypeError(f"{owner}: {noun}s must be Agents, got {type(bad).__name__}")
    names = [a.name for a in agents]
    if any(not n for n in names):
        raise ValueError(f"{owner}: every {noun} needs a name")
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise ValueError(f"{owner}: two {noun}s are called {dup!r}: names must be unique")
    return cast("list[Agent]", agents)  # every item checked above (the same list: callers may change it)


__all__ = ["MultiAgentHub", "check_agents"]

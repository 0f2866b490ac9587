"""The manager of a hierarchical crew and its delegation tools ("delegate work to a coworker", "ask a coworker a
question"): each call runs the coworker as a nested run of the manager's (see `chatagent.run.agent_tool`)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from chatagent.agent import Agent
from chatagent.agents.fncall import FnCallAgent
from chatagent.run.agent_tool import AgentTool
from chatagent.tools.arguments import JSONObject
from chatagent.tools.calling import ToolCache

MANAGER_PROMPT = (
    "You manage a team: {roster}\n"
    "You do not do the work yourself. For each task, delegate the work (or parts of it) to the coworker best suited, "
    "with everything they need to know, ask coworkers questions when something is unclear, check what they give "
    "back, and when it meets the expected output give the complete result as your final answer."
)


class _CoworkerTool(AgentTool):
    """A delegation tool: the model names the coworker; the coworker's answer is the result."""

    text_field = "task"
    about = ""

    def __init__(self, coworkers: Sequence[Agent], name: str) -> None:
        self.coworkers = {a.name or "": a for a in coworkers}
        names = list(self.coworkers)
        super().__init__(coworkers[0], name, self.about.format(names=", ".join(names)))
        self.parameters = {
            "type": "object",
            "properties": {
                self.text_field: {"type": "string", "description": f"The {self.text_field}, complete and clear."},
                "context": {"type": "string", "description": "Everything the coworker needs to know for it."},
                "coworker": {"type": "string", "enum": names, "description": "Who to ask."},
            },
            "required": [self.text_field, "coworker"],
        }

    def target(self, args: JSONObject) -> tuple[Agent, str]:
        text = str(args.get(self.text_field, ""))
        context = str(args.get("context") or "").strip()
        return self.coworkers[str(args["coworker"])], text + (f"\n\nContext:\n{context}" if context else "")


class DelegateWork(_CoworkerTool):
    about = "Delegate a piece of work to a coworker ({names}): they do it and give back the result."


class AskQuestion(_CoworkerTool):
    text_field = "question"
    about = "Ask a coworker ({names}) a question; they answer it."


def delegation_tools(coworkers: Sequence[Agent]) -> list[AgentTool]:
    """The manager's tools for these coworkers."""
    return [DelegateWork(coworkers, "delegate_work_to_coworker"), AskQuestion(coworkers, "ask_question_to_coworker")]


def make_manager(manager: Any, coworkers: Sequence[Agent]) -> Agent:
    """The manager of a hierarchical crew: a given tool-calling agent with the delegation tools added (a copy), or
    a new one on the given model (a config dict or a model)."""
    roster = "; ".join(f"{a.name}: {a.description or 'a coworker'}" for a in coworkers)
    tools = delegation_tools(coworkers)
    if isinstance(manager, Agent):
        if not isinstance(manager, FnCallAgent):
            raise TypeError("a crew's manager must be a tool-calling agent (an FnCallAgent, e.g. an Assistant)")
        made = copy.copy(manager)
        made.function_map = {**manager.function_map, **{t.name: t for t in tools}}
        made.system_message = "\n\n".join(filter(None, [manager.system_message, MANAGER_PROMPT.format(roster=roster)]))
        if made._tool_cache is None:
            made._tool_cache = ToolCache()
        return made
    return FnCallAgent(function_list=tools, llm=manager, name="manager", system_message=MANAGER_PROMPT.format(
        roster=roster))  # fmt: skip


__all__ = ["AskQuestion", "DelegateWork", "delegation_tools", "make_manager"]

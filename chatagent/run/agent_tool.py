"""An agent used as a tool of another agent (`agent.as_tool()`, or an Agent in `function_list`).

The tool takes the task as text. Run by a tool loop that streams (FnCallAgent, with `run_nested`), the
sub-agent's run is a *nested run* of the caller's: its messages stream to the caller's consumer at their place
in the response, named after the sub-agent and marked `extra['nested_in'] = <the call's id>`, and no model is
ever sent them (`visible_to_model`): the caller's model sees its call and the result, the sub-agent's answer.
The nested run shares the caller's deadline, callbacks and usage totals; the sub-agent's own plugins and tool
approval apply inside it (a call waiting for approval pauses the caller's run too, and the approval message
resumes the sub-agent where it stopped: `paused_nested`); a failure becomes the tool's error result.

Run like any other tool (a ReAct loop, `_call_tool`), the sub-agent runs to its end first (still as part of the
caller's run: usage and events) and its answer is the result.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

from chatagent.run.driver import drive
from chatagent.run.nested import Nested, nested
from chatagent.run.requests import Asking
from chatagent.schema import USER, Message
from chatagent.tools.arguments import JSONObject, parse_arguments
from chatagent.tools.tool import BaseTool

if TYPE_CHECKING:
    from chatagent.run.protocol import Runnable

TASK_SCHEMA: JSONObject = {
    "type": "object",
    "properties": {"task": {"type": "string", "description": "The whole task, with everything needed to do it."}},
    "required": ["task"],
}


def tool_name_for(name: str | None) -> str:
    """A tool name (letters, digits, '_' and '-', at most 64) made from an agent's name."""
    cleaned = "".join(c if c.isascii() and (c.isalnum() or c in "_-") else "_" for c in (name or "").strip())
    cleaned = cleaned.strip("_")[:64]
    if not cleaned:
        raise ValueError(f"cannot make a tool name from the agent name {name!r}: give as_tool(name=...)")
    return cleaned


class AgentTool(BaseTool):
    """An agent as a tool: the model gives it a task as text, the agent's answer is the result."""

    parameters = TASK_SCHEMA

    def __init__(self, agent: Runnable, name: str | None = None, description: str | None = None) -> None:
        self.agent = agent
        self.name = name or tool_name_for(agent.name)
        about = getattr(agent, "description", None)  # an Agent's; a Runnable need not have one
        self.description = description or about or f"Ask {agent.name or self.name} to do a task."
        super().__init__()

    def target(self, args: JSONObject) -> tuple[Runnable, str]:
        """The agent to run and its task, from validated arguments (a delegation tool picks among several)."""
        return self.agent, str(args.get("task", ""))

    def call(self, params: str | JSONObject, **kwargs: Any) -> str:
        """Run the agent to its end as part of the current run (not streamed): its answer."""
        agent, task = self.target(self.parse_params(params))
        box: list[Nested] = []

        def whole() -> Generator[Any, Any, None]:
            box.append((yield from nested(agent, [Message.unchecked(USER, task)], self.name, 0, kwargs.get("lang")
                                          or "en", raise_errors=True)))  # fmt: skip

        for _ in drive(whole(), False):  # (a loop inside a tool call: its waits give no events out)
            pass
        result = box[0]
        if result.paused:
            return f"Error: {agent.name} stopped to wait for a person (an approval or an answer), which cannot be given here."
        return result.content


def run_nested(tool: AgentTool, args: JSONObject, call_id: str, start: int, lang: str) -> Asking[Nested]:
    """Run `tool`'s agent on the task in `args` as a nested run shown from `start`: `r = yield from run_nested(...)`."""
    agent, task = tool.target(args)
    return (yield from nested(agent, [Message.unchecked(USER, task)], call_id, start, lang))


def call_arguments(call: Message, validate: Callable[[JSONObject], JSONObject]) -> JSONObject:
    """The validated arguments of an assistant message's function call."""
    assert call.function_call is not None
    return validate(parse_arguments(call.function_call.arguments))


__all__ = ["TASK_SCHEMA", "AgentTool", "call_arguments", "run_nested", "tool_name_for"]

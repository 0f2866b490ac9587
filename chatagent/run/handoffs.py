"""Handoffs: an agent hands the conversation over to another (`handoffs=[agent, ...]` on an FnCallAgent).

    billing = Assistant(llm=cfg, name='billing', description='Invoices and refunds.')
    triage = Assistant(llm=cfg, name='triage', handoffs=[billing])

The triage model can call `transfer_to_billing`; the rest of the turn is then answered by `billing` (its messages
carry its name). The transfer's function message is marked `extra['handoff_to'] = 'billing'`, so on the next turn
(with a Session, or with the response appended to the conversation) `triage` hands the conversation straight to
`billing`, which keeps it until it hands it on or back (give it `handoffs=[triage]`).

`handoff(agent, tool_name=..., tool_description=..., input_filter=...)` sets one up in detail; `input_filter`
decides what the receiver sees of the conversation (a function of the messages, e.g. `remove_all_tools`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from chatagent.run.agent_tool import tool_name_for
from chatagent.run.context import current_run
from chatagent.run.protocol import Runnable
from chatagent.schema import ASSISTANT, FUNCTION, Message
from chatagent.tools.tool import BaseTool

HANDOFF_TO = "handoff_to"  # extra key of a transfer's function message: the receiver's name
MAX_HANDOFFS = 10  # transfers in one turn, after which the model is told to answer itself
InputFilter = Callable[[list[Message]], list[Message]]


class Receiver(Runnable, Protocol):
    """An agent the conversation can be handed to: a Runnable with a description (what the model is told of it)."""

    @property
    def description(self) -> str | None:
        """What it does, in the transfer tool's description."""
        ...


class Handoff:
    """A receiver of the conversation and how it is reached: the tool the model calls, what it is told, and what
    the receiver sees (`input_filter`)."""

    def __init__(
        self,
        agent: Receiver,
        tool_name: str | None = None,
        tool_description: str | None = None,
        input_filter: InputFilter | None = None,
    ) -> None:
        if not agent.name:
            raise ValueError("an agent handed the conversation to needs a name")
        if input_filter is not None and not callable(input_filter):
            raise TypeError(f"input_filter must be a function of the messages, got {type(input_filter).__name__}")
        self.agent = agent
        self.input_filter = input_filter
        name = tool_name or "transfer_to_" + tool_name_for(agent.name)
        about = f": {agent.description}" if agent.description else ""
        description = tool_description or f"Hand the conversation over to {agent.name}{about}. It answers from here."
        self.tool = HandoffTool(self, name, description)


def handoff(
    agent: Receiver,
    tool_name: str | None = None,
    tool_description: str | None = None,
    input_filter: InputFilter | None = None,
) -> Handoff:
    """A handoff to `agent` (see the module docstring); an Agent in `handoffs=[...]` is `handoff(agent)`."""
    return Handoff(agent, tool_name, tool_description, input_filter)


class HandoffTool(BaseTool):
    """The tool the model calls to hand over; an FnCallAgent carries the transfer out (it never runs as a tool)."""

    parameters = {"type": "object", "properties": {}}

    def __init__(self, target: Handoff, name: str, description: str) -> None:
        self.name, self.description, self.handoff = name, description, target
        super().__init__()

    def call(self, params: Any, **kwargs: Any) -> str:
        return f"Error: {self.name} hands the conversation over only inside an FnCallAgent's tool loop."


def as_handoffs(items: Iterable[Any] | None) -> list[Handoff]:
    """`handoffs=[...]` as Handoffs: an Agent becomes `handoff(agent)`."""
    out: list[Handoff] = []
    for item in items or ():
        if isinstance(item, Handoff):
            out.append(item)
        elif hasattr(item, "as_tool") and hasattr(item, "run"):
            out.append(Handoff(item))
        else:
            raise TypeError(f"handoffs takes agents or handoff(...) objects, got {type(item).__name__}")
    return out


def transferred(name: str, call_id: str | None, receiver: str, start: int) -> Message:
    """The function message that answers a transfer call."""
    extra: dict[str, Any] = {HANDOFF_TO: receiver}
    if call_id is not None:
        extra["function_id"] = call_id
    return Message.unchecked(FUNCTION, f"Transferred to {receiver}; {receiver} answers from here.", name, None, None,
                             extra)  # fmt: skip


def too_many_handoffs() -> bool:
    """Whether this turn already went through MAX_HANDOFFS transfers (counted along the nested runs)."""
    depth, ctx = 0, current_run().parent
    while ctx is not None:
        depth += 1
        ctx = ctx.parent
    return depth >= MAX_HANDOFFS


def holder(agent: Receiver, messages: list[Message]) -> Receiver:
    """The agent the conversation is with: the receiver of the last transfer in it, if reachable from `agent`
    through handoffs; else `agent`."""
    name = None
    for m in reversed(messages):
        if m.role == FUNCTION and m.extra and HANDOFF_TO in m.extra:
            name = m.extra[HANDOFF_TO]
            break
    if name is None or name == agent.name:
        return agent
    seen, queue = {id(agent)}, [agent]
    while queue:
        current = queue.pop(0)
        onward: Iterable[Handoff] = getattr(current, "handoffs", ())  # an FnCallAgent's; a Receiver need not have any
        for h in onward:
            if h.agent.name == name:
                return h.agent
            if id(h.agent) not in seen:
                seen.add(id(h.agent))
                queue.append(h.agent)
    return agent


def remove_all_tools(messages: list[Message]) -> list[Message]:
    """An input filter: the conversation without tool calls and their results (the receiver sees the talk only)."""
    return [m for m in messages if m.role != FUNCTION and not (m.role == ASSISTANT and m.function_call is not None)]


__all__ = ["HANDOFF_TO", "Handoff", "HandoffTool", "Receiver", "as_handoffs", "handoff", "holder", "remove_all_tools"]

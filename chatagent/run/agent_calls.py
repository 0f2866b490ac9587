"""The calls of a tool loop that are agents' work, not tools': an agent run as a tool (a nested run, see
`chatagent.run.agent_tool`) and a transfer to another agent (`handoffs`). FnCallAgent runs
them after the reply's other calls: a nested run that pauses for approval, or a transfer, ends the caller's run."""

from __future__ import annotations

import time
from typing import Any

from chatagent.run.agent_tool import AgentTool, call_arguments, run_nested
from chatagent.run.approval import call_id
from chatagent.run.context import current_run
from chatagent.run.events import HANDOFF, tell
from chatagent.run.handoffs import Handoff, HandoffTool, too_many_handoffs, transferred
from chatagent.run.interrupts import ANSWERS, PENDING_QUESTIONS, checked_answers, is_answer
from chatagent.run.nested import NESTED, nested, own_messages, paused_nested
from chatagent.run.requests import Asking
from chatagent.run.subagent import run_subagent
from chatagent.schema import ASSISTANT, FUNCTION, USER, Message
from chatagent.schema.fragment import fragment
from chatagent.tools.calling import PreparedCall, ToolErrorKind, ToolOutcome

ONE_TRANSFER = "Error: only one transfer per reply: this one was not made, {name} was handed the conversation."
TOO_MANY = "Error: the conversation was handed over too many times in this turn; answer the user yourself."


class CallSteps:
    """A reply's prepared calls in the order they run: tools (and outcomes decided already), agents, a transfer."""

    __slots__ = ("tools", "agents", "transfer")

    def __init__(self) -> None:
        self.tools: list[PreparedCall | ToolOutcome] = []
        self.agents: list[PreparedCall] = []
        self.transfer: list[PreparedCall] = []


def split_calls(prepared: list[PreparedCall | ToolOutcome]) -> CallSteps:
    """Sort a reply's calls (see CallSteps); a second transfer, or one past the limit, is answered with an error."""
    steps = CallSteps()
    for p in prepared:
        if isinstance(p, PreparedCall) and isinstance(p.tool, AgentTool):
            steps.agents.append(p)
        elif isinstance(p, PreparedCall) and isinstance(p.tool, HandoffTool):
            _add_transfer(steps, p)
        else:
            steps.tools.append(p)
    return steps


def _add_transfer(steps: CallSteps, p: PreparedCall) -> None:
    """A handoff's call: the reply's transfer, unless it has one (or the run is past the limit): then an error."""
    if steps.transfer:
        steps.tools.append(p.outcome.fail(ToolErrorKind.HANDOFF, ONE_TRANSFER.format(name=steps.transfer[0].tool.name)))
    elif too_many_handoffs():
        steps.tools.append(p.outcome.fail(ToolErrorKind.HANDOFF, TOO_MANY))
    else:
        steps.transfer.append(p)


def run_agent_call(call: PreparedCall, response: list[Message], lang: str) -> Asking[ToolOutcome]:
    """Run an agent's call as a nested run shown at the end of `response` (its messages are added to it)."""
    outcome = call.outcome
    assert isinstance(call.tool, AgentTool)
    start = time.perf_counter()
    mark = outcome.call_id if outcome.call_id is not None else f"call_{len(response)}"
    result = yield from run_nested(call.tool, call.args, mark, len(response), lang)
    return _settled(outcome, result, response, start)


def resume_agent_call(
    tools: dict[str, Any], messages: list[Message], response: list[Message], lang: str
) -> Asking[ToolOutcome]:
    """Resume the nested run that `messages` (ending with the decision: an approval or answer message) paused, and
    show its call's result (unless it pauses again: then the outcome's error is 'paused'). ValueError for answers
    that do not fit the nested run's questions."""
    found = paused_nested(messages)
    assert found is not None
    at, first = found
    call = messages[at]
    assert call.function_call is not None
    tool = tools.get(call.function_call.name)
    if not isinstance(tool, AgentTool):
        raise ValueError(f"the paused call of {call.function_call.name!r} is not an agent of this one's")
    agent, task = tool.target(call_arguments(call, tool.validate))
    paused, decision = messages[-2].extra or {}, messages[-1]
    if PENDING_QUESTIONS in paused and is_answer(decision):  # a wrong answer is the caller's error, not the tool's
        checked_answers(paused[PENDING_QUESTIONS], (decision.extra or {})[ANSWERS])
    own = [Message.unchecked(USER, task)] + own_messages(messages[first:-1]) + [decision]
    mark = (messages[first].extra or {})[NESTED]
    outcome = ToolOutcome(tool.name, call.function_call.arguments, (call.extra or {}).get("function_id"))
    start = time.perf_counter()
    result = yield from nested(agent, own, mark, 0, lang)
    outcome = _settled(outcome, result, response, start)
    if outcome.error != ToolErrorKind.PAUSED:
        extra = {"function_id": outcome.call_id} if outcome.call_id is not None else None
        msg = Message.unchecked(FUNCTION, outcome.content, outcome.name, None, None, extra)
        yield [fragment(msg, len(response))]
        response.append(msg)
    return outcome


def _settled(outcome: ToolOutcome, result: Any, response: list[Message], start: float) -> ToolOutcome:
    response.extend(result.messages)
    outcome.duration = time.perf_counter() - start
    if result.paused:
        return outcome.fail(ToolErrorKind.PAUSED, "")
    outcome.content = result.content
    outcome.error = result.error
    return outcome


def unanswered_calls(conversation: list[Message]) -> list[Message]:
    """The calls of the conversation's last reply (its own, not a nested run's) that have no result yet."""
    answered = {(m.extra or {}).get("function_id") for m in conversation if m.role == FUNCTION}
    k = len(conversation) - 1
    while k >= 0 and not _own_call(conversation[k]):
        k -= 1
    end = k
    while k >= 0 and _own_call(conversation[k]):
        k -= 1
    calls = conversation[k + 1 : end + 1]
    return [m for n, m in enumerate(calls) if call_id(m, n) not in answered and (m.extra or {}).get("function_id")]


def _own_call(m: Message) -> bool:
    return m.role == ASSISTANT and m.function_call is not None and not (m.extra and NESTED in m.extra)


def transfer(
    target: Handoff, outcome: ToolOutcome, conversation: list[Message], response: list[Message], lang: str
) -> Asking[None]:
    """Answer the transfer call, then let the receiver answer the rest of the turn (its messages named after it);
    the call's outcome is then `handed_over`."""
    receiver = target.agent
    assert receiver.name is not None  # Handoff checks it
    msg = transferred(outcome.name, outcome.call_id, receiver.name, len(response))
    outcome.content = msg.content
    yield [fragment(msg, len(response))]
    response.append(msg)
    seen = conversation + [msg]
    if target.input_filter is not None:
        seen = list(target.input_filter(list(seen)))
    run = current_run()
    if run.callbacks:
        tell(run.callbacks, HANDOFF, run.agent_name, run, {"to": receiver.name, "tool": outcome.name})
    reply = yield from run_subagent(receiver, seen, lang, len(response))
    response.extend(reply)
    outcome.error = ToolErrorKind.HANDED_OVER


__all__ = ["CallSteps", "resume_agent_call", "run_agent_call", "split_calls", "transfer", "unanswered_calls"]

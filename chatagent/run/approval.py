"""Tool approval: a person says yes or no before a tool runs.

    @tool(requires_approval=True)                       # or a predicate on the arguments:
    def transfer(amount: float, to: str) -> str: ...     # requires_approval=lambda args: args['amount'] > 100

When the model calls such a tool, the run pauses before it executes: nothing of that reply runs, and the last
message of the response (the call) carries the calls waiting for a decision:

    {'role': 'assistant', 'function_call': {...}, 'extra': {'function_id': 'call_1',
     'pending_approval': [{'id': 'call_1', 'name': 'transfer', 'arguments': '{"amount": 500, "to": "Bob"}'}]}}

`pending_approval(response)` returns that list (or None). To resume, run again with the conversation so far plus an
approval message (`approval_message(...)` builds it):

    {'role': 'user', 'content': '', 'extra': {'approval': True}}                 # approve every pending call
    {'role': 'user', 'content': 'Not to Bob.', 'extra': {'approval': False}}     # deny; the text is the reason
    {'role': 'user', 'content': '', 'extra': {'approval': {'call_1': True, 'call_2': False}}}

The approved calls run (and the calls of the same reply that need no approval), a denied one reaches the model as
its result ("the user denied this call", with the reason), and the run goes on. A call left without a decision
(the person wrote something else instead) is answered "not approved" so that the conversation stays valid.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, cast

from chatagent.run.trust import TOOLS_OWN_RULES, ApprovalPolicy
from chatagent.schema import ASSISTANT, FUNCTION, USER, FunctionCall, Message, content_text

if TYPE_CHECKING:
    from chatagent.run.protocol import Runnable

logger = logging.getLogger("chatagent.approval")

PENDING_APPROVAL = "pending_approval"
APPROVAL = "approval"
DENIED = "Error: the user denied this call of {name}; it was not run.{reason} Do not call it again with the same " \
    "arguments: go on without it, or ask the user."  # fmt: skip
NOT_APPROVED = "Error: {name} was not run: the user did not approve the call."


def may_pause(agent: Runnable, policy: ApprovalPolicy) -> bool:
    """Whether a call of one of `agent`'s tools may wait for a person under `policy` (so its run is controlled)."""
    if agent.tools_need_approval():
        return True
    return policy.code and any(policy.rule(t) is not False for t in agent.function_map.values())


def needs_approval(tool: Any, args: dict[str, Any], policy: ApprovalPolicy = TOOLS_OWN_RULES) -> bool:
    """Whether a call of `tool` with `args` waits for a person under the run's `policy` (`requires_approval`: a bool
    or a predicate on the arguments; a predicate that raises counts as yes, logged)."""
    rule = policy.rule(tool)
    if not callable(rule):
        return bool(rule)
    try:
        return bool(rule(dict(args)))
    except Exception:
        logger.warning("requires_approval of %s raised: asking for approval", getattr(tool, "name", "?"), exc_info=True)
        return True


def call_id(msg: Message, position: int) -> str:
    """The id a pending call is known by: its `function_id`, or its position among the paused calls."""
    fid = (msg.extra or {}).get("function_id")
    return fid if fid is not None else f"call_{position}"


def pending_approval(response: list[Message] | list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The calls `response` (a run's output) waits to have approved: [{'id', 'name', 'arguments'}], or None."""
    if not response:
        return None
    extra: dict[str, Any] = response[-1].get("extra") or {}
    return extra.get(PENDING_APPROVAL) or None


def approval_message(approve: bool | dict[str, bool] = True, reason: str = "") -> dict[str, Any]:
    """The message that resumes a paused run: `approve` True or False for every pending call, or per call id;
    `reason` (for a denial) is passed on to the model."""
    if not isinstance(cast(object, approve), (bool, dict)):  # what callers pass is checked, whatever its type
        raise TypeError(f"approve must be a bool or a dict of call id -> bool, got {type(approve).__name__}")
    return {"role": USER, "content": reason, "extra": {APPROVAL: approve}}


def is_approval(msg: Message) -> bool:
    return msg.role == USER and msg.extra is not None and APPROVAL in msg.extra


class Resume:
    """What a run resumes: the paused calls (the conversation's last messages) and the person's decisions."""

    __slots__ = ("calls", "decisions", "reason")

    def __init__(self, calls: list[Message], decisions: dict[str, bool], reason: str) -> None:
        self.calls, self.decisions, self.reason = calls, decisions, reason

    def denial(self, name: str) -> str:
        return DENIED.format(name=name, reason=f" The user said: {self.reason}" if self.reason else "")


def resolve(messages: list[Message]) -> tuple[list[Message], Resume | None]:
    """The conversation without approval messages, calls left pending answered "not approved", and what to resume
    (when it ends with paused calls and an approval message). Raises ValueError when an approval message answers
    nothing, or when the conversation ends with paused calls and no decision."""
    if not any(m.extra and (APPROVAL in m.extra or PENDING_APPROVAL in m.extra) for m in messages):
        return messages, None
    decision = messages[-1] if is_approval(messages[-1]) else None
    msgs = [m for m in messages if not is_approval(m)]
    tail = _paused_tail(msgs)
    if decision is None and tail:
        raise ValueError(
            "the conversation ends with tool calls waiting for approval: append an approval message "
            "(chatagent.approval_message(True or False)) to resume, or a new message to go on without them"
        )
    if decision is not None and not tail:
        raise ValueError("the approval message answers no tool call waiting for approval (it must follow the call)")
    msgs = _answer_left_pending(msgs, len(msgs) - len(tail))
    if decision is None:
        return msgs, None
    assert decision.extra is not None  # is_approval(decision): its extra holds APPROVAL
    value: object = decision.extra[APPROVAL]
    ids = [call_id(m, k) for k, m in enumerate(tail)]
    if len(set(ids)) < len(ids):  # one decision would stand for two calls
        raise ValueError("two tool calls waiting for approval have the same id: each needs a decision of its own")
    if isinstance(value, bool):
        decisions = dict.fromkeys(ids, value)
    elif isinstance(value, dict):
        given = cast("dict[object, object]", value)
        unknown = [str(k) for k in given if k not in ids]
        if unknown:
            raise ValueError(f"the approval message names calls that are not pending: {', '.join(unknown)}")
        decisions = {i: bool(given.get(i, False)) for i in ids}
    else:
        raise ValueError(f"extra['approval'] must be true, false or a dict of call id -> bool, got {value!r:.80}")
    return msgs, Resume(tail, decisions, content_text(decision.content).strip())


def paused_agent(messages: list[Message]) -> str | None:
    """The name on the paused call that the conversation's last message (an approval message) decides: the agent
    to resume, for agents that hand the conversation to others (a group chat, a router); None if it is not that."""
    if not messages or not is_approval(messages[-1]):
        return None
    tail = _paused_tail(messages[:-1])
    return tail[-1].name if tail else None


def _paused_tail(msgs: list[Message]) -> list[Message]:
    """The calls at the end of `msgs` if the last of them is marked pending (else [])."""
    if not msgs or not (msgs[-1].extra and PENDING_APPROVAL in msgs[-1].extra):
        return []
    k = len(msgs)
    while k > 0 and msgs[k - 1].role == ASSISTANT and msgs[k - 1].function_call is not None:
        k -= 1
    return msgs[k:]


def paused_call(call: Message) -> FunctionCall:
    """The function call of a paused call (`Resume.calls`, `_paused_tail`: each of them is an assistant call)."""
    assert call.function_call is not None
    return call.function_call


def _answer_left_pending(msgs: list[Message], end: int) -> list[Message]:
    """`msgs` with a "not approved" result after each unanswered call of a paused reply before `end`."""
    answered = {(m.extra or {}).get("function_id") for m in msgs if m.role == FUNCTION}
    out: list[Message] = []
    for i, m in enumerate(msgs):
        out.append(m)
        if i >= end or not (m.extra and PENDING_APPROVAL in m.extra):
            continue
        calls = _paused_tail(out)  # the reply's calls end here: answer those that are unanswered
        for n, call in enumerate(calls):
            fid = call_id(call, n)
            if fid not in answered:
                name = paused_call(call).name
                out.append(Message.unchecked(FUNCTION, NOT_APPROVED.format(name=name), name, None, None,
                                             {"function_id": fid}))  # fmt: skip
    return out


__all__ = [
    "APPROVAL",
    "PENDING_APPROVAL",
    "TOOLS_OWN_RULES",
    "ApprovalPolicy",
    "Resume",
    "approval_message",
    "is_approval",
    "may_pause",
    "needs_approval",
    "paused_agent",
    "pending_approval",
    "resolve",
]

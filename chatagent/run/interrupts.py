"""Interrupts: a tool asks a person something, the run pauses, and the answer resumes it, in any process.

    @tool
    def book(city: str) -> str:
        '''Book a trip.'''
        date = ask_user(f"Which date for {city}?", {"type": "string", "format": "date"})
        return f"booked {city} on {date}"

`ask_user(question, schema=None)` in a tool's code, when the person has not answered yet, stops the call: the run
goes on with the reply's other calls (so parallel calls that completed are kept), then pauses before anything else
(the tool loop raises `Asked`, and `interruptible`, around the agent's loop, turns it into the last fragment).
The response's last message is a marker holding the questions:

    {'role': 'assistant', 'content': '', 'extra': {'pending_questions': [
        {'id': 'call_1#0', 'question': 'Which date for Lisbon?', 'schema': {...}, 'call_id': 'call_1'}]}}

`pending_questions(response)` returns them, together with the calls waiting for approval (`kind` 'approval', schema
boolean): approval is one kind of interrupt, and `approval_message` still decides it. To resume, run again with the
conversation so far (or on the session: a paused turn is stored) plus `answer_message({question id: answer})`. The
asking calls run again from their start with `ask_user` returning the answers (a call that asks twice is paused
twice; its first answer is kept), completed work is not redone, and the run goes on. Questions may be answered all
at once or one by one: while one of a call's questions has no answer, that call waits and the run pauses again.
A call runs again from its start: what it did before asking must be safe to repeat (the call's
`current_run().idempotency_key` is the same in both runs: give it to the system that acts).

A conversation that goes on without answering (a new user message) answers the waiting calls "not answered".

Asked deeper in the run, a question pauses it all the same: in a nested run (an agent used as a tool) the nested
run's marker (`extra[NESTED]`) ends the caller's response and the answer resumes the nested run
(`chatagent.run.nested.paused_nested`); a handoff's receiver, a group chat member or a crew's task resumes its own
pause (`resolve` leaves a pause whose calls are not the agent's tools to the agent they are); a plugin's hook asks
as the call it is about or as the hook (`chatagent.run.plugin.Plugins.call`; before_run's answers are kept in
later markers: `TURN_HOOK`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from chatagent.run.approval import APPROVAL, PENDING_APPROVAL, call_id, is_approval, pending_approval
from chatagent.run.context import current_run
from chatagent.run.events import INTERRUPT, tell
from chatagent.run.plugin import asking_as
from chatagent.run.requests import AgentLoop
from chatagent.schema import ASSISTANT, FUNCTION, USER, Message
from chatagent.schema.fragment import Fragment
from chatagent.tools.validation import ToolArgumentError, validate_arguments
from chatagent.utils.current_call import CALL_ID, PendingQuestion

if TYPE_CHECKING:
    from chatagent.run.context import RunContext

PENDING_QUESTIONS = "pending_questions"
ANSWERS = "answers"
NESTED = "nested_in"  # extra key of a nested run's messages: the id of the call that ran it (chatagent.run.nested)
TURN_HOOK = "before_run:"  # what before_run's questions are asked under (chatagent.run.plugin): kept for the turn
ANSWERED = "answered"  # on a marker: the answers the paused calls already had (they run again from the start)
NOT_ANSWERED = "Error: {name} was not run to its end: the user did not answer its question ({question})."


def ask_user(question: str, schema: dict[str, Any] | None = None) -> Any:
    """Ask the person running this conversation `question` from a tool's code; the answer (checked against the JSON
    Schema `schema` when given; else a string). Without an answer yet the run pauses here (see the module)."""
    if type(question) is not str or not question.strip():  # what callers pass is checked, whatever its type
        raise TypeError("ask_user(question): the question is a non-empty string")
    if schema is not None and type(schema) is not dict:
        raise TypeError(f"ask_user(schema=...) is a JSON Schema (a dict), got {type(schema).__name__}")
    cid, ctx = CALL_ID.get(), current_run()
    hook = ctx.asking
    if hook is not None and cid is None:  # a plugin's hook asks (a tool call it started asks as itself)
        cid = asking_as(*hook)
    if cid is None:
        raise RuntimeError("ask_user is called from a tool's code while a run calls it (with the call's id)")
    n = ctx.asked.get(cid, 0)
    ctx.asked[cid] = n + 1
    qid = f"{cid}#{n}"
    if qid in ctx.answers:
        return ctx.answers[qid]
    raise PendingQuestion({"id": qid, "question": question, "schema": schema, "call_id": cid})


def pending_questions(response: list[Message] | list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """What `response` (a run's output) waits for a person to answer: its questions ({'id', 'question', 'schema',
    'call_id'}) and its calls waiting for approval ({'id', 'kind': 'approval', 'question', 'schema', 'name',
    'arguments'}); None if nothing."""
    if not response:
        return None
    extra: dict[str, Any] = response[-1].get("extra") or {}
    found = [dict(q) for q in extra.get(PENDING_QUESTIONS) or ()]
    for a in pending_approval(response) or ():
        found.append({"id": a["id"], "kind": "approval", "question": f"Run {a['name']} with {a['arguments']}?",
                      "schema": {"type": "boolean"}, "name": a["name"], "arguments": a["arguments"]})  # fmt: skip
    return found or None


def answer_message(answers: Mapping[str, Any]) -> dict[str, Any]:
    """The message that resumes a paused run: {question id: answer} for some or all of its pending questions (a
    call waiting for approval is answered True or False by its id)."""
    if not hasattr(answers, "items") or not answers:
        raise TypeError("answer_message takes a non-empty dict of question id -> answer")
    keys: list[object] = list(answers)
    if not all(isinstance(k, str) for k in keys):
        raise TypeError("answer_message: the question ids are strings (from pending_questions)")
    return {"role": USER, "content": "", "extra": {ANSWERS: dict(answers)}}


def is_answer(msg: Message) -> bool:
    return msg.role == USER and msg.extra is not None and ANSWERS in msg.extra


def is_decision(msg: Message) -> bool:
    """Whether `msg` answers a paused run (an approval or an answer message)."""
    return is_approval(msg) or is_answer(msg)


class Answered:
    """What a run resumes: the paused calls to run again (their questions all answered), the answers, and the
    questions still waiting (their calls wait: the run pauses again once the others ran)."""

    __slots__ = ("calls", "answers", "waiting")

    def __init__(self, calls: list[Message], answers: dict[str, Any], waiting: list[dict[str, Any]]) -> None:
        self.calls, self.answers, self.waiting = calls, answers, waiting


Resolved = tuple[list[Message], Answered | None]  # the conversation as the model sees it, and what to resume
_MARKS = frozenset((PENDING_QUESTIONS, ANSWERS))  # what a conversation with a pause or an answer holds in an extra


def resolve(messages: list[Message], ctx: RunContext, tools: Mapping[str, object]) -> Resolved:
    """The conversation as the model sees it, and what to resume (`_resumed`); `tools`: the agent's."""
    if (tools or ctx.plugins) and any(m.extra and not _MARKS.isdisjoint(m.extra) for m in messages):
        return _resumed(messages, ctx, tools)  # (a tool, or a plugin's hook, asked)
    return messages, None


def _resumed(messages: list[Message], ctx: RunContext, tools: Mapping[str, object]) -> Resolved:
    """`_resolve`, its answers given to `ctx`. A pause whose calls are not of `tools` is another agent's (the
    receiver of a handoff, which the agent hands the conversation to): `messages` are returned as they are, for that
    agent to resume."""
    resolved, answered = _resolve(messages)
    if answered is not None and any(c.function_call and c.function_call.name not in tools for c in answered.calls):
        return messages, None
    if answered is not None:
        ctx.answers.update(answered.answers)
    return resolved, answered


def _resolve(messages: list[Message]) -> tuple[list[Message], Answered | None]:
    """The conversation without question markers and answer messages (calls whose question went unanswered get a
    "not answered" result), and what to resume when it ends with a marker and an answer message. An answer message
    that decides calls waiting for approval becomes an approval message. Raises ValueError on an answer that answers
    nothing pending or does not fit its question's schema, and on a conversation that ends with questions and no
    answer."""
    last = messages[-1]
    live = len(messages) - (2 if is_answer(last) else 1)
    marker = messages[live] if live >= 0 and _is_marker(messages[live]) else None
    if marker is None and is_answer(last) and any(m.extra and PENDING_APPROVAL in m.extra for m in messages[-2:-1]):
        return messages[:-1] + [_as_approval(last)], None
    nested = marker is None and is_answer(last) and live >= 0 and _is_nested_marker(messages[live])
    if marker is None and is_answer(last) and not nested:
        raise ValueError("the answer message answers no pending question (it must follow the paused response)")
    if marker is not None and not is_answer(last):
        raise ValueError(
            "the conversation ends with questions waiting for an answer: append "
            "chatagent.answer_message({question id: answer}) to resume, or a new message to go on without them"
        )
    out: list[Message] = []
    for i, m in enumerate(messages):
        if is_answer(m) or (i == live and marker is not None):
            continue
        if _is_marker(m) or _is_nested_marker(m):  # a past pause: answered, or gone on from without answers
            if not (i + 1 < len(messages) and is_answer(messages[i + 1])):
                out += _not_answered(out, m)
            if _is_marker(m):
                continue
        out.append(m)
    if marker is None:  # a nested run paused for questions resumes with the answer (chatagent.run.agent_calls)
        return (out + [last] if nested else out), None
    return out, _answered(out, marker, last)


def _answered(conversation: list[Message], marker: Message, answer: Message) -> Answered:
    extra = marker.extra or {}
    questions: list[dict[str, Any]] = list(extra[PENDING_QUESTIONS])
    given: dict[str, Any] = _answers(answer)
    answers: dict[str, Any] = dict(extra.get(ANSWERED) or {})
    answers.update(checked_answers(questions, given))
    waiting = [q for q in questions if q["id"] not in answers]
    held = {q["call_id"] for q in waiting}
    calls = [c for c in _unanswered(conversation) if (c.extra or {}).get("function_id") not in held]
    return Answered(calls, answers, waiting)


def checked_answers(questions: list[dict[str, Any]], given: Mapping[str, Any]) -> dict[str, Any]:
    """`given` ({question id: answer}) checked against the pending `questions` (each answer against its schema, with
    the safe coercions of tool arguments); ValueError naming what does not fit."""
    by_id = {q["id"]: q for q in questions}
    unknown = [str(k) for k in given if k not in by_id]
    if unknown:
        raise ValueError(f"the answer message names questions that are not pending: {', '.join(unknown)[:200]}")
    return {qid: _checked(by_id[qid], value) for qid, value in given.items()}


def check_decision(waiting: Mapping[str, Any], new: list[Message]) -> None:
    """ValueError when `new` (the messages that resume a paused turn) ends with answers that do not fit the turn's
    questions (`waiting`: what the stored pause says it waits for, {'kind', 'waiting'})."""
    if waiting.get("kind") == "question" and new and is_answer(new[-1]):
        checked_answers(list(waiting.get("waiting") or ()), _answers(new[-1]))


def _checked(question: dict[str, Any], value: Any) -> Any:
    schema = question.get("schema")
    if schema is None:
        if not isinstance(value, str):
            raise ValueError(f"the answer to {question['id']} is text (its question has no schema), got {value!r:.80}")
        return value
    try:
        wrapped = {"type": "object", "properties": {"answer": schema}, "required": ["answer"]}
        return validate_arguments({"answer": value}, wrapped)["answer"]
    except ToolArgumentError as e:
        raise ValueError(f"the answer to {question['id']} does not fit its question's schema: {e}") from None


def _as_approval(answer: Message) -> Message:
    given = _answers(answer)
    if not all(isinstance(v, bool) for v in given.values()):
        raise ValueError("calls waiting for approval are answered true or false, by their id")
    return Message.unchecked(USER, answer.content, None, None, None, {APPROVAL: given})


def _answers(answer: Message) -> dict[str, Any]:
    """An answer message's {question id: answer} (a copy); ValueError if it is not that."""
    given: Any = (answer.extra or {})[ANSWERS]
    if not isinstance(given, dict):
        raise ValueError(f"extra['answers'] is a dict of question id -> answer, got {given!r:.80}")
    out: dict[str, Any] = {}
    for k, v in given.items():  # pyright: ignore[reportUnknownVariableType]
        out[str(k)] = v  # pyright: ignore[reportUnknownArgumentType]
    return out


def _is_marker(m: Message) -> bool:
    """Whether `m` pauses this run for questions (a nested run's pause is its own: `_is_nested_marker`)."""
    return (
        m.role == ASSISTANT and m.function_call is None and m.extra is not None and PENDING_QUESTIONS in m.extra
        and NESTED not in m.extra
    )  # fmt: skip


def _is_nested_marker(m: Message) -> bool:
    """Whether `m` is the pause of a run nested in this one (an agent used as a tool) for its questions."""
    return m.role == ASSISTANT and m.extra is not None and PENDING_QUESTIONS in m.extra and NESTED in m.extra


def _unanswered(conversation: list[Message]) -> list[Message]:
    """The calls of the conversation's last reply that have no result (among the results after them: ids that
    models make may repeat across replies)."""
    k = len(conversation)
    while k and conversation[k - 1].role == FUNCTION:
        k -= 1
    end = k
    while k and conversation[k - 1].role == ASSISTANT and conversation[k - 1].function_call is not None:
        k -= 1
    calls = conversation[k:end]
    answered = {(m.extra or {}).get("function_id") for m in conversation[end:]}
    return [m for n, m in enumerate(calls) if call_id(m, n) not in answered]


def _unanswered_own(conversation: list[Message], cid: str) -> list[Message]:
    """This run's own call `cid` (not a nested run's), if it has no result in `conversation`."""
    own = [m for m in conversation if not (m.extra and NESTED in m.extra)]
    if any(m.role == FUNCTION and (m.extra or {}).get("function_id") == cid for m in own):
        return []
    return [m for m in own if m.function_call is not None and (m.extra or {}).get("function_id") == cid][-1:]


def _not_answered(before: list[Message], marker: Message) -> list[Message]:
    """Results for the calls a past marker left waiting (for a nested run's: the call that ran it), so that the
    conversation stays valid."""
    extra = marker.extra or {}
    questions: list[dict[str, Any]] = extra[PENDING_QUESTIONS]
    if NESTED in extra:
        asked, calls = {extra[NESTED]: questions[0]["question"]}, _unanswered_own(before, extra[NESTED])
    else:
        asked, calls = {q["call_id"]: q["question"] for q in questions}, _unanswered(before)
    out: list[Message] = []
    for call in calls:
        cid = (call.extra or {}).get("function_id")
        if cid in asked and call.function_call is not None:
            text = NOT_ANSWERED.format(name=call.function_call.name, question=asked[cid])
            out.append(Message.unchecked(FUNCTION, text, call.function_call.name, None, None, {"function_id": cid}))
    return out


class Asked(BaseException):  # noqa: N818 (the run stops for a person: not an error)
    """The run pauses for `questions`: raised by a tool loop once a reply's calls ran (one of them asked), or by
    `run_tool` (one call); a BaseException, so that a loop's own `except Exception` lets it through. `at`: where
    the pause goes in the loop's response (after what it showed), set by the loop that knows it."""

    def __init__(self, questions: list[dict[str, Any]], at: int | None = None) -> None:
        super().__init__("waiting for an answer")
        self.questions = questions
        self.at = at

    def placed(self) -> int:
        if self.at is None:
            raise RuntimeError(
                "a tool asked a question (ask_user) in a loop that does not say where its response ends: an agent "
                "whose own _run calls _run_tool catches Asked and sets its `at` (as ReActChat does)"
            )
        return self.at


def marker(questions: list[dict[str, Any]], answers: Mapping[str, Any], at: int) -> Fragment:
    """The fragment that pauses a run at `at`: the questions, and the answers their calls (and the turn's
    before_run hooks, which run again on each resumption) already had."""
    calls = {q["call_id"] for q in questions}
    kept = {k: v for k, v in answers.items() if k.rpartition("#")[0] in calls or k.startswith(TURN_HOOK)}
    extra: dict[str, Any] = {PENDING_QUESTIONS: questions}
    if kept:
        extra[ANSWERED] = kept
    return Fragment.unchecked(ASSISTANT, "", None, None, None, extra, at)


def interruptible(loop: AgentLoop, ctx: RunContext) -> AgentLoop:
    """`loop`, paused when a tool asked a person something: the marker with the questions is its last fragment."""
    try:
        return (yield from loop)
    except Asked as stop:
        yield [_pausing(ctx, stop)]


def _pausing(ctx: RunContext, stop: Asked) -> Fragment:
    """The marker that pauses the run for `stop`'s questions, its listeners told."""
    announce(ctx, stop.questions)
    return marker(stop.questions, ctx.answers, stop.placed())


def announce(
    ctx: RunContext, questions: Sequence[dict[str, Any]] = (), approval: Sequence[dict[str, Any]] = ()
) -> None:
    """Tell the run's listeners that it pauses now, for `questions` (and calls waiting for `approval`)."""
    tell(ctx.callbacks, INTERRUPT, ctx.agent_name, ctx, {"questions": list(questions), "approval": list(approval)})


__all__ = [
    "ANSWERS",
    "NESTED",
    "PENDING_QUESTIONS",
    "Answered",
    "Asked",
    "answer_message",
    "check_decision",
    "checked_answers",
    "ask_user",
    "interruptible",
    "is_answer",
    "is_decision",
    "marker",
    "pending_questions",
    "resolve",
]

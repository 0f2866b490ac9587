"""A paused turn's questions and waiting calls as MCP shows them: a form (elicitation) per question, the answers in
a call's input responses, and the text that tells a client how to answer or decide."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp.types import ElicitRequest, ElicitRequestFormParams, InputRequests

from chatagent.run.interrupts import PENDING_QUESTIONS


def input_requests(questions: list[dict[str, Any]]) -> InputRequests | None:
    """A form (MCP elicitation) per question, by question id; None when a question's schema is not one of the flat
    fields a form has (the questions then go back in the result, answered with `answers`)."""
    forms: InputRequests = {}
    for q in questions:
        field = q.get("schema") or {"type": "string"}
        if field.get("type") not in _PRIMITIVE or set(field) - _FIELD_KEYS:
            return None
        form = {"type": "object", "properties": {"answer": field}, "required": ["answer"]}
        forms[q["id"]] = ElicitRequest(
            params=ElicitRequestFormParams(message=str(q["question"]), requested_schema=form)
        )
    return forms


def elicited(params: Any) -> dict[str, Any] | None:
    """The answers in a call's input responses (a form declined or cancelled answers nothing: {} if none was
    accepted); None when the call has none."""
    responses = getattr(params, "input_responses", None)
    if not responses:
        return None
    answers = {}
    for qid, got in responses.items():
        content = getattr(got, "content", None)
        if getattr(got, "action", None) == "accept" and isinstance(content, dict) and "answer" in content:
            answers[str(qid)] = content["answer"]
    return answers


_PRIMITIVE = ("string", "number", "integer", "boolean")
_FIELD_KEYS = {"type", "title", "description", "enum", "minimum", "maximum", "minLength", "maxLength", "format",
               "default", "pattern"}  # fmt: skip


def questions_text(ask: str, extra: Mapping[str, Any]) -> str:
    """What an answer paused on questions tells the client: the questions, and how to answer."""
    asked = "; ".join(f"{q['question']} [id {q['id']}]" for q in extra[PENDING_QUESTIONS])
    return (
        f"The agent asks: {asked[:2000]}. To answer, call {ask} again with answers {{question id: answer}} and "
        f"session_id {extra.get('session_id')!r}."
    )


def waiting_text(ask: str, extra: Mapping[str, Any]) -> str:
    """What a paused answer tells the client: the calls waiting, and how to decide."""
    calls = "; ".join(f"{w['name']}({w['arguments']}) [id {w['id']}]" for w in extra["pending_approval"])
    how = f"session_id {extra['session_id']!r}" if "session_id" in extra else "the approval_token, and the same message"
    return (
        f"Waiting for approval: {calls[:2000]}. To decide, call {ask} again with approval true or false "
        f"(or {{call id: true/false}}) and {how}."
    )


__all__ = ["elicited", "input_requests", "questions_text", "waiting_text"]

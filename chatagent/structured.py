"""Structured output: an agent's answer as a validated object.

    class City(BaseModel):
        name: str
        population: int

    city = bot.run_nonstream(messages, response_format=City)     # a City instance

The agent is told to answer with one JSON object matching the schema. The answer is parsed
leniently (code fences, Python literals, trailing commas...) and validated: by pydantic for a model
class, or against a JSON Schema dict (the answer is then a dict). An invalid answer is sent back
with what is wrong, up to `retries` times; then StructuredOutputError is raised.

The prompt alone works with any model. `json_mode='json_object'` or `'json_schema'` also asks the
server for its JSON mode (OpenAI-style `response_format` in the request); use it only with servers
that accept it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from chatagent.errors import ChatAgentError
from chatagent.schema import ASSISTANT, SYSTEM, USER, ContentItem, Message, content_text, to_messages
from chatagent.stream import fragment
from chatagent.tools.arguments import ToolArgumentError, parse_json, validate_arguments
from chatagent.tools.base import is_pydantic_model, pydantic_errors, pydantic_schema

DEFAULT_RETRIES = 2
INSTRUCTION = (
    "Give your final answer as a single JSON object that matches this JSON Schema, with nothing before or "
    "after it (no code fences, no commentary):\n{schema}"
)
RETRY = "Your answer could not be used: {error}. Reply again with only the corrected JSON object."


class StructuredOutputError(ChatAgentError):
    """The model did not produce a valid answer within the retries; `text` is its last answer, `error` why."""

    def __init__(self, message: str, text: str, error: str) -> None:
        super().__init__(message)
        self.text = text
        self.error = error


def schema_of(response_format: Any) -> tuple[str, dict]:
    """(name, JSON Schema) of a pydantic model class or a schema dict."""
    if is_pydantic_model(response_format):
        return response_format.__name__, pydantic_schema(response_format)
    if isinstance(response_format, dict):
        return str(response_format.get("title") or "response"), response_format
    raise TypeError(
        f"response_format must be a pydantic model class or a JSON Schema dict, got {response_format!r:.80}"
    )


def parse_structured(text: str, response_format: Any) -> Any:
    """The answer `text` parsed and validated: a model instance or a dict. Raises ToolArgumentError."""
    value = parse_json(text)
    if is_pydantic_model(response_format):
        import pydantic

        if not isinstance(value, dict):
            raise ToolArgumentError("the answer must be a JSON object")
        try:
            return response_format.model_validate(value)
        except pydantic.ValidationError as e:
            raise ToolArgumentError(pydantic_errors(e)) from None
    if not isinstance(value, dict):
        raise ToolArgumentError("the answer must be a JSON object")
    return validate_arguments(value, response_format)


def run_structured(
    agent: Any,
    messages: Iterable[dict | Message],
    response_format: Any,
    *,
    retries: int = DEFAULT_RETRIES,
    json_mode: str | None = None,
    lang: str | None = None,
    deadline: float | None = None,
    session: Any = None,
    **kwargs: Any,
) -> Any:
    """Run `agent` until its final answer validates against `response_format` (see the module docstring).

    With `session`, the attempts run on the stored conversation and, once an answer validates, the new messages
    and that answer are stored as one turn (the rejected attempts are not); nothing is stored if none validates."""
    name, schema = schema_of(response_format)
    instruction = INSTRUCTION.format(schema=json.dumps(schema, ensure_ascii=False))
    turn = None
    if session is not None:
        from chatagent.sessions.session import DONE, FAILED, Turn

        turn = Turn(session, to_messages(messages))
        turn.name = agent.name
    try:
        msgs = _with_instruction(turn.conversation if turn else to_messages(messages), instruction)
        if json_mode is not None:
            kwargs["generate_cfg"] = {
                **(kwargs.get("generate_cfg") or {}),
                "response_format": _server_format(json_mode, name, schema),
            }
        history: list[Message] = []
        text, error = "", ""
        for _attempt in range(retries + 1):
            response = agent.run_nonstream(msgs + history, lang=lang, deadline=deadline, response_format=None, **kwargs)
            answers = [
                m for m in response if m.role == ASSISTANT and m.function_call is None and content_text(m.content)
            ]
            text = content_text(answers[-1].content) if answers else ""
            try:
                value = parse_structured(text, response_format)
            except ToolArgumentError as e:
                error = str(e) if text.strip() else "the answer was empty"
            else:
                if turn is not None:
                    turn.add([fragment(m, i) for i, m in enumerate(response)])
                    turn.end(DONE)
                    turn = None
                return value
            history = history + response + [Message._make(USER, RETRY.format(error=error))]
        raise StructuredOutputError(f"no valid {name} after {retries + 1} attempts: {error}", text=text, error=error)
    finally:
        if turn is not None:
            turn.end(FAILED)


def _with_instruction(msgs: list[Message], instruction: str) -> list[Message]:
    if msgs and msgs[0].role == SYSTEM:
        first = msgs[0]
        if isinstance(first.content, str):
            content: Any = first.content + "\n\n" + instruction
        else:
            content = list(first.content) + [ContentItem(text="\n\n" + instruction)]
        return [first.copy(content=content)] + msgs[1:]
    return [Message._make(SYSTEM, instruction)] + msgs


def _server_format(json_mode: str, name: str, schema: dict) -> dict:
    if json_mode == "json_object":
        return {"type": "json_object"}
    if json_mode == "json_schema":
        safe = "".join(c if c.isalnum() or c in "_-" else "_" for c in name)[:64] or "response"
        return {"type": "json_schema", "json_schema": {"name": safe, "schema": schema}}
    raise ValueError(f"json_mode must be 'json_object', 'json_schema' or None, got {json_mode!r}")


__all__ = ["StructuredOutputError", "parse_structured", "run_structured", "schema_of"]

"""Structured output: an agent's answer as a validated object.

    class City(BaseModel):
        name: str
        population: int

    city = bot.run_nonstream(messages, response_format=City)     # a City instance

The agent is told to answer with one JSON object matching the schema. The answer is parsed
leniently (code fences, Python literals, trailing commas...) and validated: by pydantic for a model
class, or against a JSON Schema dict (the answer is then a dict). An invalid answer is sent back
with what is wrong, up to `retries` times; then StructuredOutputError is raised.

The same holds for streamed runs: `run(messages, response_format=City)` (or an agent with `response_format`)
validates the final answer, retries it (the new answer replaces the rejected one in the stream), and its last
yield says how it went in `extra['response_format']`. While the answer streams, each yield's last message carries
the object parsed so far in `extra['parsed']`: a dict of the fields read so far, validated leniently (a field whose
value does not fit its type yet is left out); at the end, the strictly validated object (as a dict: `model_dump`
of the model instance that `run_nonstream` returns). It is a plugin (`StructuredOutput`, see `chatagent.plugins`);
the partial object is a map over the model's stream (`ModelCall.maps`), so whatever holds the stream back (an
output check) holds it back too.

The prompt alone works with any model. A backend that can make its server enforce the schema (the native
Anthropic, Gemini, Bedrock and Responses API backends: `native_structured_output`) gets it as a `json_schema`
`response_format` too, and marks the answer; `extra['response_format']['path']` says which path ran ('native' or
'prompt'). `json_mode='json_object'` or `'json_schema'` asks any server for its JSON mode (OpenAI-style
`response_format` in the request); use it only with servers that accept it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, cast

from chatagent.errors import StructuredOutputError
from chatagent.run.context import current_run
from chatagent.run.plugin import Plugin, Retry
from chatagent.schema import ASSISTANT, Message, content_text, with_system_text
from chatagent.schema.fragment import Fragment
from chatagent.tools.arguments import ToolArgumentError, parse_json, validate_arguments
from chatagent.tools.base import is_pydantic_model, pydantic_errors, pydantic_schema
from chatagent.utils.jsonlenient import parse_partial

DEFAULT_RETRIES = 2
INSTRUCTION = (
    "Give your final answer as a single JSON object that matches this JSON Schema, with nothing before or "
    "after it (no code fences, no commentary):\n{schema}"
)
RETRY = "Your answer could not be used: {error}. Reply again with only the corrected JSON object."
STRUCTURED = "response_format"  # the key of the last message's extra that says whether the answer validated
PARSED = "parsed"  # the key of the object parsed so far (and at the end, the validated one)
NATIVE = "structured_output"  # a backend's mark on an answer whose server enforced the schema: 'native'
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,), "array": (list,),
    "object": (dict,), "null": (type(None),),
}  # fmt: skip


def schema_of(response_format: Any) -> tuple[str, dict[str, Any]]:
    """(name, JSON Schema) of a pydantic model class or a schema dict."""
    if is_pydantic_model(response_format):
        return response_format.__name__, pydantic_schema(response_format)
    if isinstance(response_format, dict):
        schema = cast("dict[str, Any]", response_format)
        return str(schema.get("title") or "response"), schema
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
    return validate_arguments(cast("dict[str, Any]", value), response_format)


class StructuredOutput(Plugin):
    """The plugin behind `response_format`: the schema instruction in the system message, the final answer parsed
    and validated, an invalid one sent back with what is wrong (`Retry`, up to `retries` times; the new answer
    replaces it). The last message then carries `extra['response_format'] = {'name', 'valid', 'attempts'}` (and
    `'error'` when not valid), and `current_run().output` the validated value. `raise_invalid=True` (what
    `run_nonstream` uses) raises StructuredOutputError instead of marking an answer that never validated.
    `json_mode`: also ask the server for its JSON mode ('json_object' or 'json_schema')."""

    name = "response_format"

    def __init__(
        self,
        response_format: Any,
        *,
        retries: int = DEFAULT_RETRIES,
        json_mode: str | None = None,
        raise_invalid: bool = False,
    ) -> None:
        super().__init__()
        if not isinstance(cast(object, retries), int) or isinstance(retries, bool) or retries < 0:
            raise ValueError(f"retries must be a non-negative integer, got {retries!r}")
        self.response_format = response_format
        self.format_name, schema = schema_of(response_format)
        self.instruction = INSTRUCTION.format(schema=json.dumps(schema, ensure_ascii=False))
        self.retries = retries
        self.server_format = None if json_mode is None else _server_format(json_mode, self.format_name, schema)
        self.raise_invalid = raise_invalid
        self.schema = schema

    def before_run(self, agent: Any, messages: list[Message]) -> list[Message]:
        return with_system_text(messages, self.instruction)

    def before_model(self, agent: Any, call: Any) -> None:
        if self.server_format is not None:
            call.cfg = {**call.cfg, "response_format": self.server_format}
        elif getattr(call.llm, "native_structured_output", False) and "response_format" not in call.cfg:
            native = _server_format("json_schema", self.format_name, self.schema, strict=True)
            call.cfg = {**call.cfg, "response_format": native}
        if not call.hide:
            call.maps.append(PartialObject(self.schema))

    def after_run(self, agent: Any, response: list[Message]) -> list[Message]:
        run = current_run()
        answers = [m for m in response if m.role == ASSISTANT and m.function_call is None and content_text(m.content)]
        text = content_text(answers[-1].content) if answers else ""
        mark: dict[str, Any] = {"name": self.format_name, "attempts": run.attempt + 1}
        # which path ran: the server enforced the schema (a backend marks its answer so), or the prompt asked for it
        mark["path"] = "native" if answers and (answers[-1].extra or {}).get(NATIVE) == "native" else "prompt"
        try:
            run.output = parse_structured(text, self.response_format)
        except ToolArgumentError as e:
            error = str(e) if text.strip() else "the answer was empty"
            if run.attempt < self.retries:
                raise Retry(RETRY.format(error=error)) from None
            if self.raise_invalid:
                raise StructuredOutputError(
                    f"no valid {self.format_name} after {run.attempt + 1} attempts: {error}", text=text, error=error
                ) from None
            mark.update(valid=False, error=error)
        else:
            mark["valid"] = True
        extra: dict[str, Any] = {STRUCTURED: mark}
        if mark["valid"]:
            out: Any = run.output
            extra[PARSED] = out.model_dump(mode="json") if is_pydantic_model(cast("type[Any]", type(out))) else out
        if not response:
            return [Message.unchecked(ASSISTANT, "", None, None, None, extra)]
        last = response[-1]
        return response[:-1] + [last.copy(extra={**(last.extra or {}), **extra})]


class PartialObject:
    """A map over a model call's stream: the answer's text parsed as it grows (`parse_partial`), and when the
    object changed, the fields so far that fit the schema (`lenient`) set as `extra['parsed']` on the piece's last
    fragment. Text that does not start as JSON (a tool call's preamble, prose) gets no object."""

    __slots__ = ("schema", "texts", "last")

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        self.texts: dict[int, list[str]] = {}
        self.last: Any = None

    def __call__(self, fragments: list[Fragment]) -> list[Fragment]:
        changed: Fragment | None = None
        for f in fragments:
            if f.role != ASSISTANT or f.function_call is not None:
                continue
            piece = f.text
            if f.replace:
                self.texts.pop(f.index, None)
            if not piece:
                continue
            pieces = self.texts.setdefault(f.index, [])
            pieces.append(piece)
            text = "".join(pieces)
            start = text.lstrip()[:1]
            if start not in ("{", "`"):
                continue
            value = parse_partial(text)
            if isinstance(value, dict):
                value = lenient(cast("dict[str, Any]", value), self.schema)
                if value != self.last:
                    self.last = value
                    changed = f
        if changed is not None:
            changed.extra = {**(changed.extra or {}), PARSED: self.last}
        return fragments


def lenient(value: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """The members of a partial object that fit `schema` so far: known properties (or any, when it names none)
    whose value has the declared JSON type (nested objects checked the same way)."""
    props: dict[str, Any] = schema.get("properties") or {}
    if not props:
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        spec = props.get(key)
        if not isinstance(spec, dict):
            continue
        spec = cast("dict[str, Any]", spec)
        kinds = spec.get("type")
        names: list[Any] = (
            [kinds] if isinstance(kinds, str) else cast("list[Any]", kinds) if isinstance(kinds, list) else []
        )
        if names:
            allowed = tuple(t for n in cast("list[str]", names) for t in _JSON_TYPES.get(n, ()))
            if not isinstance(item, allowed) or (isinstance(item, bool) and bool not in allowed):
                continue
        if isinstance(item, dict) and "properties" in spec:
            item = lenient(cast("dict[str, Any]", item), spec)
        out[key] = item
    return out


def run_structured(
    agent: Any,
    messages: Iterable[dict[str, Any] | Message],
    response_format: Any,
    *,
    retries: int = DEFAULT_RETRIES,
    json_mode: str | None = None,
    **kwargs: Any,
) -> Any:
    """`agent.run_nonstream(messages, response_format=...)`: the validated answer, or StructuredOutputError.

    With `session`, the turn is stored once an answer validates (the answer replacing the rejected ones); nothing
    is stored if none does."""
    return agent.run_nonstream(
        messages, response_format=response_format, retries=retries, json_mode=json_mode, **kwargs
    )


def _server_format(json_mode: str, name: str, schema: dict[str, Any], strict: bool = False) -> dict[str, Any]:
    if json_mode == "json_object":
        return {"type": "json_object"}
    if json_mode == "json_schema":
        safe = "".join(c if c.isalnum() or c in "_-" else "_" for c in name)[:64] or "response"
        return {
            "type": "json_schema",
            "json_schema": {"name": safe, "schema": schema, **({"strict": True} if strict else {})},
        }
    raise ValueError(f"json_mode must be 'json_object', 'json_schema' or None, got {json_mode!r}")


__all__ = [
    "PARSED",
    "PartialObject",
    "StructuredOutput",
    "lenient",
    "StructuredOutputError",
    "parse_structured",
    "run_structured",
    "schema_of",
]

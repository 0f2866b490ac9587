"""BaseTool: what every tool is, its schema (a JSON Schema or a pydantic model), and its result as content.

    @register_tool('get_weather')
    class GetWeather(BaseTool):
        description = 'Current weather for a city.'
        parameters = {'type': 'object', 'properties': {'city': {'type': 'string'}}, 'required': ['city']}

        def call(self, params, **kwargs):
            args = self.parse_params(params)   # or json5.loads(params), as Qwen-Agent tools do
            return f"Sunny in {args['city']}"

`parameters` is a JSON Schema (passed to the model as given) or a pydantic model class. `cfg` carries
per-instance settings the agent reads: `timeout` (seconds), `cache` (reuse results for the same
arguments), `max_calls` (per run), `return_direct` (the result is the final answer), `requires_approval`
(True, or a predicate on the arguments: the run pauses for a person's yes or no; see `chatagent.run.approval`).

The agent hands `call()` the model's arguments as a JSON string, as Qwen-Agent does, after parsing them
leniently and validating them against `parameters` (the string is the repaired, validated arguments).
"""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar

from chatagent.errors import ChatAgentError
from chatagent.schema import ContentItem
from chatagent.tools.arguments import (
    JSONArray,
    JSONObject,
    ToolArgumentError,
    check_finite,
    is_json_array,
    is_json_object,
    parse_arguments,
    validate_arguments,
)
from chatagent.utils.tool_origins import mark_third_party

if TYPE_CHECKING:
    import pydantic
    from typing_extensions import TypeIs

    from chatagent.schema import ContentItem

    _Model = TypeVar("_Model", bound=pydantic.BaseModel)

_EMPTY_SCHEMA: JSONObject = {"type": "object", "properties": {}}
# (tool, the JSON string its `call` was given, the validated arguments it was made from) in `run_validated`
_VALIDATED: ContextVar[tuple[BaseTool, str, JSONObject] | None] = ContextVar(
    "chatagent_validated_arguments", default=None
)
TOOL_SETTINGS = ("timeout", "cache", "max_calls", "return_direct", "requires_approval")


class BaseTool:
    """A tool the model can call. Subclasses set `name`, `description`, `parameters` and implement `call`."""

    name: str = ""
    description: str = ""
    #: A JSON Schema, Qwen-Agent's older list form (see `schema_from_list`) or a pydantic model class.
    parameters: JSONObject | list[JSONObject] | type[pydantic.BaseModel] = _EMPTY_SCHEMA
    #: Defaults for the settings in `cfg` (a subclass may change them).
    timeout: float | None = None
    cache: bool = False
    max_calls: int | None = None
    return_direct: bool = False
    requires_approval: bool | Callable[[JSONObject], bool] = False
    #: Whether it runs code the model wrote: `chatagent gui` and `serve` then ask for approval of each call unless
    #: `requires_approval` was set (a model that reads other people's text can be told what to run).
    runs_code: bool = False
    #: Whether its name and description were written by a third party (an MCP server, a remote agent): what chooses
    #: tools by meaning holds it to a higher bar (`chatagent.utils.tool_origins`).
    third_party: bool = False

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        self.cfg: dict[str, Any] = dict(cfg or {})
        for key in TOOL_SETTINGS:
            if key in self.cfg:
                setattr(self, key, self.cfg[key])
        if self.cfg.get("description"):
            self.description = self.cfg["description"]
        if not self.name:
            raise ValueError(f"{type(self).__name__} has no name: set `name` or use @register_tool('name')")
        _check_settings(self.name, self.timeout, self.max_calls, self.requires_approval)
        self._function: JSONObject | None = None
        cls = type(self)
        #: Whether the tool is a coroutine at heart (`acall` overridden, or `call` an `async def`): `arun()` then
        #: awaits it on the caller's event loop; other tools run in worker threads there.
        self.is_async: bool = cls.acall is not BaseTool.acall or inspect.iscoroutinefunction(cls.call)

    def call(self, params: str | JSONObject, **kwargs: Any) -> Any:
        """Run the tool. `params` is the model's arguments: from an agent, a JSON string of arguments already
        repaired and validated; called directly, a dict or a JSON string (`parse_params` handles both).
        Return a string, a list of ContentItems, or anything JSON-serialisable."""
        raise NotImplementedError

    async def acall(self, params: str | JSONObject, **kwargs: Any) -> Any:
        """`call` for asyncio. Override it for a tool that does its I/O with async libraries; by default it
        awaits an `async def call`, and runs a plain `call` in a worker thread."""
        import asyncio

        if inspect.iscoroutinefunction(type(self).call):
            return await self.call(params, **kwargs)
        return await asyncio.to_thread(self.call, params, **kwargs)

    def run_validated(self, args: JSONObject, **kwargs: Any) -> Any:
        """Run the tool on arguments the agent has parsed and validated: `call()` gets them as a JSON string
        (what Qwen-Agent tools expect), and `parse_params` on that very string returns them without parsing or
        validating again. FunctionTool overrides it to call its function with typed arguments."""
        text = json.dumps(args, ensure_ascii=False)
        token = _VALIDATED.set((self, text, args))
        try:
            return self.call(text, **kwargs)
        finally:
            _VALIDATED.reset(token)

    async def arun_validated(self, args: JSONObject, **kwargs: Any) -> Any:
        """`run_validated` for asyncio: `acall()` gets the arguments as a JSON string (the same rule)."""
        text = json.dumps(args, ensure_ascii=False)
        token = _VALIDATED.set((self, text, args))
        try:
            return await self.acall(text, **kwargs)
        finally:
            _VALIDATED.reset(token)

    @property
    def function(self) -> JSONObject:
        """The schema the model sees: `{'name', 'description', 'parameters'}`."""
        if self._function is None:
            self._function = {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters_schema,
            }
            if self.third_party:
                mark_third_party(self._function)
        return self._function

    @property
    def parameters_schema(self) -> JSONObject:
        """`parameters` as a JSON Schema dict (a pydantic model's schema when it is one)."""
        params = self.parameters
        if isinstance(params, dict):
            return params
        if isinstance(params, list):
            return schema_from_list(params)
        if is_pydantic_model(params):
            return pydantic_schema(params)
        raise TypeError(f"tool {self.name!r}: parameters must be a JSON Schema dict or a pydantic model class")

    def parse_params(self, params: str | JSONObject | None) -> JSONObject:
        """The arguments parsed leniently and validated against `parameters`. Raises ToolArgumentError.

        For the string `run_validated` handed this tool's `call`, the arguments it was made from (validated once).
        """
        given = _VALIDATED.get()
        if given is not None and params is given[1] and given[0] is self:
            return dict(given[2])
        return self.validate(parse_arguments(params))

    def validate(self, args: JSONObject) -> JSONObject:
        """Parsed arguments checked against `parameters`, with safe coercions and defaults applied."""
        if is_pydantic_model(self.parameters):
            check_finite(args)
            return validate_with_pydantic(self.parameters, args).model_dump()
        return validate_arguments(args, self.parameters_schema)

    def close(self) -> None:
        """Release what the tool holds (processes, connections); `Agent.close()` calls it. Default: nothing."""

    def _verify_json_format_args(self, params: str | JSONObject, strict_json: bool = False) -> JSONObject:
        """Qwen-Agent's name for `parse_params`; `strict_json=True` accepts strict JSON only. Raises ValueError."""
        if strict_json and isinstance(params, str):
            try:
                params = json.loads(params)
            except ValueError as e:
                raise ToolArgumentError(f"the arguments are not valid JSON: {e}") from None
        return self.parse_params(params)

    # Qwen-Agent's tool attributes
    file_access = False

    @property
    def name_for_human(self) -> str:
        return self.cfg.get("name_for_human", self.name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def _check_settings(name: str, timeout: object, max_calls: object, requires_approval: object) -> None:
    """A clear ValueError for a setting of the wrong kind (they come from an untyped `cfg` or a subclass)."""
    if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0):
        raise ValueError(f"tool {name!r}: timeout must be a positive number of seconds, got {timeout!r}")
    if max_calls is not None and not (isinstance(max_calls, int) and max_calls >= 0):
        raise ValueError(f"tool {name!r}: max_calls must be a non-negative integer, got {max_calls!r}")
    if not isinstance(requires_approval, bool) and not callable(requires_approval):
        raise ValueError(
            f"tool {name!r}: requires_approval must be True, False or a function of the arguments, "
            f"got {requires_approval!r:.80}"
        )


def schema_from_list(params: JSONArray) -> JSONObject:
    """Qwen-Agent's older list form (`[{'name', 'type', 'description', 'required'}]`) as a JSON Schema."""
    properties: dict[str, JSONObject] = {}
    required: list[str] = []
    for p in params:
        if not is_json_object(p) or not isinstance(p.get("name"), str):
            raise TypeError(f"a parameter in list form needs a 'name', got {p!r:.80}")
        properties[p["name"]] = {k: v for k, v in p.items() if k not in ("name", "required")}
        if p.get("required"):
            required.append(p["name"])
    return {"type": "object", "properties": properties, "required": required}


# ---- pydantic, only when a pydantic model is used ------------------------------------------------------------


def is_pydantic_model(obj: object) -> TypeIs[type[pydantic.BaseModel]]:
    """Whether `obj` is a pydantic model class (without importing pydantic)."""
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(obj, type) and issubclass(obj, pydantic.BaseModel)


def pydantic_schema(model: type[pydantic.BaseModel]) -> JSONObject:
    """A pydantic model's JSON Schema, with nested models in `$defs` at the top."""
    schema = model.model_json_schema()
    schema.pop("title", None)
    return schema


def validate_with_pydantic(model: type[_Model], data: object) -> _Model:
    """`model.model_validate(data)`, with validation errors as one ToolArgumentError naming the fields."""
    import pydantic

    try:
        return model.model_validate(data)
    except pydantic.ValidationError as e:
        raise ToolArgumentError(pydantic_errors(e)) from None


def pydantic_errors(e: pydantic.ValidationError, limit: int = 3) -> str:
    """A pydantic ValidationError in a few short phrases: "'field': what is wrong"."""
    parts: list[str] = []
    for err in e.errors()[:limit]:
        loc = ".".join(str(p) for p in err.get("loc", ())) or "the value"
        parts.append(f"'{loc}': {err.get('msg', 'invalid')}")
    more = e.error_count() - limit
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


class CodedError(ChatAgentError):
    """An error with Qwen-Agent's fields: the `exception` it wraps, or a `code` and a `message`; and `extra`."""

    def __init__(
        self,
        exception: Exception | None = None,
        code: str | None = None,
        message: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(exception if exception is not None else f"Error code: {code}. Error message: {message}")
        self.exception, self.code, self.message, self.extra = exception, code, message, extra


class ToolServiceError(CodedError):
    """Raised by a tool when the run cannot go on (a service it needs is down): unlike other errors in a tool,
    it is not reported to the model but propagates to the caller of `run()`, as in Qwen-Agent."""


def result_content(result: object) -> str | list[ContentItem]:
    """A tool's return value as message content: a string or a list of ContentItems."""
    if isinstance(result, str):
        return result
    if result is None:
        return ""
    if is_json_array(result) and result:
        items = [x for x in result if isinstance(x, ContentItem)]
        if len(items) == len(result):
            return items
    try:
        return json.dumps(result, ensure_ascii=False, default=_jsonable)
    except (TypeError, ValueError):
        return str(result)


def _jsonable(obj: object) -> Any:
    """JSON for what json.dumps cannot write: pydantic models, dataclasses, sets, the rest as str()."""
    if not isinstance(obj, type):
        dump = getattr(obj, "model_dump", None)
        if callable(dump):
            return dump(mode="json")
        import dataclasses

        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):  # narrows out the class for pyright
            return dataclasses.asdict(obj)
    if isinstance(obj, (set, frozenset, tuple)):
        items: list[object] = [*obj]
        return items
    return str(obj)


__all__ = [
    "BaseTool",
    "CodedError",
    "TOOL_SETTINGS",
    "ToolServiceError",
    "is_pydantic_model",
    "pydantic_errors",
    "pydantic_schema",
    "result_content",
    "schema_from_list",
    "validate_with_pydantic",
]

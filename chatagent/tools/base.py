"""BaseTool, the tool registry, and turning a `function_list` into tools.

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
(True, or a predicate on the arguments: the run pauses for a person's yes or no; see `chatagent.approval`).

The agent hands `call()` the model's arguments as a JSON string, as Qwen-Agent does, after parsing them
leniently and validating them against `parameters` (the string is the repaired, validated arguments).
"""

from __future__ import annotations

import importlib
import inspect
import json
import sys
from collections.abc import Callable, Iterable
from typing import Any

from chatagent.errors import ChatAgentError
from chatagent.tools.arguments import ToolArgumentError, parse_arguments, validate_arguments

_EMPTY_SCHEMA: dict = {"type": "object", "properties": {}}
TOOL_SETTINGS = ("timeout", "cache", "max_calls", "return_direct", "requires_approval")


class BaseTool:
    """A tool the model can call. Subclasses set `name`, `description`, `parameters` and implement `call`."""

    name: str = ""
    description: str = ""
    parameters: dict | type = _EMPTY_SCHEMA
    #: Defaults for the settings in `cfg` (a subclass may change them).
    timeout: float | None = None
    cache: bool = False
    max_calls: int | None = None
    return_direct: bool = False
    requires_approval: bool | Callable[[dict], bool] = False

    def __init__(self, cfg: dict | None = None) -> None:
        self.cfg: dict = dict(cfg or {})
        for key in TOOL_SETTINGS:
            if key in self.cfg:
                setattr(self, key, self.cfg[key])
        if self.cfg.get("description"):
            self.description = self.cfg["description"]
        if not self.name:
            raise ValueError(f"{type(self).__name__} has no name: set `name` or use @register_tool('name')")
        if self.timeout is not None and not (isinstance(self.timeout, (int, float)) and self.timeout > 0):
            raise ValueError(f"tool {self.name!r}: timeout must be a positive number of seconds, got {self.timeout!r}")
        if self.max_calls is not None and not (isinstance(self.max_calls, int) and self.max_calls >= 0):
            raise ValueError(f"tool {self.name!r}: max_calls must be a non-negative integer, got {self.max_calls!r}")
        if not isinstance(self.requires_approval, bool) and not callable(self.requires_approval):
            raise ValueError(
                f"tool {self.name!r}: requires_approval must be True, False or a function of the arguments, "
                f"got {self.requires_approval!r:.80}"
            )
        self._function: dict | None = None
        cls = type(self)
        #: Whether the tool is a coroutine at heart (`acall` overridden, or `call` an `async def`): `arun()` then
        #: awaits it on the caller's event loop; other tools run in worker threads there.
        self.is_async: bool = cls.acall is not BaseTool.acall or inspect.iscoroutinefunction(cls.call)

    def call(self, params: str | dict, **kwargs: Any) -> Any:
        """Run the tool. `params` is the model's arguments: from an agent, a JSON string of arguments already
        repaired and validated; called directly, a dict or a JSON string (`parse_params` handles both).
        Return a string, a list of ContentItems, or anything JSON-serialisable."""
        raise NotImplementedError

    async def acall(self, params: str | dict, **kwargs: Any) -> Any:
        """`call` for asyncio. Override it for a tool that does its I/O with async libraries; by default it
        awaits an `async def call`, and runs a plain `call` in a worker thread."""
        import asyncio

        if inspect.iscoroutinefunction(type(self).call):
            return await self.call(params, **kwargs)
        return await asyncio.to_thread(self.call, params, **kwargs)

    def run_validated(self, args: dict, **kwargs: Any) -> Any:
        """Run the tool on arguments the agent has parsed and validated: `call()` gets them as a JSON string
        (what Qwen-Agent tools expect). FunctionTool overrides it to call its function with typed arguments."""
        return self.call(json.dumps(args, ensure_ascii=False), **kwargs)

    async def arun_validated(self, args: dict, **kwargs: Any) -> Any:
        """`run_validated` for asyncio: `acall()` gets the arguments as a JSON string."""
        return await self.acall(json.dumps(args, ensure_ascii=False), **kwargs)

    @property
    def function(self) -> dict:
        """The schema the model sees: `{'name', 'description', 'parameters'}`."""
        if self._function is None:
            self._function = {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters_schema,
            }
        return self._function

    @property
    def parameters_schema(self) -> dict:
        """`parameters` as a JSON Schema dict (a pydantic model's schema when it is one)."""
        params = self.parameters
        if isinstance(params, dict):
            return params
        if is_pydantic_model(params):
            return pydantic_schema(params)
        if isinstance(params, list):
            return schema_from_list(params)
        raise TypeError(f"tool {self.name!r}: parameters must be a JSON Schema dict or a pydantic model class")

    def parse_params(self, params: str | dict | None) -> dict:
        """The arguments parsed leniently and validated against `parameters`. Raises ToolArgumentError."""
        return self.validate(parse_arguments(params))

    def validate(self, args: dict) -> dict:
        """Parsed arguments checked against `parameters`, with safe coercions and defaults applied."""
        if is_pydantic_model(self.parameters):
            return validate_with_pydantic(self.parameters, args).model_dump()
        return validate_arguments(args, self.parameters_schema)

    def close(self) -> None:
        """Release what the tool holds (processes, connections); `Agent.close()` calls it. Default: nothing."""

    def _verify_json_format_args(self, params: str | dict, strict_json: bool = False) -> dict:
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


def schema_from_list(params: list[dict]) -> dict:
    """Qwen-Agent's older list form (`[{'name', 'type', 'description', 'required'}]`) as a JSON Schema."""
    properties: dict[str, dict] = {}
    required: list[str] = []
    for p in params:
        if not isinstance(p, dict) or not isinstance(p.get("name"), str):
            raise TypeError(f"a parameter in list form needs a 'name', got {p!r:.80}")
        properties[p["name"]] = {k: v for k, v in p.items() if k not in ("name", "required")}
        if p.get("required"):
            required.append(p["name"])
    return {"type": "object", "properties": properties, "required": required}


# ---- pydantic, only when a pydantic model is used ------------------------------------------------------------


def is_pydantic_model(obj: Any) -> bool:
    """Whether `obj` is a pydantic model class (without importing pydantic)."""
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(obj, type) and issubclass(obj, pydantic.BaseModel)


def pydantic_schema(model: type) -> dict:
    """A pydantic model's JSON Schema, with nested models in `$defs` at the top."""
    schema = model.model_json_schema()
    schema.pop("title", None)
    return schema


def validate_with_pydantic(model: type, data: Any) -> Any:
    """`model.model_validate(data)`, with validation errors as one ToolArgumentError naming the fields."""
    import pydantic

    try:
        return model.model_validate(data)
    except pydantic.ValidationError as e:
        raise ToolArgumentError(pydantic_errors(e)) from None


def pydantic_errors(e: Any, limit: int = 3) -> str:
    """A pydantic ValidationError in a few short phrases: "'field': what is wrong"."""
    parts = []
    for err in e.errors()[:limit]:
        loc = ".".join(str(p) for p in err.get("loc", ())) or "the value"
        parts.append(f"'{loc}': {err.get('msg', 'invalid')}")
    more = e.error_count() - limit
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


class ToolServiceError(ChatAgentError):
    """Raised by a tool when the run cannot go on (a service it needs is down): unlike other errors in a tool,
    it is not reported to the model but propagates to the caller of `run()`, as in Qwen-Agent."""

    def __init__(
        self, exception: Exception | None = None, code: str | None = None, message: str | None = None, extra=None
    ) -> None:
        super().__init__(exception if exception is not None else f"Error code: {code}. Error message: {message}")
        self.exception, self.code, self.message, self.extra = exception, code, message, extra


# ---- the registry --------------------------------------------------------------------------------------------


class ToolRegistry(dict):
    """name -> tool class. An entry may be registered lazily as "module:Class" or "module" (a module that
    registers the name itself with @register_tool when imported): reading it (`[name]`, `get`, `values`,
    `items`) imports it, so the values a caller sees are always classes."""

    def __getitem__(self, name: str) -> type[BaseTool]:
        entry = dict.__getitem__(self, name)
        return tool_class(name) if isinstance(entry, str) else entry

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        return self[name] if dict.__contains__(self, name) else default

    def values(self) -> list[type[BaseTool]]:  # type: ignore[override]
        return [self[name] for name in self]

    def items(self) -> list[tuple[str, type[BaseTool]]]:  # type: ignore[override]
        return [(name, self[name]) for name in self]

    def entry(self, name: str) -> type[BaseTool] | str | None:
        """The entry as registered, without importing anything: a class, a lazy string, or None."""
        return dict.get(self, name)


TOOL_REGISTRY: ToolRegistry = ToolRegistry()

# A dict in function_list with one of these keys is a source of several tools, e.g. {'mcpServers': {...}}:
# key -> "module:function" (or the function itself) taking that dict and returning a list of BaseTools.
TOOL_SOURCES: dict[str, Callable[[dict], list[BaseTool]] | str] = {
    "mcpServers": "chatagent.tools.mcp:tools_from_config",
}


def register_tool(name: str, allow_overwrite: bool = False, *, overwrite: bool = False) -> Callable[[Any], Any]:
    """Register a tool class (or a typed function) under `name`, so function_list can refer to it.

    A second registration under the same name is an error unless `allow_overwrite=True` (Qwen-Agent's
    spelling) or `overwrite=True`. Returns the class (for a function: the generated tool class).
    """
    overwrite = overwrite or allow_overwrite

    def decorator(obj: Any) -> Any:
        if isinstance(obj, type) and issubclass(obj, BaseTool):
            cls = obj
        elif callable(obj):
            from chatagent.tools.from_function import function_tool_class

            cls = function_tool_class(obj, name=name)
        else:
            raise TypeError(f"register_tool({name!r}) decorates a BaseTool subclass or a function, got {obj!r:.80}")
        existing = TOOL_REGISTRY.entry(name)
        if existing is not None and not overwrite and not _same_lazy_entry(existing, cls):
            where = existing if isinstance(existing, str) else f"{existing.__module__}.{existing.__qualname__}"
            raise ValueError(
                f"a tool named {name!r} is already registered ({where}); pass overwrite=True to replace it"
            )
        cls.name = name
        TOOL_REGISTRY[name] = cls
        return cls

    return decorator


def _same_lazy_entry(existing: type[BaseTool] | str, cls: type) -> bool:
    """A lazy "module" or "module:Class" entry being replaced by the class it names (its module is being
    imported), or the same class registered again."""
    if isinstance(existing, str):
        module, _, qualname = existing.partition(":")
        return module == cls.__module__ and qualname in ("", cls.__qualname__)
    return existing is cls


def tool_class(name: str) -> type[BaseTool]:
    """The registered class for `name` (importing it if registered lazily). Raises ValueError if unknown."""
    entry = TOOL_REGISTRY.entry(name)
    if entry is None:
        from chatagent.tools.arguments import unknown_tool_message

        raise ValueError(
            unknown_tool_message(name, TOOL_REGISTRY).removeprefix("Error: ").replace("tools:", "registered:")
        )
    if isinstance(entry, str):
        module, _, qualname = entry.partition(":")
        try:
            loaded = importlib.import_module(module)
            cls = getattr(loaded, qualname) if qualname else TOOL_REGISTRY.entry(name)
        except (ImportError, AttributeError) as e:
            raise ValueError(f"tool {name!r} is registered as {entry} but cannot be loaded: {e}") from e
        if not (isinstance(cls, type) and issubclass(cls, BaseTool)):
            raise ValueError(f"tool {name!r}: importing {module} did not register a tool class under that name")
        TOOL_REGISTRY[name] = cls
        return cls
    return entry


def _load(ref: Callable | str) -> Callable:
    if isinstance(ref, str):
        module, _, attr = ref.partition(":")
        return getattr(importlib.import_module(module), attr)
    return ref


def make_tools(function_list: Iterable[Any] | None) -> dict[str, BaseTool]:
    """Tools by name from the forms `function_list` accepts.

    - a registered name: `'code_interpreter'`
    - a registered name with settings: `{'name': 'my_tool', 'timeout': 5, 'cache': True}`
    - a tool source: `{'mcpServers': {...}}` (see TOOL_SOURCES)
    - a BaseTool instance, or a BaseTool subclass (built with no cfg)
    - a plain (typed) function, made a tool as by `@tool`

    Two tools with the same name are an error.
    """
    tools: dict[str, BaseTool] = {}
    for item in function_list or ():
        for t in _make(item):
            if t.name in tools:
                raise ValueError(f"two tools are named {t.name!r} in function_list; tool names must be unique")
            tools[t.name] = t
    return tools


def _make(item: Any) -> list[BaseTool]:
    if isinstance(item, BaseTool):
        return [item]
    if isinstance(item, str):
        return [tool_class(item)()]
    if isinstance(item, dict):
        for key, source in TOOL_SOURCES.items():
            if key in item:
                try:
                    loader = _load(source)
                except ImportError as e:
                    raise ValueError(
                        f"function_list entry with {key!r} needs a loader that cannot be loaded: {e}"
                    ) from e
                return list(loader(item))
        name = item.get("name")
        if not isinstance(name, str):
            raise ValueError(f"a dict in function_list needs a 'name' (a registered tool), got {item!r:.120}")
        return [tool_class(name)(item)]
    if isinstance(item, type) and issubclass(item, BaseTool):
        return [item()]
    if callable(item):
        from chatagent.tools.from_function import tool

        return [tool(item)]
    raise TypeError(f"function_list entries are names, dicts, tools or functions; got {type(item).__name__}")


def result_content(result: Any) -> Any:
    """A tool's return value as message content: a string or a list of ContentItems."""
    if isinstance(result, str):
        return result
    if result is None:
        return ""
    if isinstance(result, list) and result:
        from chatagent.schema import ContentItem

        if all(isinstance(x, ContentItem) for x in result):
            return list(result)
    try:
        return json.dumps(result, ensure_ascii=False, default=_jsonable)
    except (TypeError, ValueError):
        return str(result)


def _jsonable(obj: Any) -> Any:
    """JSON for what json.dumps cannot write: pydantic models, dataclasses, sets, the rest as str()."""
    dump = getattr(obj, "model_dump", None)
    if callable(dump) and not isinstance(obj, type):
        return dump(mode="json")
    import dataclasses

    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    return str(obj)


__all__ = [
    "BaseTool",
    "TOOL_REGISTRY",
    "ToolRegistry",
    "ToolServiceError",
    "TOOL_SOURCES",
    "make_tools",
    "register_tool",
    "result_content",
    "tool_class",
]

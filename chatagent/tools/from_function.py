"""Tools from typed Python functions: `@tool`.

    @tool
    def get_weather(city: str, unit: Literal['celsius', 'fahrenheit'] = 'celsius') -> str:
        \"\"\"Current weather for a city.

        Args:
            city: City name, e.g. "Paris".
            unit: Temperature unit.
        \"\"\"

The schema comes from the type hints (str, int, float, bool, list[...], dict, tuple, set, Optional,
unions, Literal, Enum, Annotated[..., "description"], pydantic models, Any) and the docstring: its text
before the sections is the description, its `Args:` section (Google style, or Sphinx `:param x:`)
describes each parameter. Parameters with defaults are optional. When called, arguments are validated
and converted back to the annotated types (Enum members, pydantic model instances). Async functions
work too: `arun()` awaits them on the caller's event loop; `run()` runs them on one background event loop
that lives as long as the process (so a client the function keeps, such as an `httpx.AsyncClient`, works
across calls).
"""

from __future__ import annotations

import contextlib
import enum
import functools
import inspect
import logging
import re
import types
import typing
import weakref
from collections.abc import Callable, Iterable
from typing import Any, Generic, Literal, ParamSpec, TypeVar, Union, get_args, get_origin, get_type_hints, overload

from chatagent.tools.arguments import JSONObject, ToolArgumentError, is_json_array
from chatagent.tools.tool import TOOL_SETTINGS, BaseTool, is_pydantic_model, pydantic_schema, validate_with_pydantic
from chatagent.utils.jsonlenient import json_copy

logger = logging.getLogger("chatagent.tools")

_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Returns?|Yields?|Raises|Examples?|Notes?|"
    r"See Also|References|Attributes|Warnings?|Todo)\s*:\s*$",
    re.I,
)
_ARG_LINE = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_PARAM = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """(description, {parameter: description}) from a Google- or Sphinx-style docstring."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    base_indent: int | None = None
    current: str | None = None
    for line in lines:
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        header = _SECTION.match(stripped) if indent == 0 else None
        if header:
            section = header.group(1).lower()
            base_indent, current = None, None
            continue
        sphinx = _SPHINX_PARAM.match(stripped)
        if sphinx:
            key = sphinx.group(1)
            params[key] = sphinx.group(2).strip()
            section, current = "sphinx", key
            continue
        if section is None:
            description.append(line)
            continue
        if section in ("args", "arguments", "parameters", "params", "keyword args", "keyword arguments", "sphinx"):
            if not stripped:
                current = None if section != "sphinx" else current
                continue
            if section == "sphinx":
                if stripped.startswith(":"):
                    current = None
                elif current:
                    params[current] = (params[current] + " " + stripped).strip()
                continue
            if base_indent is None:
                base_indent = indent
            m = _ARG_LINE.match(stripped) if indent <= base_indent else None
            if m:
                key = m.group(1)
                params[key] = m.group(2).strip()
                current = key
            elif current:
                params[current] = (params[current] + " " + stripped).strip()
    text = "\n".join(description).strip()
    return re.sub(r"\n{3,}", "\n\n", text), params


class _Schemas:
    """Builds JSON Schemas from type hints, collecting pydantic models' `$defs`."""

    def __init__(self) -> None:
        self.defs: JSONObject = {}

    def of(self, tp: object) -> JSONObject:
        """The JSON Schema of the annotation `tp` ({} when it says nothing a schema can)."""
        if tp is inspect.Parameter.empty or tp is Any or tp is object:
            return {}
        if tp is type(None) or tp is None:
            return {"type": "null"}
        if tp is str:
            return {"type": "string"}
        if tp is bool:
            return {"type": "boolean"}
        if tp is int:
            return {"type": "integer"}
        if tp is float:
            return {"type": "number"}
        if is_pydantic_model(tp):
            schema: JSONObject = pydantic_schema(tp)
            self.defs.update(schema.pop("$defs", {}))
            return schema
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            values = [m.value for m in tp]
            schema = {"enum": values}
            kinds: set[type] = {type(v) for v in values}
            if kinds <= {str}:
                schema["type"] = "string"
            elif kinds <= {int}:
                schema["type"] = "integer"
            return schema
        origin, args = get_origin(tp), get_args(tp)
        if origin is typing.Annotated:
            schema = dict(self.of(args[0]))
            for meta in args[1:]:
                text = meta if isinstance(meta, str) else getattr(meta, "description", None)
                if isinstance(text, str):
                    schema["description"] = text
            return schema
        if origin is Literal:
            schema = {"enum": list(args)}
            kinds = {type(v) for v in args}
            if len(kinds) == 1:
                kind = {str: "string", int: "integer", bool: "boolean", float: "number"}.get(kinds.pop())
                if kind:
                    schema["type"] = kind
            return schema
        if origin is Union or origin is types.UnionType:
            members = [a for a in args if a is not type(None)]
            if len(members) == 1 and len(args) == 2:
                return {"anyOf": [self.of(members[0]), {"type": "null"}]}
            return {"anyOf": [self.of(a) for a in args]}
        if tp in (list, set, frozenset, tuple) or origin in (list, set, frozenset, tuple):
            schema = {"type": "array"}
            if args and not (origin is tuple and len(args) != 2):
                item = args[0]
                if item is not Ellipsis:
                    schema["items"] = self.of(item)
            elif args and origin is tuple:
                schema["prefixItems"] = [self.of(a) for a in args]
            return schema
        if tp is dict or origin is dict:
            schema = {"type": "object"}
            if len(args) == 2 and args[1] is not Any:
                schema["additionalProperties"] = self.of(args[1])
            return schema
        if origin is not None and isinstance(origin, type):
            import collections.abc as cabc

            if issubclass(origin, cabc.Mapping):
                return {"type": "object"}
            if issubclass(origin, cabc.Sequence | cabc.Set):
                return {"type": "array", "items": self.of(args[0])} if args else {"type": "array"}
        return {}


def _optional_schema(schema: JSONObject) -> JSONObject:
    """For a parameter with a default: `X | None` is shown to the model as plain X (null is accepted anyway)."""
    branches = schema.get("anyOf")
    if is_json_array(branches) and len(branches) == 2 and {"type": "null"} in branches:
        other = branches[0] if branches[1] == {"type": "null"} else branches[1]
        return {**{k: v for k, v in schema.items() if k != "anyOf"}, **other}
    return schema


def _type_hints(fn: Callable[..., object], warn: bool = True) -> dict[str, Any]:
    """The function's resolved type hints; {} (and a warning) when some cannot be resolved."""
    try:
        return get_type_hints(fn, include_extras=True)
    except Exception as e:  # a forward reference to a name that does not exist at module level
        if warn:
            logger.warning(
                "%s: cannot resolve its type hints (%s); its parameters will accept any value",
                getattr(fn, "__name__", fn),
                e,
            )
        return {}


def function_schema(fn: Callable[..., object], name: str | None = None, description: str | None = None) -> JSONObject:
    """`{'name', 'description', 'parameters'}` for a typed function."""
    sig = inspect.signature(fn)
    hints = _type_hints(fn)
    doc, arg_docs = parse_docstring(inspect.getdoc(fn))
    builder = _Schemas()
    properties: dict[str, JSONObject] = {}
    required: list[str] = []
    for pname, p in sig.parameters.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        schema = dict(builder.of(hints.get(pname, p.annotation)))
        if p.default is not p.empty:
            schema = _optional_schema(schema)
            default = p.default.value if isinstance(p.default, enum.Enum) else p.default
            if isinstance(default, (str, int, float, bool, list, dict)):
                schema["default"] = default
        else:
            required.append(pname)
        if arg_docs.get(pname) and "description" not in schema:
            schema["description"] = arg_docs[pname]
        properties[pname] = schema
    parameters: JSONObject = {"type": "object", "properties": properties, "required": required}
    if builder.defs:
        parameters["$defs"] = builder.defs
    return {
        "name": name or fn.__name__,
        "description": description if description is not None else doc,
        "parameters": parameters,
    }


# the collections a JSON array is converted to, by annotation (list[int], set, tuple[str, ...], ...)
_COLLECTIONS: dict[object, Callable[[Iterable[Any]], Any]] = {list: list, set: set, frozenset: frozenset, tuple: tuple}


def _converter(tp: object) -> Callable[[Any], Any] | None:
    """A function turning a validated JSON value into the annotated type, or None when none is needed."""
    origin, args = get_origin(tp), get_args(tp)
    if origin is typing.Annotated:
        return _converter(args[0])
    if is_pydantic_model(tp):
        return functools.partial(validate_with_pydantic, tp)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp
    if origin is Union or origin is types.UnionType:
        members = [(a, _converter(a)) for a in args if a is not type(None)]
        if len(members) == 1 and members[0][1] is not None:
            conv = members[0][1]
            return lambda v: None if v is None else conv(v)
        return None
    if origin in (list, set, frozenset, tuple) and args:
        item = _converter(args[0])
        kind = _COLLECTIONS[origin]
        if item is None:
            return None if origin is list else kind
        return lambda v: kind(item(x) for x in v)
    if tp in (set, frozenset, tuple):
        return _COLLECTIONS[tp]
    return None


_Facts = tuple[JSONObject, dict[str, Callable[[Any], Any]], bool]
_FACTS: weakref.WeakKeyDictionary[Any, _Facts] = weakref.WeakKeyDictionary()


def _function_facts(fn: Callable[..., object]) -> _Facts:
    """What a tool takes from its function: its schema (under a placeholder name), its arguments' converters,
    whether it takes **kwargs; worked out once per function (kept while the function lives). Every agent given
    the same functions makes tools of its own of them, and resolving a function's type hints (string annotations
    are compiled) and reading its signature and docstring was most of an agent's build: 50 agents built at once
    on an event loop with 20 tools each held it for a quarter of a second."""
    try:
        facts = _FACTS.get(fn)
    except TypeError:  # a callable that is unhashable or cannot be weakly referenced: worked out each time
        facts = None
    if facts is None:
        sig = inspect.signature(fn)
        hints = _type_hints(fn, warn=False)
        converters = {k: c for k, tp in hints.items() if k in sig.parameters and (c := _converter(tp))}
        accepts_kwargs = any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())
        facts = (function_schema(fn, "_"), converters, accepts_kwargs)
        with contextlib.suppress(TypeError):
            _FACTS[fn] = facts
    return facts


_P = ParamSpec("_P")
_R = TypeVar("_R")


class FunctionTool(BaseTool, Generic[_P, _R]):
    """A tool that calls a Python function; its schema comes from the function's signature and docstring.

    Calling the tool object directly (`get_weather('Paris')`) calls the function itself (with its signature).
    """

    def __init__(
        self,
        fn: Callable[_P, _R],
        cfg: dict[str, Any] | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> None:
        cfg = dict(cfg or {})
        self.fn = fn
        self.name = name or cfg.get("name") or getattr(self, "name", "") or getattr(fn, "__name__", "")
        if not self.name:
            raise TypeError(f"{fn!r:.80} has no __name__: name the tool, e.g. tool(fn, name='lookup')")
        schema, self._converters, self._accepts_kwargs = _function_facts(fn)
        self.description = description if description is not None else schema["description"]
        self.parameters = parameters = json_copy(schema["parameters"])  # this tool's own
        self._properties: JSONObject = parameters["properties"]  # the arguments the function takes
        super().__init__(cfg)
        self.is_async = inspect.iscoroutinefunction(fn)
        functools.update_wrapper(self, fn, updated=())

    def call(self, params: str | JSONObject, **kwargs: Any) -> Any:
        return self._run_function(self.parse_params(params))

    async def acall(self, params: str | JSONObject, **kwargs: Any) -> Any:
        if type(self).call is not _FUNCTION_TOOL_CALL:  # a subclass with its own call(): run that, as BaseTool does
            return await super().acall(params, **kwargs)
        return await self._arun_function(self.parse_params(params))

    def run_validated(self, args: JSONObject, **kwargs: Any) -> Any:
        """Call the function with validated arguments, converted to the annotated types (an async function on
        the process's one background event loop). A subclass with its own `call` gets the JSON string."""
        if type(self).call is not _FUNCTION_TOOL_CALL:
            return super().run_validated(args, **kwargs)
        return self._run_function(args)

    async def arun_validated(self, args: JSONObject, **kwargs: Any) -> Any:
        """`run_validated` for asyncio: an async function is awaited here, a plain one runs in a worker thread."""
        if type(self).call is not _FUNCTION_TOOL_CALL:
            return await super().arun_validated(args, **kwargs)
        return await self._arun_function(args)

    def _run_function(self, args: JSONObject) -> Any:
        fn: Callable[..., Any] = self.fn  # called with the model's arguments by name
        result = fn(**self._typed(args))
        if inspect.isawaitable(result):
            from chatagent.utils.aio import run_coroutine  # asyncio: for async tools only

            result = run_coroutine(result)
        return result

    async def _arun_function(self, args: JSONObject) -> Any:
        if not self.is_async:
            import asyncio

            return await asyncio.to_thread(self._run_function, args)
        fn: Callable[..., Any] = self.fn  # an async function, called with the model's arguments by name
        return await fn(**self._typed(args))

    def _typed(self, args: JSONObject) -> JSONObject:
        """Validated arguments converted to the annotated types, without any the function does not take."""
        for key, convert in self._converters.items():
            if key in args:
                try:
                    args[key] = convert(args[key])
                except ToolArgumentError as e:
                    raise ToolArgumentError(f"'{key}': {e}") from None
                except (ValueError, TypeError) as e:
                    raise ToolArgumentError(f"'{key}' is not valid: {e}") from None
        if not self._accepts_kwargs:
            unknown = [k for k in args if k not in self._properties]
            if unknown:
                logger.warning("%s: ignoring arguments it does not take: %s", self.name, ", ".join(unknown))
                for key in unknown:
                    args.pop(key)
        return args

    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        return self.fn(*args, **kwargs)


# FunctionTool's own `call` (through a specialised alias, which gives the very same function, so pyright knows its
# type): a subclass that overrides `call` is run as BaseTool runs tools, its `call` getting the JSON string
_FUNCTION_TOOL_CALL = FunctionTool[..., Any].call


def function_tool_class(fn: Callable[..., Any], name: str | None = None) -> type[FunctionTool[..., Any]]:
    """A FunctionTool subclass for `fn`, so a function can be registered and built from a name plus cfg."""
    tool_name: str = name or fn.__name__

    class Tool(FunctionTool[..., Any]):
        def __init__(self, cfg: dict[str, Any] | None = None) -> None:
            super().__init__(fn, cfg, name=tool_name)

    Tool.__name__ = Tool.__qualname__ = "".join(part.title() for part in tool_name.split("_")) or "FunctionTool"
    Tool.__module__ = fn.__module__
    Tool.name = name or ""
    return Tool


@overload
def tool(
    fn: Callable[_P, _R], *, name: str | None = None, description: str | None = None, **cfg: Any
) -> FunctionTool[_P, _R]: ...


@overload
def tool(
    fn: None = None, *, name: str | None = None, description: str | None = None, **cfg: Any
) -> Callable[[Callable[_P, _R]], FunctionTool[_P, _R]]: ...


def tool(
    fn: Callable[_P, _R] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    **cfg: Any,
) -> FunctionTool[_P, _R] | Callable[[Callable[_P, _R]], FunctionTool[_P, _R]]:
    """Make a typed function a tool. Use bare (`@tool`) or with settings (`@tool(timeout=5, cache=True)`).

    Settings: `timeout`, `cache`, `max_calls`, `return_direct`, `requires_approval` (see BaseTool); `name` and
    `description` override the function's name and docstring.
    """
    unknown = set(cfg) - set(TOOL_SETTINGS)
    if unknown:
        raise TypeError(
            f"@tool got unknown settings {sorted(unknown)}; known: name, description, {', '.join(TOOL_SETTINGS)}"
        )

    def make(f: Callable[_P, _R]) -> FunctionTool[_P, _R]:
        if isinstance(f, FunctionTool):
            f = f.fn
        if not callable(f):
            raise TypeError(f"@tool decorates a function, got {type(f).__name__}")
        return FunctionTool(f, cfg, name=name, description=description)

    return make(fn) if fn is not None else make


__all__ = ["FunctionTool", "function_schema", "function_tool_class", "parse_docstring", "tool"]

"""The tool registry (names a `function_list` can use) and turning a `function_list` into tools.

@register_tool('get_weather')      # a BaseTool subclass, or a typed function
class GetWeather(BaseTool): ...

make_tools(['get_weather', my_function, {'mcpServers': {...}}])   # -> {name: tool}
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload

from chatagent.tools.arguments import JSONObject, is_json_object, unknown_tool_message
from chatagent.tools.from_function import function_tool_class, tool
from chatagent.tools.tool import BaseTool

if TYPE_CHECKING:
    from typing_extensions import TypeIs

_ToolClass = TypeVar("_ToolClass", bound="type[BaseTool]")
_T = TypeVar("_T")


class ToolRegistry(dict[str, type[BaseTool] | str]):
    """name -> tool class. An entry may be registered lazily as "module:Class" or "module" (a module that
    registers the name itself with @register_tool when imported): reading it (`[name]`, `get`, `values`,
    `items`) imports it, so the values a caller sees are always classes."""

    def __getitem__(self, name: str) -> type[BaseTool]:
        entry = super().__getitem__(name)
        return tool_class(name) if isinstance(entry, str) else entry

    # dict.get's three overloads (pyright checks that an override handles each)
    @overload
    def get(self, name: str, default: None = None) -> type[BaseTool] | None: ...
    @overload
    def get(self, name: str, default: type[BaseTool] | str) -> type[BaseTool] | str: ...
    @overload
    def get(self, name: str, default: _T) -> type[BaseTool] | _T: ...
    def get(self, name: str, default: object = None) -> object:
        return self[name] if super().__contains__(name) else default

    def values(self) -> list[type[BaseTool]]:  # pyright: ignore[reportIncompatibleMethodOverride] (a list, not a view)
        return [self[name] for name in self]

    def items(self) -> list[tuple[str, type[BaseTool]]]:  # pyright: ignore[reportIncompatibleMethodOverride] (a list)
        return [(name, self[name]) for name in self]

    def entry(self, name: str) -> type[BaseTool] | str | None:
        """The entry as registered, without importing anything: a class, a lazy string, or None."""
        return super().get(name)


TOOL_REGISTRY: ToolRegistry = ToolRegistry()

# A dict in function_list with one of these keys is a source of several tools, e.g. {'mcpServers': {...}}:
# key -> "module:function" (or the function itself) taking that dict and returning a list of BaseTools.
ToolSource = Callable[[JSONObject], Iterable[BaseTool]]
TOOL_SOURCES: dict[str, ToolSource | str] = {
    "mcpServers": "chatagent.tools.mcp:tools_from_config",
}


class ToolRegistration(Protocol):
    """What `register_tool(name)` returns: a decorator giving back the class (for a function, a tool class)."""

    @overload
    def __call__(self, obj: _ToolClass, /) -> _ToolClass: ...
    @overload
    def __call__(self, obj: Callable[..., Any], /) -> type[BaseTool]: ...


def register_tool(name: str, allow_overwrite: bool = False, *, overwrite: bool = False) -> ToolRegistration:
    """Register a tool class (or a typed function) under `name`, so function_list can refer to it.

    A second registration under the same name is an error unless `allow_overwrite=True` (Qwen-Agent's
    spelling) or `overwrite=True`. Returns the class (for a function: the generated tool class).
    """
    overwrite = overwrite or allow_overwrite

    @overload
    def decorator(obj: _ToolClass, /) -> _ToolClass: ...
    @overload
    def decorator(obj: Callable[..., Any], /) -> type[BaseTool]: ...
    def decorator(obj: object, /) -> type[BaseTool]:
        if _is_tool_class(obj):
            cls = obj
        elif callable(obj):
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


def _is_tool_class(obj: object) -> TypeIs[type[BaseTool]]:
    return isinstance(obj, type) and issubclass(obj, BaseTool)


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
        if not _is_tool_class(cls):
            raise ValueError(f"tool {name!r}: importing {module} did not register a tool class under that name")
        TOOL_REGISTRY[name] = cls
        return cls
    return entry


def _load(ref: ToolSource | str) -> ToolSource:
    if isinstance(ref, str):
        module, _, attr = ref.partition(":")
        return getattr(importlib.import_module(module), attr)
    return ref


def make_tools(function_list: Iterable[object] | None) -> dict[str, BaseTool]:
    """Tools by name from the forms `function_list` accepts.

    - a registered name: `'code_interpreter'`
    - a registered name with settings: `{'name': 'my_tool', 'timeout': 5, 'cache': True}`
    - a tool source: `{'mcpServers': {...}}` (see TOOL_SOURCES)
    - a BaseTool instance, or a BaseTool subclass (built with no cfg)
    - a plain (typed) function, made a tool as by `@tool`
    - an agent (anything with `as_tool()`): the tool it provides (see `chatagent.Agent.as_tool`)

    Two tools with the same name are an error.
    """
    tools: dict[str, BaseTool] = {}
    for item in function_list or ():
        for t in _make(item):
            if t.name in tools:
                raise ValueError(f"two tools are named {t.name!r} in function_list; tool names must be unique")
            tools[t.name] = t
    return tools


def _make(item: object) -> list[BaseTool]:
    if isinstance(item, BaseTool):
        return [item]
    if isinstance(item, str):
        return [tool_class(item)()]
    if is_json_object(item):
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
    if _is_tool_class(item):
        return [item()]
    as_tool = getattr(item, "as_tool", None)
    if as_tool is not None and not isinstance(item, type):  # an agent: it provides its own tool
        made = as_tool()
        if not isinstance(made, BaseTool):
            raise TypeError(f"{type(item).__name__}.as_tool() returned {type(made).__name__}, not a BaseTool")
        return [made]
    if callable(item):
        return [tool(item)]
    raise TypeError(f"function_list entries are names, dicts, tools, functions or agents; got {type(item).__name__}")


__all__ = ["TOOL_REGISTRY", "TOOL_SOURCES", "ToolRegistry", "make_tools", "register_tool", "tool_class"]

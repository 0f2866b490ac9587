"""CrewAI's tools: `BaseTool` (a pydantic model with `name`, `description`, `args_schema` and `_run`) and the
`@tool` decorator, each run by chatagent's one tool-call path as a chatagent tool (`as_chatagent_tool`).

    class Multiply(BaseTool):
        name: str = "Multiplication Tool"
        description: str = "Multiply two numbers."
        args_schema: type[BaseModel] = MultiplyInput     # optional: else from _run's signature

        def _run(self, a: int, b: int) -> int:
            return a * b

    @tool("Weather Lookup")
    def weather(city: str) -> str:
        \"\"\"The weather in a city.\"\"\"

The model sees the name sanitized as CrewAI does ("Multiplication Tool" -> `multiplication_tool`): servers
refuse names with spaces. `result_as_answer=True` makes the tool's result the agent's final answer;
`cache_function(args, result)` says whether a result may be reused for the same arguments (the agent's
`cache=True`); `max_usage_count` bounds the calls in a run.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import re
import unicodedata
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from chatagent.tools.arguments import JSONObject
from chatagent.tools.from_function import function_schema
from chatagent.tools.tool import BaseTool as ChatTool
from chatagent.tools.tool import pydantic_schema

_CAMEL_1 = re.compile(r"([A-Z]+)([A-Z][a-z])")
_CAMEL_2 = re.compile(r"([a-z\d])([A-Z])")
_DISALLOWED = re.compile(r"[^a-z0-9_]")
_UNDERSCORES = re.compile(r"_+")


def sanitize_tool_name(name: str, max_length: int = 64) -> str:
    """A tool name as OpenAI-style servers take it: ASCII, snake_case, [a-z0-9_], at most 64 characters."""
    name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    name = _CAMEL_2.sub(r"\1_\2", _CAMEL_1.sub(r"\1_\2", name)).lower()
    name = _UNDERSCORES.sub("_", _DISALLOWED.sub("_", name.replace("'", "").replace('"', ""))).strip("_")
    if len(name) > max_length:
        name = f"{name[: max_length - 9]}_{hashlib.sha256(name.encode()).hexdigest()[:8]}"
    return name or "tool"


class BaseTool(BaseModel):
    """A CrewAI tool (see the module docstring)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str
    description: str
    args_schema: Any = None
    result_as_answer: bool = False
    cache_function: Callable[..., bool] = Field(default=lambda _args=None, _result=None: True)
    max_usage_count: int | None = None
    current_usage_count: int = 0
    env_vars: list[Any] = Field(default_factory=lambda: [])
    _chat_tool: Any = PrivateAttr(default=None)

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement _run")

    async def _arun(self, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(self._run, *args, **kwargs)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """Run the tool with its arguments (CrewAI's `run`)."""
        self.current_usage_count += 1
        result = self._run(*args, **kwargs)
        if inspect.isawaitable(result):
            return asyncio.run(_awaited(result))
        return result

    async def arun(self, *args: Any, **kwargs: Any) -> Any:
        self.current_usage_count += 1
        if type(self)._arun is not BaseTool._arun or not inspect.iscoroutinefunction(self._run):
            return await self._arun(*args, **kwargs)
        return await self._run(*args, **kwargs)

    def parameters(self) -> JSONObject:
        """The JSON Schema of the arguments: `args_schema`'s, or `_run`'s signature's."""
        if isinstance(self.args_schema, type) and issubclass(self.args_schema, BaseModel):
            return pydantic_schema(self.args_schema)
        if isinstance(self.args_schema, dict):
            return self.args_schema
        return function_schema(self._schema_function())["parameters"]

    def _schema_function(self) -> Callable[..., Any]:
        return self._run

    def to_structured_tool(self) -> ChatTool:
        return as_chatagent_tool(self)


class Tool(BaseTool):
    """A tool made by `@tool` from a function."""

    func: Callable[..., Any]

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def _schema_function(self) -> Callable[..., Any]:
        return self.func


async def _awaited(value: Any) -> Any:
    return await value


def tool(*args: Any, result_as_answer: bool = False, max_usage_count: int | None = None) -> Any:
    """`@tool`, `@tool("Name")`: a CrewAI tool from a function with a docstring (its description)."""

    def make(fn: Callable[..., Any], name: str | None = None) -> Tool:
        doc = inspect.getdoc(fn)
        if not doc:
            raise ValueError("a @tool function needs a docstring: it is the tool's description")
        return Tool(name=name or fn.__name__, description=doc, func=fn, result_as_answer=result_as_answer,
                    max_usage_count=max_usage_count)  # fmt: skip

    if len(args) == 1 and callable(args[0]) and not isinstance(args[0], str):
        return make(args[0])
    if len(args) == 1 and isinstance(args[0], str):
        return lambda fn: make(fn, args[0])
    if not args:
        return make
    raise TypeError("@tool takes a function, or the tool's name")


class _Adapter(ChatTool):
    """A CrewAI tool as a chatagent tool: the model calls it by its sanitized name."""

    def __init__(self, crew_tool: BaseTool) -> None:
        self.name = sanitize_tool_name(crew_tool.name)
        self.description = f"{crew_tool.name}: {crew_tool.description}" if crew_tool.name != self.name \
            else crew_tool.description  # fmt: skip
        self.parameters = crew_tool.parameters()
        self.crew_tool = crew_tool
        settings: dict[str, Any] = {"return_direct": crew_tool.result_as_answer}
        if crew_tool.max_usage_count is not None:
            settings["max_calls"] = crew_tool.max_usage_count
        super().__init__(settings)

    def call(self, params: str | JSONObject, **kwargs: Any) -> Any:
        return _text(self.crew_tool.run(**self.parse_params(params)))

    async def acall(self, params: str | JSONObject, **kwargs: Any) -> Any:
        return _text(await self.crew_tool.arun(**self.parse_params(params)))


def _text(result: Any) -> Any:
    if isinstance(result, BaseModel):
        return result.model_dump_json()
    if isinstance(result, (str, int, float, bool)) or result is None:
        return str(result)
    try:
        return json.dumps(result, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(result)


def as_chatagent_tool(crew_tool: Any) -> Any:
    """A tool as chatagent's agents take it: a CrewAI tool adapted (once per tool), anything else as it is."""
    if isinstance(crew_tool, BaseTool):
        if crew_tool._chat_tool is None:
            crew_tool._chat_tool = _Adapter(crew_tool)
        return crew_tool._chat_tool
    return crew_tool


__all__ = ["BaseTool", "Tool", "as_chatagent_tool", "sanitize_tool_name", "tool"]

"""Declaring tools: BaseTool, the registry, @tool schemas from type hints and docstrings, function_list forms."""

from __future__ import annotations

import enum
import sys
from typing import Annotated, Literal, Optional

import pytest
from pydantic import BaseModel, Field

from chatagent.tools import TOOL_REGISTRY, TOOL_SOURCES, BaseTool, FunctionTool, make_tools, register_tool, tool
from chatagent.tools.arguments import ToolArgumentError
from chatagent.tools.from_function import function_schema, parse_docstring
from tests.support import processes


@pytest.fixture
def registry():
    """The registry, restored after the test."""
    saved = dict(TOOL_REGISTRY)
    yield TOOL_REGISTRY
    TOOL_REGISTRY.clear()
    TOOL_REGISTRY.update(saved)


class Unit(enum.Enum):
    C = "celsius"
    F = "fahrenheit"


class Address(BaseModel):
    street: str
    zip_code: str = Field(description="Postal code")


class Order(BaseModel):
    item: str
    quantity: int = 1
    ship_to: Address


def forecast(
    city: str,
    days: int = 3,
    unit: Unit = Unit.C,
    detail: Literal["short", "long"] = "short",
    tags: list[str] | None = None,
    ratio: float = 0.5,
    exact: bool = False,
    where: Optional[dict] = None,  # noqa: UP045 - Optional on purpose
    note: Annotated[str, "a note for the log"] = "",
) -> str:
    """Weather forecast for a city.

    Looks the city up first.

    Args:
        city: City name, e.g. "Paris".
        days (int): How many days,
            from 1 to 14.
        unit: Temperature unit.

    Returns:
        The forecast as text.
    """
    return f"{city}:{days}:{unit.value}:{detail}:{tags}:{ratio}:{exact}:{where}:{note}"


def test_schema_from_hints_and_docstring():
    f = function_schema(forecast)
    assert f["name"] == "forecast"
    assert f["description"] == "Weather forecast for a city.\n\nLooks the city up first."
    p = f["parameters"]
    assert p["type"] == "object" and p["required"] == ["city"]
    props = p["properties"]
    assert props["city"] == {"type": "string", "description": 'City name, e.g. "Paris".'}
    assert props["days"] == {"type": "integer", "default": 3, "description": "How many days, from 1 to 14."}
    assert props["unit"] == {
        "enum": ["celsius", "fahrenheit"],
        "type": "string",
        "default": "celsius",
        "description": "Temperature unit.",
    }
    assert props["detail"] == {"enum": ["short", "long"], "type": "string", "default": "short"}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert props["ratio"] == {"type": "number", "default": 0.5}
    assert props["exact"] == {"type": "boolean", "default": False}
    assert props["where"] == {"type": "object"}
    assert props["note"] == {"type": "string", "description": "a note for the log", "default": ""}


def test_tool_converts_arguments_to_the_annotated_types():
    t = tool(forecast)
    assert isinstance(t, FunctionTool) and t.name == "forecast"
    out = t.call('{"city": "Paris", "unit": "fahrenheit", "days": "2", "tags": ["a"], "where": {"x": 1}}')
    assert out == "Paris:2:fahrenheit:short:['a']:0.5:False:{'x': 1}:"
    # the decorated object still calls the function
    assert t("Rome", 1) == "Rome:1:celsius:short:None:0.5:False:None:"
    with pytest.raises(ToolArgumentError, match="'unit' must be one of 'celsius', 'fahrenheit'"):
        t.call({"city": "x", "unit": "kelvin"})


def test_pydantic_models_as_parameter_types():
    @tool
    def place_order(order: Order, priority: bool = False) -> str:
        """Place an order.

        Args:
            order: What to order and where to send it.
        """
        assert isinstance(order, Order) and isinstance(order.ship_to, Address)
        return f"{order.quantity} x {order.item} to {order.ship_to.zip_code}"

    params = place_order.function["parameters"]
    assert params["required"] == ["order"]
    assert "Address" in params["$defs"]
    assert params["properties"]["order"]["properties"]["ship_to"] == {"$ref": "#/$defs/Address"}
    args = {"order": {"item": "pen", "quantity": "2", "ship_to": {"street": "Main", "zip_code": 75001}}}
    assert place_order.call(args) == "2 x pen to 75001"
    with pytest.raises(ToolArgumentError, match=r"'order.ship_to.street' is required"):
        place_order.call({"order": {"item": "pen", "ship_to": {"zip_code": "1"}}})


def test_pydantic_model_as_tool_parameters():
    class SearchArgs(BaseModel):
        query: str
        limit: int = 5

    class Search(BaseTool):
        name = "search"
        description = "Search the web."
        parameters = SearchArgs

        def call(self, params, **kwargs):
            args = self.parse_params(params)
            return f"{args['query']}/{args['limit']}"

    s = Search()
    assert s.function["parameters"]["properties"]["limit"]["default"] == 5
    assert s.call('{"query": "cats", "limit": "7"}') == "cats/7"
    with pytest.raises(ToolArgumentError, match="'query': Field required"):
        s.parse_params("{}")


def test_async_function_tool():
    import asyncio

    @tool
    async def slow_add(a: int, b: int) -> int:
        """Add two numbers."""
        await asyncio.sleep(0)
        return a + b

    assert slow_add.call({"a": 1, "b": "2"}) == 3

    async def inside_a_loop():
        return slow_add.call({"a": 2, "b": 2})

    assert asyncio.run(inside_a_loop()) == 4


def test_tool_settings_and_overrides():
    @tool(name="weather", description="Weather now.", timeout=2, cache=True, max_calls=3, return_direct=True)
    def w(city: str) -> str:
        return city

    assert (w.name, w.description, w.timeout, w.cache, w.max_calls, w.return_direct) == (
        "weather",
        "Weather now.",
        2,
        True,
        3,
        True,
    )
    with pytest.raises(TypeError, match="unknown settings"):
        tool(w, retries=3)
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        tool(timeout=-1)(lambda: 1)


def test_docstring_styles():
    assert parse_docstring(":param city: The city.\n:param int days: Days\n    ahead.") == (
        "",
        {"city": "The city.", "days": "Days ahead."},
    )
    assert parse_docstring(None) == ("", {})
    desc, args = parse_docstring("Do it.\n\nArgs:\n    x: first\n    *args: rest\n")
    assert desc == "Do it." and args == {"x": "first", "args": "rest"}


def test_register_tool_and_duplicates(registry):
    @register_tool("echo_test")
    class Echo(BaseTool):
        description = "Echo."
        parameters = {"type": "object", "properties": {"text": {"type": "string"}}}

        def call(self, params, **kwargs):
            return self.parse_params(params)["text"]

    assert TOOL_REGISTRY["echo_test"] is Echo and Echo.name == "echo_test"
    with pytest.raises(ValueError, match="already registered"):

        @register_tool("echo_test")
        class Other(BaseTool):
            pass

    @register_tool("echo_test", overwrite=True)
    class Replacement(Echo):
        pass

    assert TOOL_REGISTRY["echo_test"] is Replacement

    @register_tool("shout_test")
    def shout(text: str) -> str:
        """Shout."""
        return text.upper()

    tools = make_tools(["echo_test", {"name": "shout_test", "timeout": 5, "cache": True}])
    assert list(tools) == ["echo_test", "shout_test"]
    assert tools["shout_test"].timeout == 5 and tools["shout_test"].cache is True
    assert tools["shout_test"].call('{"text": "hi"}') == "HI"
    assert tools["echo_test"].call({"text": "x"}) == "x"


def test_lazy_registration(registry, tmp_path, monkeypatch):
    module = tmp_path / "lazy_tool_mod.py"
    module.write_text(
        "from chatagent.tools import BaseTool, register_tool\n"
        "@register_tool('lazy_test')\n"
        "class Lazy(BaseTool):\n"
        "    def call(self, params, **kwargs):\n"
        "        return 'lazy'\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    TOOL_REGISTRY["lazy_test"] = "lazy_tool_mod"  # a module that registers the name when imported
    assert "lazy_tool_mod" not in sys.modules
    tools = make_tools(["lazy_test"])
    assert tools["lazy_test"].call({}) == "lazy"
    assert isinstance(TOOL_REGISTRY["lazy_test"], type)
    TOOL_REGISTRY["broken_test"] = "no_such_module_xyz:Tool"
    with pytest.raises(ValueError, match="cannot be loaded"):
        make_tools(["broken_test"])


def test_function_list_forms(registry):
    class Hello(BaseTool):
        name = "hello"

        def call(self, params, **kwargs):
            return "hi"

    def plain(x: int) -> int:
        """Double."""
        return 2 * x

    made = []

    def source(cfg):
        made.append(cfg)
        return [Hello({"description": "from a source"})]

    TOOL_SOURCES["testServers"] = source
    try:
        tools = make_tools([plain, Hello])
        assert list(tools) == ["plain", "hello"]
        assert tools["plain"].call({"x": "4"}) == 8
        from_source = make_tools([{"testServers": {"a": 1}}])
        assert from_source["hello"].description == "from a source" and made == [{"testServers": {"a": 1}}]
    finally:
        del TOOL_SOURCES["testServers"]
    with pytest.raises(ValueError, match="two tools are named 'hello'"):
        make_tools([Hello, Hello()])
    with pytest.raises(ValueError, match="there is no tool named 'helo'"):
        make_tools(["helo"])
    with pytest.raises(ValueError, match="needs a 'name'"):
        make_tools([{"timeout": 3}])
    with pytest.raises(TypeError):
        make_tools([42])


def test_schema_is_passed_through_as_given():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}

    class Strict(BaseTool):
        name = "strict"
        parameters = schema

        def call(self, params, **kwargs):
            return params

    assert Strict().function["parameters"] is schema


def test_import_costs():
    """What the imports load, counted in modules (not timed: the count does not change with the machine's load)."""
    code = (
        "import sys; before = len(sys.modules); import chatagent; a = len(sys.modules) - before; "
        "before = len(sys.modules); import chatagent.tools; b = len(sys.modules) - before; "
        "print(a, b, 'pydantic' in sys.modules, 'json5' in sys.modules, 'asyncio' in sys.modules)"
    )
    out = processes.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert int(out[0]) <= 12  # chatagent, its lazy exports and their helpers (8 today)
    assert (
        int(out[1]) <= 75
    )  # the tools package and the stdlib it needs (73 today: 53 before stop_reason, tool_origins)
    assert out[2:] == ["False", "False", "False"]  # pydantic, json5 and asyncio stay lazy


def test_qwen_agent_style_tool_ports_unchanged():
    """A tool written for Qwen-Agent: list-form parameters, json5-style checks, a dict result."""
    import dataclasses

    class ImageGen(BaseTool):
        name = "image_gen"
        description = "Draw a picture."
        parameters = [{"name": "prompt", "type": "string", "description": "What to draw", "required": True}]

        def call(self, params, **kwargs):
            params = self._verify_json_format_args(params)
            return {"image_url": f"https://img/{params['prompt']}"}

    t = ImageGen()
    assert t.function["parameters"] == {
        "type": "object",
        "properties": {"prompt": {"type": "string", "description": "What to draw"}},
        "required": ["prompt"],
    }
    assert t.call("{'prompt': 'cat'}") == {"image_url": "https://img/cat"}
    with pytest.raises(ToolArgumentError, match="'prompt' is required"):
        t.call("{}")

    from chatagent.tools.base import result_content

    @dataclasses.dataclass
    class Point:
        x: int

    class P(BaseModel):
        y: int

    assert result_content({"p": Point(1), "m": P(y=2), "s": {3}}) == '{"p": {"x": 1}, "m": {"y": 2}, "s": [3]}'
    assert result_content(None) == "" and result_content("x") == "x" and result_content(3) == "3"

"""One tool path: the model's arguments are parsed and validated once, by `prepare_call`, whatever the tool."""

from __future__ import annotations

import asyncio
import json

import pytest

from chatagent.tools import BaseTool, ToolArgumentError, tool
from chatagent.tools.calling import PreparedCall, aexecute, execute, prepare_call

pytestmark = pytest.mark.timeout(60)


class Counting(BaseTool):
    """A Qwen-Agent-style tool: `call` gets a JSON string and reads it with `parse_params`."""

    name = "lookup"
    parameters = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

    def __init__(self, cfg: dict | None = None) -> None:
        super().__init__(cfg)
        self.validated = 0
        self.seen: list = []

    def validate(self, args: dict) -> dict:
        self.validated += 1
        return super().validate(args)

    def call(self, params: str | dict, **kwargs) -> str:
        self.seen.append(params)
        args = self.parse_params(params)
        return f"n={args['n']!r}"


def _prepared(t: BaseTool, arguments: str) -> PreparedCall:
    call = prepare_call({t.name: t}, t.name, arguments)
    assert isinstance(call, PreparedCall)
    return call


def test_a_base_tool_validates_the_arguments_once_and_still_gets_a_json_string() -> None:
    t = Counting()
    outcome = execute(_prepared(t, '{"n": "3",}'))  # lenient JSON, a string for an integer
    assert outcome.content == "n=3"
    assert t.validated == 1
    assert type(t.seen[0]) is str and json.loads(t.seen[0]) == {"n": 3}  # the repaired, validated arguments


def test_the_same_once_on_the_event_loop() -> None:
    t = Counting()
    outcome = asyncio.run(aexecute(_prepared(t, '{"n": 4}')))
    assert outcome.content == "n=4"
    assert t.validated == 1


def test_a_direct_call_still_parses_and_validates() -> None:
    t = Counting()
    assert t.call('{"n": "5"}') == "n=5"
    assert t.validated == 1
    with pytest.raises(ToolArgumentError, match="'n'"):
        t.call('{"n": "five"}')


def test_another_tool_given_the_same_string_validates_it_against_its_own_schema() -> None:
    class Other(Counting):
        name = "other"
        parameters = {"type": "object", "properties": {"n": {"type": "string"}}, "required": ["n"]}

        def call(self, params: str | dict, **kwargs) -> str:
            return f"n={self.parse_params(params)['n']!r}"

    other = Other()

    class Forwarding(Counting):
        def call(self, params: str | dict, **kwargs) -> str:
            return other.call(params)

    assert execute(_prepared(Forwarding(), '{"n": 6}')).content == "n='6'"  # coerced by Other's schema
    assert other.validated == 1


def test_bad_arguments_keep_their_message() -> None:
    t = Counting()
    outcome = prepare_call({"lookup": t}, "lookup", '{"n": "x"}')
    assert not isinstance(outcome, PreparedCall)
    assert outcome.error == "bad_arguments"
    assert outcome.content == (
        "Error: invalid arguments for lookup: 'n' must be an integer, got 'x'. "
        "Call lookup again with corrected arguments."
    )


def test_a_function_tool_runs_on_an_event_loop_when_called_directly() -> None:
    @tool
    def add(a: int, b: int) -> int:
        return a + b

    assert asyncio.run(add.acall('{"a": 1, "b": "2"}')) == 3
    assert asyncio.run(add.acall({"a": 2, "b": 2})) == 4


def test_a_function_tool_subclass_with_its_own_call_validates_once() -> None:
    def double(n: int) -> int:
        return 2 * n

    class Logged(type(tool(double))):  # FunctionTool
        def __init__(self) -> None:
            super().__init__(double)
            self.validated = 0

        def validate(self, args: dict) -> dict:
            self.validated += 1
            return super().validate(args)

        def call(self, params: str | dict, **kwargs) -> int:
            return super().call(params, **kwargs)

    t = Logged()
    assert execute(_prepared(t, '{"n": "21"}')).content == "42"
    assert t.validated == 1
    assert asyncio.run(aexecute(_prepared(t, '{"n": 1}'))).content == "2"
    assert t.validated == 2
    assert asyncio.run(t.acall('{"n": 3}')) == 6

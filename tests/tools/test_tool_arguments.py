"""Arguments from the model: lenient parsing (golden cases of real malformed output), validation, errors."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatagent.tools.arguments import (
    MAX_REPAIR_CHARS,
    ToolArgumentError,
    parse_arguments,
    parse_json,
    repair_json,
    unknown_tool_message,
    validate_arguments,
)

# (what a model emitted, what it meant) -- shapes seen from real models
GOLDEN = [
    ('{"city": "Paris"}', {"city": "Paris"}),
    ("", {}),
    ("   ", {}),
    ("null", None),  # handled below: not an object
    ('```json\n{"city": "Paris"}\n```', {"city": "Paris"}),
    ('```\n{"city": "Paris"}\n```', {"city": "Paris"}),
    ('Here are the arguments:\n```json\n{"q": "x"}\n```\nLet me know.', {"q": "x"}),
    ('Sure! {"x": [1, 2,]} hope it helps', {"x": [1, 2]}),
    ("{'city': 'Paris', 'days': 3}", {"city": "Paris", "days": 3}),
    ("{'ok': True, 'missing': None, 'bad': False}", {"ok": True, "missing": None, "bad": False}),
    ('{"a": 1,}', {"a": 1}),
    ('{"a": [1, 2, 3,],}', {"a": [1, 2, 3]}),
    ('{"code": "print(1)\nprint(2)"}', {"code": "print(1)\nprint(2)"}),
    ('{"code": "for i in range(3):\n\tprint(i)"}', {"code": "for i in range(3):\n\tprint(i)"}),
    ('{"a": {"b": 1', {"a": {"b": 1}}),
    ('{"query": "weather in Par', {"query": "weather in Par"}),
    ('{"a": 1, "b":', {"a": 1, "b": None}),
    ('{"a": [1, 2', {"a": [1, 2]}),
    ('"{\\"city\\": \\"Paris\\"}"', {"city": "Paris"}),
    ('{city: "Paris", days: 2}', {"city": "Paris", "days": 2}),
    ("{city: Paris}", {"city": "Paris"}),
    ('{"q": "say "hi" now"}', {"q": 'say "hi" now'}),
    ("{'s': 'it\\'s'}", {"s": "it's"}),
    ("{'s': \"it's\"}", {"s": "it's"}),
    ('{"path": "C:\\Users\\me"}', {"path": "C:\\Users\\me"}),
    ('{"a": .5, "b": +3, "c": 1.}', {"a": 0.5, "b": 3, "c": 1.0}),
    ('{"a": 1 "b": 2}', {"a": 1, "b": 2}),
    ('{"a": 1} trailing words {"b": 2}', {"a": 1}),
    ('{\n  // the city\n  "city": "Paris" /* fr */\n}', {"city": "Paris"}),
    ('{"text": "中文，没问题"}', {"text": "中文，没问题"}),
    ("{'城市': '北京'}", {"城市": "北京"}),
    ('{"n": 007}', {"n": 7}),
    ('{"nested": {"deep": [{"k": "v",},],},}', {"nested": {"deep": [{"k": "v"}]}}),
    ('<tool_args>{"a": 1}</tool_args>', {"a": 1}),
    ("{'a': 'multi\nline'}", {"a": "multi\nline"}),
]


@pytest.mark.parametrize(("raw", "expected"), GOLDEN)
def test_golden_malformed_arguments(raw, expected):
    if expected is None:
        with pytest.raises(ToolArgumentError, match="JSON object"):
            parse_arguments(raw)
        return
    assert parse_arguments(raw) == expected


def test_dict_passes_through():
    d = {"a": 1}
    assert parse_arguments(d) is d
    assert parse_arguments(None) == {}


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("[1, 2]", "got a list"),
        ('"just text"', "got a string"),
        ("42", "got a number"),
        ("no json here at all", "not valid JSON"),
        ("}}", "not valid JSON"),
    ],
)
def test_unusable_arguments_are_readable(raw, problem):
    with pytest.raises(ToolArgumentError) as e:
        parse_arguments(raw)
    assert problem in str(e.value)
    assert "Traceback" not in str(e.value)


def test_parse_json_values():
    assert parse_json("[1, 2,]") == [1, 2]
    assert parse_json("```json\n[true]\n```") == [True]
    assert parse_json("") is None


@pytest.mark.timeout(120)
def test_repair_is_linear_on_long_input():
    """An unclosed string of 200,000 characters (the longest repaired) is repaired: in about a second on a quiet
    machine; repair is pure Python, so a quadratic one (some 10^10 steps) would pass the deadline by far."""
    text = '{"a": "' + "x" * 199_990  # an unclosed string
    assert len(text) <= MAX_REPAIR_CHARS
    assert parse_arguments(text) == {"a": "x" * 199_990}


def test_repair_json_output_is_json():
    import json

    assert json.loads(repair_json("{'a': [1, 2,], b: None}")) == {"a": [1, 2], "b": None}


SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "precise": {"type": "boolean"},
        "ratio": {"type": "number"},
        "where": {
            "type": "object",
            "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
            "required": ["lat", "lon"],
        },
    },
    "required": ["city"],
}


def test_validation_coerces_safely_and_fills_defaults():
    got = validate_arguments(
        {"city": "Paris", "days": "3", "precise": "true", "ratio": "0.5", "tags": '["a", "b"]', "unit": "CELSIUS"},
        SCHEMA,
    )
    assert got == {
        "city": "Paris",
        "days": 3,
        "precise": True,
        "ratio": 0.5,
        "tags": ["a", "b"],
        "unit": "celsius",
    }
    assert validate_arguments({"city": 75001}, SCHEMA)["city"] == "75001"
    assert validate_arguments({"city": "x", "days": 2.0}, SCHEMA)["days"] == 2
    # null for an optional argument means "left out": the default applies
    assert validate_arguments({"city": "x", "unit": None}, SCHEMA)["unit"] == "celsius"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "'city' is required"),
        ({"city": "x", "days": "three"}, "'days' must be an integer, got 'three'"),
        ({"city": "x", "days": 30}, "'days' must be <= 14, got 30"),
        ({"city": "x", "unit": "kelvin"}, "'unit' must be one of 'celsius', 'fahrenheit', got 'kelvin'"),
        ({"city": "x", "tags": ["a", 3.5, ["no"]]}, "'tags[2]' must be a string, got a list"),
        ({"city": "x", "where": {"lat": 1}}, "'where.lon' is required"),
        ({"city": "x", "where": {"lat": "north", "lon": 2}}, "'where.lat' must be a number, got 'north'"),
        ({"city": "x", "precise": "maybe"}, "'precise' must be a boolean (true or false), got 'maybe'"),
        ({"city": True}, "'city' must be a string, got true"),
        ({"city": "x", "days": 2.5}, "'days' must be an integer, got 2.5"),
    ],
)
def test_validation_errors_name_the_field(args, message):
    with pytest.raises(ToolArgumentError) as e:
        validate_arguments(args, SCHEMA)
    assert message in str(e.value)


def test_several_errors_reported_together():
    with pytest.raises(ToolArgumentError) as e:
        validate_arguments({"days": "x", "unit": "k"}, SCHEMA)
    text = str(e.value)
    assert "'city' is required" in text and "'days'" in text and "'unit'" in text


def test_schemas_are_taken_as_given():
    # no "required", additionalProperties given, unknown keywords: all fine
    assert validate_arguments({"a": 1, "z": 2}, {"type": "object", "properties": {"a": {"type": "integer"}}}) == {
        "a": 1,
        "z": 2,
    }
    closed = {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False}
    with pytest.raises(ToolArgumentError, match="'z' is not an accepted argument"):
        validate_arguments({"a": 1, "z": 2}, closed)
    typed_extra = {"type": "object", "additionalProperties": {"type": "integer"}}
    assert validate_arguments({"k": "5"}, typed_extra) == {"k": 5}
    assert validate_arguments({"x": 1}, {}) == {"x": 1}
    assert validate_arguments({"x": 1}, {"type": "object", "x-vendor": True}) == {"x": 1}


def test_refs_anyof_and_nullable():
    schema = {
        "type": "object",
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}},
        "properties": {
            "p": {"$ref": "#/$defs/Point"},
            "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "either": {"anyOf": [{"type": "integer"}, {"type": "string", "enum": ["auto"]}]},
            "many": {"type": ["integer", "null"]},
        },
        "required": ["p", "maybe"],
    }
    got = validate_arguments({"p": {"x": "4"}, "maybe": None, "either": "auto", "many": "2"}, schema)
    assert got == {"p": {"x": 4}, "maybe": None, "either": "auto", "many": 2}
    with pytest.raises(ToolArgumentError, match="'p.x' is required"):
        validate_arguments({"p": {}, "maybe": 1}, schema)
    with pytest.raises(ToolArgumentError, match="'either' must be an integer or one of 'auto'"):
        validate_arguments({"p": {"x": 1}, "maybe": 1, "either": "manual"}, schema)


def test_deep_nesting_is_an_argument_error():
    deep = "[" * 5000 + "]" * 5000
    with pytest.raises(ToolArgumentError):
        validate_arguments(parse_arguments('{"a": ' + deep + "}"), {"type": "object"})
    with pytest.raises(ToolArgumentError):
        parse_arguments('{"a": ' + "[" * 5000)


def test_unknown_tool_message_suggests_the_closest_name():
    msg = unknown_tool_message("get_wether", ["get_weather", "search", "calculator"])
    assert "'get_wether'" in msg and "Did you mean 'get_weather'?" in msg
    assert "Available tools: calculator, get_weather, search." in msg
    assert "Did you mean" not in unknown_tool_message("zzz", ["get_weather"])
    assert "no tools are available" in unknown_tool_message("x", [])


# ---- properties: the parser only ever raises its own error, and never hangs -------------------------------

_json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
_fragments = st.sampled_from(
    ['{', '}', '[', ']', '"', "'", ",", ":", "True", "None", "\\", "\n", "```json", "```", "//", "/*", "#",
     " ", "a", "1", "-", ".", "e", "\\u12", "中"]
)  # fmt: skip


@settings(max_examples=300, deadline=1000, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=200))
def test_parser_never_raises_anything_else_on_any_text(text):
    try:
        result = parse_arguments(text)
    except ToolArgumentError:
        return
    assert isinstance(result, dict)


@settings(max_examples=300, deadline=1000, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_fragments, max_size=60).map("".join))
def test_parser_never_raises_anything_else_on_json_shaped_noise(text):
    try:
        result = parse_arguments(text)
    except ToolArgumentError:
        return
    assert isinstance(result, dict)


@settings(max_examples=200, deadline=1000)
@given(st.dictionaries(st.text(max_size=8), _json_like, max_size=5), st.integers(min_value=0, max_value=200))
def test_truncated_valid_json_never_raises_anything_else(value, cut):
    import json

    text = json.dumps(value, ensure_ascii=False)
    assert parse_arguments(text) == value
    try:
        parse_arguments(text[: cut % (len(text) + 1)])
    except ToolArgumentError:
        pass


@settings(max_examples=200, deadline=1000)
@given(_json_like, st.sampled_from([SCHEMA, SCHEMA["properties"]["where"], {"type": "array"}, {}]))
def test_validator_never_raises_anything_else(value, schema):
    try:
        validate_arguments({"city": value, "where": value, "days": value}, schema)
    except ToolArgumentError:
        pass

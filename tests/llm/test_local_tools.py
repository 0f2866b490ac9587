"""The embedded model's tools by constrained decoding (chatagent.llm.local.tools), without the model: the request
(tools in the system message, calls and results as text, the grammar's schema) and the reply read as it streams
(an answer's text decoded piece by piece, split at every character, escapes and all; a call when complete). The
real llama.cpp runtime is in tests/e2e/test_local_model_tools.py."""

from __future__ import annotations

import json

import pytest

from chatagent import ModelServiceError
from chatagent.llm.local.tools import ConstrainedReply, constrained_request
from chatagent.llm.settings import ToolChoice
from chatagent.schema import Message
from chatagent.schema.fragment import Fragment
from chatagent.schema.stream import collect

WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "title": "City"}}, "required": ["city"]},
}
PRICE = {"name": "price", "description": "A price.", "parameters": {"type": "object", "properties": {"item": {}}}}


def read(raw: str, cut: int | None = None) -> tuple[list, list]:
    """(the fragments streamed, the reply) of `raw` split at `cut` (every character when None)."""
    pieces = [raw[:cut], raw[cut:]] if cut is not None else list(raw)
    stream = [[Fragment("assistant", p, index=0)] for p in pieces if p]
    out = list(ConstrainedReply().run(stream))
    return out, collect(out)


@pytest.mark.parametrize(
    "raw",
    [
        '{"answer": "Paris is sunny."}',
        '{ "answer" : "Quotes \\"and\\" a \\\\ slash,\\nnew line, caf\\u00e9, \\ud83d\\ude00 emoji" }',
        '{\n  "answer": "pretty\\tprinted"\n}',
    ],
)
def test_an_answer_streams_as_its_decoded_text_however_it_is_split(raw: str) -> None:
    want = json.loads(raw)["answer"]
    for cut in [None, *range(1, len(raw))]:
        parts, reply = read(raw, cut)
        assert [m.text for m in reply] == [want], cut
        assert all(not f.function_call for p in parts for f in p)
    parts, _ = read(raw)
    assert len([p for p in parts if p and p[0].text]) > 3  # piece by piece, not at the end


def test_a_call_comes_whole_at_the_end() -> None:
    raw = '{"tool": "get_weather", "arguments": {"city": "Zürich"}}'
    for cut in [None, 5, 30]:
        parts, reply = read(raw, cut)
        assert len(reply) == 1 and reply[0].function_call is not None
        assert (reply[0].function_call.name, json.loads(reply[0].function_call.arguments)) == (
            "get_weather", {"city": "Zürich"},
        )  # fmt: skip
        assert reply[0].extra["function_id"].startswith("call_")
        assert not any(f.text for p in parts for f in p)


def test_a_call_cut_by_the_token_limit_is_an_error_and_an_answer_keeps_its_text() -> None:
    cut = [[Fragment("assistant", '{"tool": "get_weather", "argu', index=0)],
           [Fragment("assistant", "", index=0, extra={"stop_reason": "length"})]]  # fmt: skip
    with pytest.raises(ModelServiceError, match="cut off"):
        list(ConstrainedReply().run(cut))
    half = [[Fragment("assistant", '{"answer": "The long ans', index=0)],
            [Fragment("assistant", "", index=0, extra={"stop_reason": "length"})]]  # fmt: skip
    reply = collect(ConstrainedReply().run(half))
    assert reply[0].text == "The long ans" and reply[0].extra == {"stop_reason": "length"}


def test_the_request_describes_the_tools_and_constrains_the_reply() -> None:
    messages = [Message("system", "Be brief."), Message("user", "Weather in Paris?")]
    sent, grammar = constrained_request(messages, [WEATHER, PRICE], ToolChoice())
    assert sent[0].role == "system" and sent[0].text.startswith("Be brief.") and "get_weather" in sent[0].text
    options = grammar["json_schema"]["anyOf"]
    assert options[0]["properties"] == {"answer": {"type": "string"}}
    assert options[1]["properties"]["tool"] == {"const": "get_weather"}
    assert options[1]["properties"]["arguments"] == {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    }  # fmt: skip  ('title' dropped: llama.cpp's converter takes the grammar keywords only)
    assert len(options) == 3
    _, required = constrained_request(messages, [WEATHER, PRICE], ToolChoice("required"))
    assert [o["properties"].get("tool") for o in required["json_schema"]["anyOf"]] == [
        {"const": "get_weather"}, {"const": "price"},
    ]  # fmt: skip
    _, named = constrained_request(messages, [WEATHER, PRICE], ToolChoice("price"))
    assert named["json_schema"]["properties"]["tool"] == {"const": "price"}
    _, none = constrained_request(messages, [WEATHER], ToolChoice("none"))
    assert none["json_schema"]["properties"] == {"answer": {"type": "string"}}


def test_calls_and_results_are_written_as_text_and_a_result_is_answered() -> None:
    from chatagent.schema import FunctionCall

    messages = [
        Message("user", "Weather in Paris?"),
        Message("assistant", "", function_call=FunctionCall("get_weather", '{"city": "Paris"}')),
        Message("function", "Sunny, 21 C", name="get_weather"),
    ]
    sent, grammar = constrained_request(messages, [WEATHER], ToolChoice())
    assert [m.role for m in sent] == ["system", "user", "assistant", "user"]
    assert json.loads(sent[2].text) == {"tool": "get_weather", "arguments": {"city": "Paris"}}
    assert sent[3].text == "Result of get_weather: Sunny, 21 C"
    assert grammar["json_schema"]["properties"] == {"answer": {"type": "string"}}  # one round of calls

"""Streaming structured output: with `response_format`, each yield's last message carries the object parsed so far
in `extra['parsed']` (a dict validated leniently while it streams, the validated object at the end)."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from chatagent import BasicAgent, FnCallAgent, Reply, ScriptedLLM, tool, tool_call
from chatagent.plugins.structured import lenient
from chatagent.utils.jsonlenient import parse_partial

USER = [{"role": "user", "content": "Tell me about Paris."}]
ANSWER = '{"name": "Paris", "population": 2100000, "tags": ["capital", "river"]}'


class City(BaseModel):
    name: str
    population: int
    tags: list[str] = []


def parsed_in(yields: list[list[dict]]) -> list[dict]:
    """The objects the yields carried, each once (a cumulative yield repeats it until it changes)."""
    out: list[dict] = []
    for y in yields:
        found = (y[-1].get("extra") or {}).get("parsed") if y else None
        if found is not None and (not out or out[-1] != found):
            out.append(found)
    return out


def test_the_object_fills_in_field_by_field_and_validates_at_the_end() -> None:
    llm = ScriptedLLM([Reply(text=ANSWER, chunk_size=6)])
    yields = list(BasicAgent(llm=llm).run(USER, response_format=City))
    seen = parsed_in(yields)
    assert len(seen) > 5
    assert seen[0] == {"name": "Pa"} or seen[0] == {} or "name" in seen[0]
    assert {"name": "Paris"} in seen and {"name": "Paris", "population": 2100000} in seen
    assert {"name": "Paris", "population": 2100000, "tags": ["capital"]} in seen
    for earlier, later in zip(seen, seen[1:], strict=False):
        assert set(earlier) <= set(later)  # fields only ever appear
    final = yields[-1][-1]["extra"]
    assert final["parsed"] == {"name": "Paris", "population": 2100000, "tags": ["capital", "river"]}
    assert final["response_format"]["valid"] is True


def test_deltas_and_arun_carry_the_same_objects() -> None:
    deltas = list(BasicAgent(llm=ScriptedLLM([Reply(text=ANSWER, chunk_size=6)])).run(
        USER, response_format=City, delta_stream=True))  # fmt: skip
    whole = list(BasicAgent(llm=ScriptedLLM([Reply(text=ANSWER, chunk_size=6)])).run(USER, response_format=City))

    async def collect() -> list:
        bot = BasicAgent(llm=ScriptedLLM([Reply(text=ANSWER, chunk_size=6)]))
        return [y async for y in bot.arun(USER, response_format=City)]

    assert parsed_in(deltas) == parsed_in(whole) == parsed_in(asyncio.run(collect()))


def test_a_retried_answer_starts_its_object_over() -> None:
    llm = ScriptedLLM([Reply(text='{"name": "Paris"}', chunk_size=4), Reply(text=ANSWER, chunk_size=9)])
    yields = list(BasicAgent(llm=llm).run(USER, response_format=City))
    seen = parsed_in(yields)
    first_retry = next(i for i, y in enumerate(yields) if y[-1]["content"].startswith('{"name": "Paris", "p'))
    assert {"name": "Paris"} in seen
    assert yields[-1][-1]["extra"]["response_format"] == {
        "name": "City",
        "attempts": 2,
        "path": "prompt",
        "valid": True,
    }
    assert first_retry > 0 and yields[-1][-1]["extra"]["parsed"]["tags"] == ["capital", "river"]


def test_prose_and_tool_calls_get_no_object_and_an_invalid_end_keeps_none() -> None:
    @tool
    def census(city: str) -> int:
        """The population of a city."""
        return 2100000

    llm = ScriptedLLM([Reply(text="Let me look.", function_calls=[tool_call("census", {"city": "Paris"})]), ANSWER])
    yields = list(FnCallAgent(llm=llm, function_list=[census]).run(USER, response_format=City))
    first_calls = [y for y in yields if y[-1].get("function_call")]
    assert first_calls and all("parsed" not in (y[-1].get("extra") or {}) for y in first_calls)
    assert yields[-1][-1]["extra"]["parsed"]["population"] == 2100000
    bad = list(BasicAgent(llm=ScriptedLLM(['{"name": "Paris", "population": "many"}'] * 3)).run(
        USER, response_format=City))  # fmt: skip
    end = bad[-1][-1]["extra"]
    assert end["response_format"]["valid"] is False and end["parsed"] == {"name": "Paris"}  # "many" is no integer


def test_a_json_schema_dict_and_lenient_validation() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "ok": {"type": "boolean"},
              "inner": {"type": "object", "properties": {"s": {"type": "string"}}}}, "required": ["n"]}  # fmt: skip
    assert lenient({"n": 1.5, "ok": 1, "inner": {"s": 3, "t": "x"}, "other": 2}, schema) == {"inner": {}}
    assert lenient({"n": 1, "ok": True, "inner": {"s": "a"}}, schema) == {"n": 1, "ok": True, "inner": {"s": "a"}}
    assert lenient({"n": True}, schema) == {}  # a boolean is not an integer here
    assert lenient(parse_partial('{"n": 4, "ok": tr'), schema) == {"n": 4}  # 'tr' is not a boolean yet
    assert parse_partial('```json\n{"n": 4, "inner": {"s": "ab') == {"n": 4, "inner": {"s": "ab"}}
    assert parse_partial("not json at all") is None or not isinstance(parse_partial("not json at all"), dict)
    yields = list(BasicAgent(llm=ScriptedLLM([Reply(text='{"n": 7, "ok": true}', chunk_size=3)])).run(
        USER, response_format=schema))  # fmt: skip
    assert yields[-1][-1]["extra"]["parsed"] == {"n": 7, "ok": True}
    assert {"n": 7} in parsed_in(yields)

"""Structured output: run_nonstream(messages, response_format=Model) returns a validated instance."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, field_validator

from chatagent import BasicAgent, FnCallAgent, ScriptedLLM, StructuredOutputError, tool, tool_call
from chatagent.llm.prepare import untrusted

USER = [{"role": "user", "content": "Tell me about Paris."}]


class City(BaseModel):
    name: str
    population: int
    country: str = "unknown"

    @field_validator("population")
    @classmethod
    def positive(cls, v: int) -> int:
        if v <= 0:
            raise ValueError("must be positive")
        return v


def test_valid_answer_first_time():
    llm = ScriptedLLM(['```json\n{"name": "Paris", "population": "2100000", "country": "France"}\n```'])
    city = BasicAgent(llm=llm).run_nonstream(USER, response_format=City)
    assert city == City(name="Paris", population=2100000, country="France")
    system = llm.calls[0].messages[0]
    assert system.role == "system" and '"population"' in system.content and "JSON" in system.content


def test_invalid_answer_is_sent_back_then_fixed():
    llm = ScriptedLLM(
        [
            '{"name": "Paris", "population": -1}',
            "Paris has 2.1 million people.",
            '{"name": "Paris", "population": 2100000}',
        ]
    )
    city = BasicAgent(llm=llm, system_message="Be brief.").run_nonstream(USER, response_format=City, retries=2)
    assert city.population == 2100000
    retry = llm.calls[1].messages
    assert retry[-2].content == '{"name": "Paris", "population": -1}'
    assert retry[-1].role == "user" and "'population': Value error, must be positive" in retry[-1].content
    assert "not valid JSON" in llm.calls[2].messages[-1].content
    assert llm.calls[0].messages[0].content.startswith("Be brief.")


def test_gives_up_with_a_typed_error():
    llm = ScriptedLLM(['{"name": "Paris"}'] * 2)
    with pytest.raises(StructuredOutputError) as e:
        BasicAgent(llm=llm).run_nonstream(USER, response_format=City, retries=1)
    assert "no valid City after 2 attempts" in str(e.value)
    assert "'population': Field required" in e.value.error
    assert e.value.text == '{"name": "Paris"}'


def test_agent_level_response_format_with_tools():
    @tool
    def population(city: str) -> int:
        """Population of a city."""
        return 2_100_000

    llm = ScriptedLLM([tool_call("population", {"city": "Paris"}), '{"name": "Paris", "population": 2100000}'])
    bot = FnCallAgent(llm=llm, function_list=[population], response_format=City)
    assert bot.run_nonstream(USER) == City(name="Paris", population=2100000)
    assert llm.calls[1].messages[-1].content == untrusted("2100000", "tool population")


def test_json_schema_dict_and_server_json_mode():
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], "title": "Check"}
    llm = ScriptedLLM(["{'ok': 'true'}"])
    out = BasicAgent(llm=llm).run_nonstream(USER, response_format=schema, json_mode="json_schema")
    assert out == {"ok": True}
    sent = llm.calls[0].generate_cfg["response_format"]
    assert sent == {"type": "json_schema", "json_schema": {"name": "Check", "schema": schema}}
    llm = ScriptedLLM(['{"ok": true}'])
    BasicAgent(llm=llm).run_nonstream(USER, response_format=schema, json_mode="json_object")
    assert llm.calls[0].generate_cfg["response_format"] == {"type": "json_object"}


def test_a_model_that_writes_by_a_schema_is_always_sent_it_but_not_with_tools():
    """Issue 43.9: the embedded model (`schema_grammar`: llama.cpp samples by a JSON schema) gets the schema as
    its grammar without json_mode; a call offering tools does not (their own grammar decides); other models do not."""

    class GrammarLLM(ScriptedLLM):
        schema_grammar = True

    @tool
    def population(city: str) -> int:
        """Population of a city."""
        return 2_100_000

    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], "title": "Check"}
    want = {"type": "json_schema", "json_schema": {"name": "Check", "schema": schema}}
    llm = GrammarLLM(['{"ok": true}'])
    assert BasicAgent(llm=llm).run_nonstream(USER, response_format=schema) == {"ok": True}
    assert llm.calls[0].generate_cfg["response_format"] == want
    llm = GrammarLLM([tool_call("population", {"city": "Paris"}), '{"ok": true}'])
    FnCallAgent(llm=llm, function_list=[population]).run_nonstream(USER, response_format=schema)
    assert all("response_format" not in c.generate_cfg for c in llm.calls)
    llm = ScriptedLLM(['{"ok": true}'])
    BasicAgent(llm=llm).run_nonstream(USER, response_format=schema)
    assert "response_format" not in llm.calls[0].generate_cfg


def test_plain_runs_are_unaffected():
    llm = ScriptedLLM(["hello"])
    assert BasicAgent(llm=llm).run_nonstream(USER)[-1]["content"] == "hello"
    assert llm.calls[0].messages[0].role == "user"

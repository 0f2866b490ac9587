"""The OpenAI-compatible backend natively: a structured answer's schema sent as a strict json_schema `response_format`
(OpenAI, vLLM and SGLang enforce it), the prompt-and-validate path for a server that refuses it (detected once and
remembered per server), which path ran in `extra['response_format']`, and the prompt cache's reads
(`prompt_tokens_details.cached_tokens`) in `Usage` and its cost. Against the loopback OpenAI-compatible server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from chatagent import BasicAgent
from chatagent.llm.openai import request as openai_request
from tests.support.openai_server import OpenAIServer, Reply

ANSWER = '{"name": "Tokyo", "population": 37400000}'
USER = [{"role": "user", "content": "The largest city?"}]


class City(BaseModel):
    name: str
    population: int


@pytest.fixture(autouse=True)
def no_servers_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(openai_request, "_NO_SCHEMA", set())  # the refusals this test module's server makes


def _bot(server: OpenAIServer, model: str = "test-model") -> BasicAgent:
    return BasicAgent(llm={"model": model, "model_server": server.base_url, "api_key": "k"}, response_format=City)


def test_the_schema_goes_as_a_strict_json_schema_and_the_answer_says_native(openai_server: OpenAIServer) -> None:
    openai_server.add(ANSWER)
    last = list(_bot(openai_server).run(USER))[-1]
    sent = openai_server.chat_requests[0].json["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["strict"] is True
    assert sent["json_schema"]["name"] == "City" and set(sent["json_schema"]["schema"]["properties"]) == {
        "name", "population",
    }  # fmt: skip
    mark = last[-1]["extra"]["response_format"]
    assert mark["valid"] is True and mark["path"] == "native"
    assert last[-1]["extra"]["parsed"] == {"name": "Tokyo", "population": 37400000}


def test_a_whole_completion_is_marked_too(openai_server: OpenAIServer) -> None:
    from chatagent import get_chat_model

    fmt = {"type": "json_schema", "json_schema": {"name": "City", "schema": City.model_json_schema(), "strict": True}}
    llm = get_chat_model({"model": "test-model", "model_server": openai_server.base_url, "api_key": "k"})
    openai_server.add(ANSWER, ANSWER)
    [whole] = llm.chat(USER, stream=False, extra_generate_cfg={"response_format": fmt})
    assert whole["extra"] == {"structured_output": "native"} and whole["content"] == ANSWER
    [plain] = llm.chat(USER, stream=False)
    assert not plain.get("extra") and "response_format" not in openai_server.chat_requests[1].json


def test_a_server_that_refuses_the_schema_gets_the_prompt_alone_and_is_remembered(
    openai_server: OpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    refused = Reply(status=400, error={"message": "response_format 'json_schema' is not supported by this model"})
    openai_server.add(refused, ANSWER, ANSWER)
    bot = _bot(openai_server)
    first = bot.run_nonstream(USER)
    assert first == City(name="Tokyo", population=37400000)
    asked = [r.json for r in openai_server.chat_requests]
    assert "response_format" in asked[0] and "response_format" not in asked[1]  # asked again without it
    assert "rejects a JSON-schema response_format" in caplog.text  # said, not silent
    last = list(bot.run(USER))[-1]
    assert last[-1]["extra"]["response_format"]["path"] == "prompt"  # the prompt alone, validated
    assert len(openai_server.chat_requests) == 3 and "response_format" not in openai_server.chat_requests[2].json
    system = openai_server.chat_requests[2].json["messages"][0]["content"]
    assert "JSON Schema" in system and "population" in system  # the prompt still asks for the schema


def test_another_400_is_the_requests_error_not_a_refused_schema(openai_server: OpenAIServer) -> None:
    from chatagent import ModelServiceError

    openai_server.add(Reply(status=400, error={"message": "temperature must be at most 2"}))
    with pytest.raises(ModelServiceError) as e:
        _bot(openai_server).run_nonstream(USER)
    assert e.value.code == 400 and len(openai_server.chat_requests) == 1
    assert not openai_request._NO_SCHEMA


def test_the_prompt_caches_reads_show_in_usage_and_cost_less(openai_server: OpenAIServer) -> None:
    def usage(cached: int) -> dict[str, Any]:
        return {"prompt_tokens": 1000, "completion_tokens": 10, "prompt_tokens_details": {"cached_tokens": cached}}

    cfg = {"model": "gpt-4o-mini", "model_server": openai_server.base_url, "api_key": "k"}
    costs = []
    for cached in (0, 800):
        openai_server.add(Reply(text="Tokyo.", usage=usage(cached)))
        run = BasicAgent(llm=cfg).run(USER)
        list(run)
        assert run.usage.prompt_tokens == 1000 and run.usage.cache_read_tokens == cached
        costs.append(run.usage.cost)
    # gpt-4o-mini: $0.15 per million input tokens, $0.075 cached, $0.60 output
    assert costs[0] == pytest.approx((1000 * 0.15 + 10 * 0.6) / 1e6)
    assert costs[1] == pytest.approx((200 * 0.15 + 800 * 0.075 + 10 * 0.6) / 1e6)


def test_a_cached_count_that_cannot_be_right_is_not_believed(openai_server: OpenAIServer) -> None:
    cfg = {"model": "gpt-4o-mini", "model_server": openai_server.base_url, "api_key": "k"}
    for cached, counted in ((5000, 1000), (-3, 0), ("many", 0)):
        details = {"prompt_tokens": 1000, "completion_tokens": 10, "prompt_tokens_details": {"cached_tokens": cached}}
        openai_server.add(Reply(text="Tokyo.", usage=details))
        run = BasicAgent(llm=cfg).run(USER)
        list(run)
        assert run.usage.cache_read_tokens == counted, json.dumps(details)

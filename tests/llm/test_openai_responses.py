"""The Responses API backend (`{'model_type': 'oai', 'api': 'responses'}`) against the loopback Responses API
(tests/support/responses_server.py): streaming, tools, reasoning items carried across turns (stateless, or on the
server with previous_response_id), structured output as text.format, errors; the openai SDK driving the server."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from chatagent import BasicAgent, FnCallAgent, ModelServiceError, get_chat_model, tool
from chatagent.llm.prices import price_of
from chatagent.llm.request import Usage
from tests.support.provider_reply import Reply
from tests.support.responses_server import ResponsesServer

WEATHER = {
    "name": "get_weather",
    "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def gpt(server: ResponsesServer, **generate_cfg: object):
    return get_chat_model(
        {
            "model_type": "oai",
            "api": "responses",
            "model": "gpt-5-mini",
            "model_server": server.base_url,
            "api_key": server.api_key,
            "generate_cfg": {"max_retries": 2, "retry_delay": 0.01, **generate_cfg},
        }
    )


@tool
def get_weather(city: str) -> str:
    """Weather of a city."""
    return f"sunny in {city}"


def test_a_reply_streams_with_its_usage_and_cost(responses_server: ResponsesServer) -> None:
    responses_server.add(Reply(text="Hello there, friend", usage={"input_tokens": 1000, "output_tokens": 100}))
    usage = Usage()
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    seen = [r[-1]["content"] for r in gpt(responses_server).chat(msgs, usage=usage)]
    assert seen[-1] == "Hello there, friend" and len(seen) > 2
    body = responses_server.requests[0].json
    assert body["instructions"] == "Be brief." and body["input"] == [{"role": "user", "content": [
        {"type": "input_text", "text": "hi"}]}]  # fmt: skip
    assert body["store"] is False and body["include"] == ["reasoning.encrypted_content"]
    assert (usage.prompt_tokens, usage.completion_tokens) == (1000, 100)
    assert usage.cost == pytest.approx(price_of("gpt-5-mini").cost(1000, 100))  # type: ignore[union-attr]


def test_tool_calls_and_reasoning_items_go_back_stateless(responses_server: ResponsesServer) -> None:
    responses_server.add(
        Reply(thinking="Need the weather.", tool_calls=[("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Oslo"})]),
        Reply(text="Sunny in both."),
    )  # fmt: skip
    bot = FnCallAgent(function_list=[get_weather], llm=gpt(responses_server, reasoning_effort="low"))
    response = bot.run_nonstream([{"role": "user", "content": "Weather in Paris and Oslo?"}])
    assert response[-1]["content"] == "Sunny in both."
    assert response[0]["reasoning_content"] == "Need the weather."
    first, second = (r.json for r in responses_server.requests)
    assert first["reasoning"] == {"effort": "low", "summary": "auto"}
    assert first["tools"][0] == {**first["tools"][0], "type": "function", "name": "get_weather"}
    kinds = [i.get("type", "message") for i in second["input"]]
    assert kinds == ["message", "reasoning", "function_call", "function_call", "function_call_output",
                     "function_call_output"]  # fmt: skip
    assert second["input"][1]["encrypted_content"]  # the server checked it: it answered


def test_previous_response_id_sends_only_what_is_new(responses_server: ResponsesServer) -> None:
    responses_server.add(Reply(thinking="hmm", tool_calls=[("get_weather", {"city": "Rome"})]), Reply(text="Sunny."))
    bot = FnCallAgent(function_list=[get_weather], llm=gpt(responses_server, previous_response_id=True))
    assert bot.run_nonstream([{"role": "user", "content": "Weather in Rome?"}])[-1]["content"] == "Sunny."
    first, second = (r.json for r in responses_server.requests)
    assert first["store"] is True and "previous_response_id" not in first
    assert second["previous_response_id"] == "resp_1"
    assert [i["type"] for i in second["input"]] == ["function_call_output"]


def test_an_unknown_previous_response_is_the_servers_400(responses_server: ResponsesServer) -> None:
    state = {"provider": "openai-responses", "response_id": "resp_gone", "items": []}
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello", "extra": {"reasoning_state": state}},
            {"role": "user", "content": "again"}]  # fmt: skip
    with pytest.raises(ModelServiceError) as e:
        gpt(responses_server, previous_response_id=True).chat(msgs, stream=False)
    assert e.value.code == 400 and "resp_gone" in e.value.message


class City(BaseModel):
    name: str
    population: int


def test_structured_output_goes_as_text_format(responses_server: ResponsesServer) -> None:
    responses_server.add(Reply(text='{"name": "Tokyo", "population": 37000000}'))
    city = BasicAgent(llm=gpt(responses_server)).run_nonstream(
        [{"role": "user", "content": "Largest city in Japan?"}], response_format=City, json_mode="json_schema"
    )
    assert (city.name, city.population) == ("Tokyo", 37000000)
    fmt = responses_server.requests[0].json["text"]["format"]
    assert (
        fmt["type"] == "json_schema" and fmt["name"] == "City" and fmt["schema"]["required"] == ["name", "population"]
    )


def test_settings_map_and_what_the_api_lacks_is_said(responses_server: ResponsesServer, caplog) -> None:
    responses_server.add(Reply(text="ok"))
    with caplog.at_level("WARNING", "chatagent.llm"):
        gpt(responses_server, max_tokens=50, temperature=0.3, seed=3, function_choice="get_weather",
            parallel_function_calls=False).chat([{"role": "user", "content": "hi"}], functions=[WEATHER], stream=False)  # fmt: skip
    body = responses_server.requests[0].json
    assert (body["max_output_tokens"], body["temperature"]) == (50, 0.3) and "seed" not in body
    assert body["tool_choice"] == {"type": "function", "name": "get_weather"} and body["parallel_tool_calls"] is False
    assert "'seed'" in caplog.text


def test_errors_are_retried_or_raised_as_the_api_says(responses_server: ResponsesServer) -> None:
    responses_server.add(Reply(status=500), Reply(status=429, headers={"retry-after": "0"}), Reply(text="ok"))
    assert gpt(responses_server).chat([{"role": "user", "content": "hi"}], stream=False)[0]["content"] == "ok"
    with pytest.raises(ModelServiceError) as e:
        gpt(responses_server, frequency_boost=2).chat([{"role": "user", "content": "hi"}], stream=False)
    assert e.value.code == 400 and "frequency_boost" in e.value.message
    responses_server.add(Reply(text="abcdefgh", error_after=3), Reply(text="again"))
    *_, last = gpt(responses_server).chat([{"role": "user", "content": "hi"}])
    assert last[0]["content"] == "again"


def test_the_async_path_speaks_the_same_protocol(responses_server: ResponsesServer) -> None:
    responses_server.add(Reply(text="Hello from asyncio"), Reply(tool_calls=[("get_weather", {"city": "Paris"})]))
    llm = gpt(responses_server)

    async def main() -> tuple[str, str]:
        text = ""
        async for rsp in llm.achat([{"role": "user", "content": "hi"}]):
            text = rsp[-1]["content"]
        reply = await llm.achat([{"role": "user", "content": "hi"}], functions=[WEATHER], stream=False)
        return text, reply[-1]["function_call"]["arguments"]

    assert asyncio.run(main()) == ("Hello from asyncio", '{"city": "Paris"}')


def test_api_names_the_protocol_and_a_wrong_one_is_refused() -> None:
    with pytest.raises(ValueError, match="'responses'"):
        get_chat_model({"model_type": "oai", "api": "assistants", "model": "gpt-5"})
    assert type(get_chat_model({"model_type": "oai", "api": "chat", "model": "gpt-5"})).__name__ == "OpenAICompatModel"


def test_the_official_sdk_speaks_to_the_loopback_server(responses_server: ResponsesServer) -> None:
    import openai

    responses_server.add(Reply(thinking="hmm", text="Hi!"), Reply(tool_calls=[("get_weather", {"city": "Paris"})]))
    client = openai.OpenAI(api_key=responses_server.api_key, base_url=responses_server.base_url, max_retries=0)
    events = list(client.responses.create(model="gpt-5-mini", input="hi", stream=True))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "Hi!" and events[-1].type == "response.completed" and events[-1].response.output_text == "Hi!"
    done = client.responses.create(model="gpt-5-mini", input="weather?", tools=[{"type": "function", **WEATHER}])
    call = done.output[0]
    assert call.type == "function_call" and call.name == "get_weather" and call.arguments == '{"city": "Paris"}'
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="gpt-5-mini", input="x", previous_response_id="resp_nope")
    assert e.value.param == "previous_response_id"

"""The Anthropic backend against the loopback Messages API (tests/support/anthropic_server.py): streaming, tools,
thinking sent back as the API requires, prompt caching decided by chatagent and priced, errors and retries."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest
from pydantic import BaseModel

from chatagent import BasicAgent, FnCallAgent, ModelServiceError, get_chat_model, tool
from chatagent.errors import ModelErrorCode
from chatagent.llm.prices import price_of
from chatagent.llm.request import Usage
from tests.support.anthropic_server import AnthropicServer
from tests.support.provider_reply import Reply

WEATHER = {
    "name": "get_weather",
    "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def claude(server: AnthropicServer, **generate_cfg: object):
    return get_chat_model(
        {
            "model_type": "anthropic",
            "model": "claude-sonnet-4-5",
            "model_server": server.base_url,
            "api_key": server.api_key,
            "generate_cfg": {"max_retries": 2, "retry_delay": 0.01, **generate_cfg},
        }
    )


def test_a_reply_streams_with_its_usage_and_cost(anthropic_server: AnthropicServer) -> None:
    anthropic_server.add(Reply(text="Hello there, friend", usage={"input_tokens": 1000, "output_tokens": 100}))
    usage = Usage()
    llm = claude(anthropic_server)
    seen = [r[-1]["content"] for r in llm.chat([{"role": "user", "content": "hi"}], usage=usage)]
    assert seen[-1] == "Hello there, friend" and len(seen) > 2  # it came in pieces
    req = anthropic_server.requests[0]
    assert req.headers["x-api-key"] == anthropic_server.api_key and req.headers["anthropic-version"] == "2023-06-01"
    assert req.json["stream"] is True and req.json["max_tokens"] == 8192
    assert (usage.prompt_tokens, usage.completion_tokens) == (1000, 100)
    assert usage.cost == pytest.approx(price_of("claude-sonnet-4-5").cost(1000, 100))  # type: ignore[union-attr]


def test_native_tool_calls_and_their_results_round_trip(anthropic_server: AnthropicServer) -> None:
    calls = [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Oslo"})]
    anthropic_server.add(Reply(text="Let me look.", tool_calls=calls), Reply(text="Sunny in both."))

    @tool
    def get_weather(city: str) -> str:
        """Weather of a city."""
        return f"sunny in {city}"

    bot = FnCallAgent(function_list=[get_weather], llm=claude(anthropic_server))
    response = bot.run_nonstream([{"role": "user", "content": "Weather in Paris and Oslo?"}])
    assert response[-1]["content"] == "Sunny in both."
    first, second = (r.json for r in anthropic_server.requests)
    assert first["tools"][0]["name"] == "get_weather" and first["tools"][0]["input_schema"]["required"] == ["city"]
    turn = second["messages"][1]
    assert turn["role"] == "assistant"
    assert [b["type"] for b in turn["content"]] == ["text", "tool_use", "tool_use"]
    results = second["messages"][2]["content"]
    assert [b["type"] for b in results] == ["tool_result", "tool_result"]
    assert "sunny in Paris" in results[0]["content"] and "sunny in Oslo" in results[1]["content"]
    assert {b["tool_use_id"] for b in results[:2]} == {b["id"] for b in turn["content"][1:]}


def test_a_call_appears_once_complete_and_parallel_calls_follow_the_text(anthropic_server: AnthropicServer) -> None:
    anthropic_server.add(Reply(text="ok", tool_calls=[("get_weather", {"city": "Paris"}), ("get_weather", {})]))
    llm = claude(anthropic_server)
    for rsp in llm.chat([{"role": "user", "content": "hi"}], functions=[WEATHER]):
        for m in rsp:
            if m.get("function_call"):
                assert m["function_call"]["arguments"] in ('{"city": "Paris"}', "{}")
    assert [m.get("function_call", {}).get("name") for m in rsp] == [None, "get_weather", "get_weather"]


def test_tool_choice_and_parallel_calls_map_to_the_api(anthropic_server: AnthropicServer) -> None:
    anthropic_server.add(Reply(tool_calls=[("get_weather", {"city": "Rome"})], repeat=True))
    msgs = [{"role": "user", "content": "hi"}]
    claude(anthropic_server, function_choice="required").chat(msgs, functions=[WEATHER], stream=False)
    claude(anthropic_server, function_choice="get_weather", parallel_function_calls=False).chat(
        msgs, functions=[WEATHER], stream=False
    )
    claude(anthropic_server, tool_choice="none").chat(msgs, functions=[WEATHER], stream=False)
    choices = [r.json.get("tool_choice") for r in anthropic_server.requests]
    assert choices == [
        {"type": "any"},
        {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True},
        {"type": "none"},
    ]


def test_thinking_is_reasoning_and_goes_back_signed(anthropic_server: AnthropicServer) -> None:
    anthropic_server.add(
        Reply(thinking="The user wants weather.", tool_calls=[("get_weather", {"city": "Paris"})]),
        Reply(thinking="Now answer.", text="Sunny."),
    )

    @tool
    def get_weather(city: str) -> str:
        """Weather of a city."""
        return "sunny"

    bot = FnCallAgent(function_list=[get_weather], llm=claude(anthropic_server, reasoning_effort="low"))
    response = bot.run_nonstream([{"role": "user", "content": "Weather in Paris?"}])
    assert response[0]["reasoning_content"] == "The user wants weather."
    assert response[-1]["content"] == "Sunny." and response[-1]["reasoning_content"] == "Now answer."
    first, second = (r.json for r in anthropic_server.requests)
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 2048} and first["max_tokens"] > 2048
    sent_back = second["messages"][1]["content"]
    assert sent_back[0]["type"] == "thinking" and sent_back[0]["thinking"] == "The user wants weather."
    assert sent_back[1]["type"] == "tool_use"  # the server checked the signature: it answered


def test_the_server_refuses_a_tampered_thinking_block(anthropic_server: AnthropicServer) -> None:
    state = {"provider": "anthropic", "blocks": [{"type": "thinking", "thinking": "x", "signature": "forged"}]}
    msgs = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello", "extra": {"reasoning_state": state}},
        {"role": "user", "content": "again"},
    ]
    with pytest.raises(ModelServiceError) as e:
        claude(anthropic_server).chat(msgs, stream=False)
    assert e.value.code == 400 and "signature" in e.value.message


def test_a_budget_must_leave_room_for_the_answer(anthropic_server: AnthropicServer) -> None:
    llm = claude(anthropic_server, reasoning_effort=4096, max_tokens=2000)
    with pytest.raises(ValueError, match="thinking budget"):
        llm.chat([{"role": "user", "content": "hi"}], stream=False)
    assert anthropic_server.requests == []


def test_settings_the_api_lacks_are_said_not_dropped(
    anthropic_server: AnthropicServer, caplog: pytest.LogCaptureFixture
) -> None:
    anthropic_server.add(Reply(text="ok"))
    with caplog.at_level(logging.WARNING, "chatagent.llm"):
        claude(anthropic_server, seed=7, temperature=0.2, top_k=5, stop=["END"]).chat(
            [{"role": "user", "content": "hi"}], stream=False
        )
    body = anthropic_server.requests[0].json
    assert (body["temperature"], body["top_k"], body["stop_sequences"]) == (0.2, 5, ["END"]) and "seed" not in body
    assert "seed" in caplog.text and "no seed" in caplog.text


def test_three_turns_mark_the_stable_prefix_and_the_cache_reads_are_priced(anthropic_server: AnthropicServer) -> None:
    anthropic_server.add(Reply(text="Lisbon first."), Reply(text="Then Porto."), Reply(text="Then Faro."))
    usage_by_turn: list[Usage] = []
    llm = claude(anthropic_server)
    bot = BasicAgent(llm=llm, system_message="You are a travel planner. " * 40)
    messages: list[dict] = []
    for question in ("Where do I start?", "And then?", "And last?"):
        messages.append({"role": "user", "content": question})
        run = bot.run(messages)
        *_, rsp = run
        messages += rsp
        usage_by_turn.append(run.usage)
    third = anthropic_server.requests[2].json
    assert third["system"][0]["cache_control"] == {"type": "ephemeral"}
    marked = [n for n, m in enumerate(third["messages"]) if any("cache_control" in b for b in m["content"])]
    assert marked == [2, 4]  # the user turn before this one (read back) and the newest (written for the next)
    first, _, last = usage_by_turn
    assert first.cache_read_tokens == 0 and first.cache_write_tokens > 0
    assert last.cache_read_tokens > first.cache_write_tokens  # the whole earlier conversation came from the cache
    price = price_of("claude-sonnet-4-5")
    assert price is not None and price.cache_read is not None
    expected = price.cost(last.prompt_tokens, last.completion_tokens, last.cache_read_tokens, last.cache_write_tokens)
    assert last.cost == pytest.approx(expected)
    assert last.cost < price.cost(last.prompt_tokens, last.completion_tokens)  # reads are cheaper than input


def test_prompt_caching_can_be_turned_off(anthropic_server: AnthropicServer) -> None:
    anthropic_server.add(Reply(text="ok"))
    usage = Usage()
    claude(anthropic_server, prompt_cache=False).chat(
        [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}], stream=False, usage=usage
    )
    body = anthropic_server.requests[0].json
    assert "cache_control" not in str(body) and "prompt_cache" not in body
    assert usage.cache_write_tokens == usage.cache_read_tokens == 0


class City(BaseModel):
    name: str
    population: int


def test_structured_output_goes_as_a_forced_tool(anthropic_server: AnthropicServer) -> None:
    anthropic_server.add(Reply(tool_calls=[("City", {"name": "Tokyo", "population": 37000000})]))
    bot = BasicAgent(llm=claude(anthropic_server))
    city = bot.run_nonstream(
        [{"role": "user", "content": "Largest city in Japan?"}], response_format=City, json_mode="json_schema"
    )
    assert (city.name, city.population) == ("Tokyo", 37000000)
    body = anthropic_server.requests[0].json
    assert body["tool_choice"] == {"type": "tool", "name": "City", "disable_parallel_tool_use": True}
    assert body["tools"][-1]["input_schema"]["properties"]["population"]["type"] == "integer"


def test_an_image_goes_inline(anthropic_server: AnthropicServer, tmp_path) -> None:
    png = tmp_path / "dot.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + b"0" * 16)
    anthropic_server.add(Reply(text="a dot"))
    msg = {"role": "user", "content": [{"text": "What is this?"}, {"image": str(png)}]}
    claude(anthropic_server).chat([msg], stream=False)
    image = anthropic_server.requests[0].json["messages"][0]["content"][1]
    assert image["type"] == "image" and image["source"]["media_type"] == "image/png"


def test_transient_errors_are_retried_and_others_raise_at_once(anthropic_server: AnthropicServer) -> None:
    anthropic_server.add(Reply(status=529), Reply(status=429, headers={"retry-after": "0"}), Reply(text="ok"))
    llm = claude(anthropic_server)
    assert llm.chat([{"role": "user", "content": "hi"}], stream=False)[0]["content"] == "ok"
    anthropic_server.add(Reply(status=400, error="prompt is too long: 250000 tokens > 200000 maximum"))
    with pytest.raises(ModelServiceError) as e:
        llm.chat([{"role": "user", "content": "hi"}], stream=False)
    assert e.value.code == ModelErrorCode.CONTEXT_TOO_LONG


def test_a_wrong_key_says_where_the_key_comes_from_and_never_shows_it(anthropic_server: AnthropicServer) -> None:
    llm = get_chat_model(
        {"model_type": "anthropic", "model": "claude-sonnet-4-5", "model_server": anthropic_server.base_url,
         "api_key": "sk-ant-wrong-secret-key-123456"}
    )  # fmt: skip
    with pytest.raises(ModelServiceError) as e:
        llm.chat([{"role": "user", "content": "hi"}], stream=False)
    assert e.value.code == 401 and "ANTHROPIC_API_KEY" in e.value.message
    assert "wrong-secret" not in str(e.value)


def test_an_error_event_in_the_stream_is_retried_before_anything_was_shown(anthropic_server: AnthropicServer) -> None:
    anthropic_server.add(Reply(text="abcdefgh", error_after=1), Reply(text="fine"))
    *_, last = claude(anthropic_server).chat([{"role": "user", "content": "hi"}])
    assert last[0]["content"] == "fine"
    anthropic_server.add(Reply(text="abcdefgh", error_after=6), Reply(text="never asked"))
    with pytest.raises(ModelServiceError) as e:
        for _ in claude(anthropic_server).chat([{"role": "user", "content": "hi"}]):
            pass
    assert e.value.partial and e.value.code == 529


def test_a_stream_without_its_end_is_incomplete(anthropic_server: AnthropicServer) -> None:
    anthropic_server.add(Reply(text="abcdefgh", end_after=5, repeat=True))
    with pytest.raises(ModelServiceError) as e:
        list(claude(anthropic_server, max_retries=0).chat([{"role": "user", "content": "hi"}]))
    assert e.value.code == ModelErrorCode.STREAM_INCOMPLETE


def test_a_cut_off_call_is_an_error_and_a_cut_off_text_is_marked(anthropic_server: AnthropicServer) -> None:
    anthropic_server.add(Reply(text="partial", stop="max_tokens"))
    reply = claude(anthropic_server).chat([{"role": "user", "content": "hi"}], stream=False)
    assert reply[0]["extra"]["stop_reason"] == "length"
    anthropic_server.add(Reply(tool_calls=[("get_weather", {"city": "Pa"})], stop="max_tokens", repeat=True))
    for stream in (False, True):
        with pytest.raises(ModelServiceError) as e:
            list(claude(anthropic_server).chat([{"role": "user", "content": "hi"}], functions=[WEATHER], stream=stream))
        assert e.value.code == ModelErrorCode.LENGTH


def test_the_async_path_speaks_the_same_protocol(anthropic_server: AnthropicServer) -> None:
    anthropic_server.add(Reply(text="Hello from asyncio"), Reply(tool_calls=[("get_weather", {"city": "Paris"})]))
    llm = claude(anthropic_server)

    async def main() -> tuple[str, str]:
        text = ""
        async for rsp in llm.achat([{"role": "user", "content": "hi"}]):
            text = rsp[-1]["content"]
        reply = await llm.achat([{"role": "user", "content": "hi"}], functions=[WEATHER], stream=False)
        return text, reply[-1]["function_call"]["arguments"]

    assert asyncio.run(main()) == ("Hello from asyncio", '{"city":"Paris"}')


def test_the_server_answers_a_malformed_request_as_the_api_does(anthropic_server: AnthropicServer) -> None:
    headers = {"x-api-key": anthropic_server.api_key, "anthropic-version": "2023-06-01"}
    url = anthropic_server.base_url + "/v1/messages"
    bad = [
        {"model": "m", "messages": [{"role": "user", "content": "hi"}]},  # no max_tokens
        {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": ""}]},
        {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], "seed": 1},
        {"model": "m", "max_tokens": 5, "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
            {"role": "user", "content": "no result"},
        ]},
    ]  # fmt: skip
    for body in bad:
        r = httpx.post(url, json=body, headers=headers)
        assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error", body


def test_the_official_sdk_speaks_to_the_loopback_server(anthropic_server: AnthropicServer) -> None:
    anthropic = pytest.importorskip("anthropic")
    anthropic_server.add(
        Reply(thinking="hmm", text="Hi!", usage={"input_tokens": 5, "output_tokens": 2}),
        Reply(tool_calls=[("get_weather", {"city": "Paris"})]),
    )
    client = anthropic.Anthropic(api_key=anthropic_server.api_key, base_url=anthropic_server.base_url, max_retries=0)
    with client.messages.stream(
        model="claude-sonnet-4-5", max_tokens=2048, messages=[{"role": "user", "content": "hi"}],
        thinking={"type": "enabled", "budget_tokens": 1024},
    ) as stream:  # fmt: skip
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "Hi!" and final.content[0].type == "thinking" and final.usage.input_tokens == 5
    msg = client.messages.create(
        model="claude-sonnet-4-5", max_tokens=100, messages=[{"role": "user", "content": "weather?"}],
        tools=[{"name": "get_weather", "input_schema": WEATHER["parameters"]}],
    )  # fmt: skip
    assert msg.stop_reason == "tool_use" and msg.content[0].input == {"city": "Paris"}  # type: ignore[union-attr]
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(model="claude-sonnet-4-5", max_tokens=0, messages=[{"role": "user", "content": "x"}])
    assert e.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]

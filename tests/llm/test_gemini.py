"""The Gemini backend against the loopback Gemini API (tests/support/gemini_server.py): streaming, function calls
and responses with their thought signatures, thinking, responseSchema, context-cache reads priced, Vertex's URLs,
errors; the google-genai SDK driving the server."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from chatagent import BasicAgent, FnCallAgent, ModelServiceError, get_chat_model, tool
from chatagent.errors import ModelErrorCode
from chatagent.llm.gemini.request import gemini_schema
from chatagent.llm.prices import price_of
from chatagent.llm.request import Usage
from tests.support.gemini_server import GeminiServer
from tests.support.provider_reply import Reply

WEATHER = {
    "name": "get_weather",
    "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def gemini(server: GeminiServer, **generate_cfg: object):
    return get_chat_model(
        {
            "model_type": "gemini",
            "model": "gemini-2.5-flash",
            "model_server": server.base_url,
            "api_key": server.api_key,
            "generate_cfg": {"max_retries": 2, "retry_delay": 0.01, **generate_cfg},
        }
    )


@tool
def get_weather(city: str) -> str:
    """Weather of a city."""
    return f"sunny in {city}"


def test_a_reply_streams_with_its_usage_and_cost(gemini_server: GeminiServer) -> None:
    gemini_server.add(Reply(text="Hello there, friend", usage={"promptTokenCount": 1000, "candidatesTokenCount": 100}))
    usage = Usage()
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    seen = [r[-1]["content"] for r in gemini(gemini_server).chat(msgs, usage=usage)]
    assert seen[-1] == "Hello there, friend" and len(seen) > 2
    req = gemini_server.requests[0]
    assert req.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert req.headers["x-goog-api-key"] == gemini_server.api_key
    assert req.json["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert req.json["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]
    assert usage.cost == pytest.approx(price_of("gemini-2.5-flash").cost(1000, 100))  # type: ignore[union-attr]


def test_function_calls_go_back_with_their_signatures(gemini_server: GeminiServer) -> None:
    calls = [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Oslo"})]
    gemini_server.add(Reply(tool_calls=calls), Reply(text="Sunny in both."))
    bot = FnCallAgent(function_list=[get_weather], llm=gemini(gemini_server))
    response = bot.run_nonstream([{"role": "user", "content": "Weather in Paris and Oslo?"}])
    assert response[-1]["content"] == "Sunny in both."
    first, second = (r.json for r in gemini_server.requests)
    assert first["tools"][0]["functionDeclarations"][0]["parameters"]["properties"]["city"] == {"type": "STRING"}
    model_turn, results = second["contents"][1], second["contents"][2]
    assert [p["functionCall"]["args"] for p in model_turn["parts"]] == [{"city": "Paris"}, {"city": "Oslo"}]
    assert all(p["thoughtSignature"] for p in model_turn["parts"])  # the server checked them: it answered
    assert [p["functionResponse"]["name"] for p in results["parts"]] == ["get_weather", "get_weather"]
    assert "sunny in Paris" in results["parts"][0]["functionResponse"]["response"]["result"]


def test_a_call_without_its_signature_is_the_servers_400(gemini_server: GeminiServer) -> None:
    msgs = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "", "function_call": {"name": "get_weather", "arguments": '{"city": "Rome"}'}},
        {"role": "function", "name": "get_weather", "content": "sunny"},
    ]
    with pytest.raises(ModelServiceError) as e:
        gemini(gemini_server).chat(msgs, functions=[WEATHER], stream=False)
    assert e.value.code == 400 and "thought_signature" in e.value.message


def test_thinking_is_reasoning_and_the_budget_maps(gemini_server: GeminiServer) -> None:
    gemini_server.add(Reply(thinking="Let me think.", text="42"))
    reply = gemini(gemini_server, reasoning_effort="medium").chat([{"role": "user", "content": "?"}], stream=False)
    assert (reply[0]["reasoning_content"], reply[0]["content"]) == ("Let me think.", "42")
    config = gemini_server.requests[0].json["generationConfig"]
    assert config["thinkingConfig"] == {"thinkingBudget": 8192, "includeThoughts": True}


def test_settings_map_to_generation_config_and_tool_config(gemini_server: GeminiServer) -> None:
    gemini_server.add(Reply(tool_calls=[("get_weather", {"city": "Rome"})]))
    gemini(
        gemini_server, temperature=0.2, top_p=0.9, top_k=3, max_tokens=64, seed=7, stop=["END"],
        function_choice="get_weather",
    ).chat([{"role": "user", "content": "hi"}], functions=[WEATHER], stream=False)  # fmt: skip
    body = gemini_server.requests[0].json
    assert body["generationConfig"] == {
        "temperature": 0.2, "topP": 0.9, "topK": 3, "maxOutputTokens": 64, "seed": 7, "stopSequences": ["END"],
    }  # fmt: skip
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}}


class Address(BaseModel):
    city: str


class Person(BaseModel):
    name: str
    age: int | None
    home: Address


def test_structured_output_goes_as_response_schema(gemini_server: GeminiServer) -> None:
    gemini_server.add(Reply(text='{"name": "Ada", "age": 36, "home": {"city": "London"}}'))
    person = BasicAgent(llm=gemini(gemini_server)).run_nonstream(
        [{"role": "user", "content": "Who?"}], response_format=Person, json_mode="json_schema"
    )
    assert person.home.city == "London"
    config = gemini_server.requests[0].json["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    schema = config["responseSchema"]  # the server refuses $ref, $defs and lower-case types: it answered
    assert schema["properties"]["home"]["properties"]["city"]["type"] == "STRING"
    assert schema["properties"]["age"] == {"type": "INTEGER", "nullable": True, "title": "Age"}


def test_a_json_schema_becomes_gemini_schema() -> None:
    schema = {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": ["string", "null"]}}},
              "additionalProperties": False}  # fmt: skip
    assert gemini_schema(schema) == {
        "type": "OBJECT", "properties": {"tags": {"type": "ARRAY", "items": {"type": "STRING", "nullable": True}}},
    }  # fmt: skip


def test_context_cache_reads_are_counted_and_priced(gemini_server: GeminiServer) -> None:
    gemini_server.cached_tokens = 5000
    gemini_server.add(Reply(text="From the cache."))
    usage = Usage()
    gemini(gemini_server, cached_content="cachedContents/abc").chat(
        [{"role": "user", "content": "hi"}], stream=False, usage=usage
    )
    assert gemini_server.requests[0].json["cachedContent"] == "cachedContents/abc"
    assert usage.cache_read_tokens == 5000 and usage.prompt_tokens > 5000
    price = price_of("gemini-2.5-flash")
    assert price is not None
    assert usage.cost == pytest.approx(price.cost(usage.prompt_tokens, usage.completion_tokens, 5000))


def test_vertex_is_a_base_url_with_a_bearer_token(gemini_server: GeminiServer) -> None:
    gemini_server.add(Reply(text="From Vertex."))
    llm = get_chat_model({"model_type": "gemini", "model": "gemini-2.5-pro", "model_server": gemini_server.vertex_url(),
                          "api_key": gemini_server.api_key})  # fmt: skip
    assert llm.chat([{"role": "user", "content": "hi"}], stream=False)[0]["content"] == "From Vertex."
    req = gemini_server.requests[0]
    assert req.path.startswith("/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-pro:")
    assert req.headers["authorization"] == f"Bearer {gemini_server.api_key}" and "x-goog-api-key" not in req.headers


def test_errors_are_retried_or_raised_as_the_api_says(gemini_server: GeminiServer) -> None:
    gemini_server.add(Reply(status=503), Reply(status=429, headers={"retry-after": "0"}), Reply(text="ok"))
    assert gemini(gemini_server).chat([{"role": "user", "content": "hi"}], stream=False)[0]["content"] == "ok"
    gemini_server.add(
        Reply(
            status=400, error="The input token count (2000000) exceeds the maximum number of tokens allowed (1048576)."
        )
    )
    with pytest.raises(ModelServiceError) as e:
        gemini(gemini_server).chat([{"role": "user", "content": "hi"}], stream=False)
    assert e.value.code == ModelErrorCode.CONTEXT_TOO_LONG
    with pytest.raises(ModelServiceError) as e:
        gemini(gemini_server, response_modality="TEXT").chat([{"role": "user", "content": "hi"}], stream=False)
    assert e.value.code == 400 and "response_modality" in e.value.message
    gemini_server.add(Reply(text="abcdefgh", error_after=0), Reply(text="again"))
    *_, last = gemini(gemini_server).chat([{"role": "user", "content": "hi"}])
    assert last[0]["content"] == "again"


def test_a_stream_without_a_finish_reason_is_incomplete(gemini_server: GeminiServer) -> None:
    gemini_server.add(Reply(text="abcdefgh", end_after=1, repeat=True))
    with pytest.raises(ModelServiceError) as e:
        list(gemini(gemini_server, max_retries=0).chat([{"role": "user", "content": "hi"}]))
    assert e.value.code == ModelErrorCode.STREAM_INCOMPLETE


def test_the_async_path_speaks_the_same_protocol(gemini_server: GeminiServer) -> None:
    gemini_server.add(Reply(text="Hello from asyncio"), Reply(tool_calls=[("get_weather", {"city": "Paris"})]))
    llm = gemini(gemini_server)

    async def main() -> tuple[str, str]:
        text = ""
        async for rsp in llm.achat([{"role": "user", "content": "hi"}]):
            text = rsp[-1]["content"]
        reply = await llm.achat([{"role": "user", "content": "hi"}], functions=[WEATHER], stream=False)
        return text, reply[-1]["function_call"]["arguments"]

    assert asyncio.run(main()) == ("Hello from asyncio", '{"city":"Paris"}')


def test_the_official_sdk_speaks_to_the_loopback_server(gemini_server: GeminiServer) -> None:
    genai = pytest.importorskip("google.genai")
    types = genai.types
    gemini_server.add(Reply(text="Hi there!"), Reply(tool_calls=[("get_weather", {"city": "Paris"})]))
    client = genai.Client(
        api_key=gemini_server.api_key, http_options=types.HttpOptions(base_url=gemini_server.base_url)
    )
    text = "".join(c.text or "" for c in client.models.generate_content_stream(model="gemini-2.5-flash", contents="hi"))
    assert text == "Hi there!"
    tool_decl = types.Tool(function_declarations=[types.FunctionDeclaration(**WEATHER)])  # type: ignore[arg-type]
    done = client.models.generate_content(
        model="gemini-2.5-flash", contents="weather?",
        config=types.GenerateContentConfig(tools=[tool_decl], automatic_function_calling={"disable": True}),
    )  # fmt: skip
    assert done.function_calls[0].name == "get_weather" and done.function_calls[0].args == {"city": "Paris"}  # type: ignore[index]
    with pytest.raises(genai.errors.ClientError) as e:
        client.models.generate_content(
            model="gemini-2.5-flash", contents="hi",
            config=types.GenerateContentConfig(thinking_config=types.ThinkingConfig(thinking_budget=99999)),
        )  # fmt: skip
    assert e.value.code == 400

"""The Bedrock backend against the loopback Bedrock runtime (tests/support/bedrock_server.py): requests signed with
SigV4 from the AWS environment (the server verifies them), ConverseStream's event stream, tools, reasoning sent
back, prompt caching priced, errors with no key in them; boto3 driving the server."""

from __future__ import annotations

import asyncio
import logging

import pytest
from pydantic import BaseModel

from chatagent import BasicAgent, FnCallAgent, ModelServiceError, get_chat_model, tool
from chatagent.errors import ModelErrorCode
from chatagent.llm.prices import price_of
from chatagent.llm.request import Usage
from tests.support.bedrock_server import BedrockServer
from tests.support.provider_reply import Reply

CLAUDE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
WEATHER = {
    "name": "get_weather",
    "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def bedrock(server: BedrockServer, model: str = CLAUDE, **generate_cfg: object):
    return get_chat_model(
        {
            "model_type": "bedrock",
            "model": model,
            "model_server": server.base_url,
            "region": server.region,
            "generate_cfg": {"max_retries": 2, "retry_delay": 0.01, **generate_cfg},
        }
    )


@tool
def get_weather(city: str) -> str:
    """Weather of a city."""
    return f"sunny in {city}"


def test_a_signed_reply_streams_with_its_usage_and_cost(bedrock_server: BedrockServer) -> None:
    bedrock_server.add(Reply(text="Hello there, friend", usage={"inputTokens": 1000, "outputTokens": 100}))
    usage = Usage()
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    seen = [r[-1]["content"] for r in bedrock(bedrock_server).chat(msgs, usage=usage)]
    assert seen[-1] == "Hello there, friend" and len(seen) > 2
    req = bedrock_server.requests[0]
    assert req.path == "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream"
    assert req.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIALOOPBACKKEY00001/")
    assert req.json["system"][0] == {"text": "Be brief."}
    assert (usage.prompt_tokens, usage.completion_tokens) == (1000, 100)
    assert usage.cost == pytest.approx(price_of(CLAUDE).cost(1000, 100))  # type: ignore[union-attr]


def test_a_wrong_secret_is_the_servers_403_and_never_in_the_error(
    bedrock_server: BedrockServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "a-wrong-secret-access-key-0123456789")
    with caplog.at_level(logging.DEBUG), pytest.raises(ModelServiceError) as e:
        bedrock(bedrock_server).chat([{"role": "user", "content": "hi"}], stream=False)
    assert e.value.code == 403 and "InvalidSignatureException" in e.value.message
    assert "wrong-secret" not in str(e.value) and "wrong-secret" not in caplog.text
    assert "AKIALOOPBACKKEY00001" not in str(e.value)


def test_a_session_token_is_signed_along(bedrock_server: BedrockServer, monkeypatch: pytest.MonkeyPatch) -> None:
    bedrock_server.session_token = "loopback-session-token"
    monkeypatch.setenv("AWS_SESSION_TOKEN", "loopback-session-token")
    bedrock_server.add(Reply(text="ok"))
    assert bedrock(bedrock_server).chat([{"role": "user", "content": "hi"}], stream=False)[0]["content"] == "ok"
    assert "x-amz-security-token" in bedrock_server.requests[0].headers["authorization"]


def test_a_bedrock_api_key_goes_as_a_bearer_token(bedrock_server: BedrockServer, monkeypatch) -> None:
    bedrock_server.bearer = "ABSK-loopback-bedrock-api-key"
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", bedrock_server.bearer)
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    bedrock_server.add(Reply(text="ok"))
    assert bedrock(bedrock_server).chat([{"role": "user", "content": "hi"}], stream=False)[0]["content"] == "ok"


def test_tools_round_trip_with_reasoning_sent_back(bedrock_server: BedrockServer) -> None:
    bedrock_server.add(
        Reply(thinking="Need the weather.", tool_calls=[("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Oslo"})]),
        Reply(text="Sunny in both."),
    )  # fmt: skip
    bot = FnCallAgent(function_list=[get_weather], llm=bedrock(bedrock_server, reasoning_effort="low"))
    response = bot.run_nonstream([{"role": "user", "content": "Weather in Paris and Oslo?"}])
    assert response[-1]["content"] == "Sunny in both." and response[0]["reasoning_content"] == "Need the weather."
    first, second = (r.json for r in bedrock_server.requests)
    assert first["additionalModelRequestFields"]["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert first["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"]["required"] == ["city"]
    turn = second["messages"][1]["content"]
    assert [next(iter(b)) for b in turn] == ["reasoningContent", "toolUse", "toolUse"]  # checked by the server
    results = [b["toolResult"] for b in second["messages"][2]["content"] if "toolResult" in b]
    assert {r["toolUseId"] for r in results} == {b["toolUse"]["toolUseId"] for b in turn[1:]}


def test_three_turns_cache_their_prefix_and_the_reads_are_priced(bedrock_server: BedrockServer) -> None:
    bedrock_server.add(Reply(text="Lisbon first."), Reply(text="Then Porto."), Reply(text="Then Faro."))
    bot = BasicAgent(llm=bedrock(bedrock_server), system_message="You plan trips. " * 40)
    messages: list[dict] = []
    usages = []
    for question in ("Where do I start?", "And then?", "And last?"):
        messages.append({"role": "user", "content": question})
        run = bot.run(messages)
        *_, rsp = run
        messages += rsp
        usages.append(run.usage)
    assert usages[0].cache_read_tokens == 0 and usages[0].cache_write_tokens > 0
    assert usages[2].cache_read_tokens > usages[0].cache_write_tokens
    price = price_of(CLAUDE)
    assert price is not None
    last = usages[2]
    assert last.cost == pytest.approx(price.cost(last.prompt_tokens, last.completion_tokens, last.cache_read_tokens,
                                                 last.cache_write_tokens))  # fmt: skip


def test_a_model_without_prompt_caching_gets_no_cache_points(bedrock_server: BedrockServer, caplog) -> None:
    bedrock_server.add(Reply(text="ok"))
    with caplog.at_level(logging.WARNING, "chatagent.llm"):
        bedrock(bedrock_server, "meta.llama3-70b-instruct-v1:0", seed=1, top_k=5).chat(
            [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}], stream=False
        )
    assert "cachePoint" not in str(bedrock_server.requests[0].json)
    assert "'seed'" in caplog.text and "'top_k'" in caplog.text


class City(BaseModel):
    name: str
    population: int


def test_structured_output_goes_as_a_forced_tool(bedrock_server: BedrockServer) -> None:
    bedrock_server.add(Reply(tool_calls=[("City", {"name": "Tokyo", "population": 37000000})]))
    city = BasicAgent(llm=bedrock(bedrock_server)).run_nonstream(
        [{"role": "user", "content": "Largest city in Japan?"}], response_format=City, json_mode="json_schema"
    )
    assert (city.name, city.population) == ("Tokyo", 37000000)
    assert bedrock_server.requests[0].json["toolConfig"]["toolChoice"] == {"tool": {"name": "City"}}


def test_errors_are_retried_or_raised_as_bedrock_says(bedrock_server: BedrockServer) -> None:
    bedrock_server.add(Reply(status=503), Reply(status=429), Reply(text="ok"))
    assert bedrock(bedrock_server).chat([{"role": "user", "content": "hi"}], stream=False)[0]["content"] == "ok"
    bedrock_server.add(Reply(status=400, error="Input is too long for requested model."))
    with pytest.raises(ModelServiceError) as e:
        bedrock(bedrock_server).chat([{"role": "user", "content": "hi"}], stream=False)
    assert e.value.code == ModelErrorCode.CONTEXT_TOO_LONG
    bedrock_server.add(Reply(text="abcdefgh", error_after=1), Reply(text="again"))
    *_, last = bedrock(bedrock_server).chat([{"role": "user", "content": "hi"}])
    assert last[0]["content"] == "again"  # a throttling exception before any text: retried
    bedrock_server.add(Reply(text="abcdefgh", end_after=2, repeat=True))
    with pytest.raises(ModelServiceError) as e:
        list(bedrock(bedrock_server, max_retries=0).chat([{"role": "user", "content": "hi"}]))
    assert e.value.code == ModelErrorCode.STREAM_INCOMPLETE


def test_the_server_refuses_a_conversation_bedrock_would(bedrock_server: BedrockServer) -> None:
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "", "function_call": {
        "name": "get_weather", "arguments": "{}"}}, {"role": "user", "content": "and?"}]  # fmt: skip
    with pytest.raises(ModelServiceError) as e:
        bedrock(bedrock_server).chat(msgs, functions=[WEATHER], stream=False)
    assert e.value.code == 400 and "toolResult" in e.value.message


def test_the_async_path_speaks_the_same_protocol(bedrock_server: BedrockServer) -> None:
    bedrock_server.add(Reply(text="Hello from asyncio"), Reply(tool_calls=[("get_weather", {"city": "Paris"})]))
    llm = bedrock(bedrock_server)

    async def main() -> tuple[str, str]:
        text = ""
        async for rsp in llm.achat([{"role": "user", "content": "hi"}]):
            text = rsp[-1]["content"]
        reply = await llm.achat([{"role": "user", "content": "hi"}], functions=[WEATHER], stream=False)
        return text, reply[-1]["function_call"]["arguments"]

    assert asyncio.run(main()) == ("Hello from asyncio", '{"city":"Paris"}')


def test_boto3_speaks_to_the_loopback_server(bedrock_server: BedrockServer) -> None:
    boto3 = pytest.importorskip("boto3")
    from botocore.exceptions import ClientError

    key, secret = bedrock_server.access_key
    client = boto3.client("bedrock-runtime", region_name=bedrock_server.region, endpoint_url=bedrock_server.base_url,
                          aws_access_key_id=key, aws_secret_access_key=secret)  # fmt: skip
    bedrock_server.add(Reply(text="Hi there!"), Reply(tool_calls=[("get_weather", {"city": "Paris"})]))
    stream = client.converse_stream(modelId=CLAUDE, messages=[{"role": "user", "content": [{"text": "hi"}]}])
    events = list(stream["stream"])
    text = "".join(e["contentBlockDelta"]["delta"].get("text", "") for e in events if "contentBlockDelta" in e)
    assert text == "Hi there!" and "metadata" in events[-1]
    spec = {"toolSpec": {"name": "get_weather", "inputSchema": {"json": WEATHER["parameters"]}}}
    done = client.converse(modelId=CLAUDE, messages=[{"role": "user", "content": [{"text": "weather?"}]}],
                           toolConfig={"tools": [spec]})  # fmt: skip
    assert done["stopReason"] == "tool_use"
    assert done["output"]["message"]["content"][0]["toolUse"]["input"] == {"city": "Paris"}
    with pytest.raises(ClientError) as e:
        client.converse(modelId=CLAUDE, messages=[{"role": "assistant", "content": [{"text": "x"}]}])
    assert e.value.response["Error"]["Code"] == "ValidationException"
    bad = boto3.client("bedrock-runtime", region_name=bedrock_server.region, endpoint_url=bedrock_server.base_url,
                       aws_access_key_id=key, aws_secret_access_key="not-the-secret")  # fmt: skip
    with pytest.raises(ClientError) as e:
        bad.converse(modelId=CLAUDE, messages=[{"role": "user", "content": [{"text": "x"}]}])
    assert e.value.response["Error"]["Code"] == "InvalidSignatureException"

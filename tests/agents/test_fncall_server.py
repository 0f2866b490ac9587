"""FnCallAgent against the loopback OpenAI-compatible server: native tool calls over real HTTP/SSE, and
prompt-based function calling producing the same message sequence."""

from __future__ import annotations

import json

import pytest

from chatagent import FnCallAgent, tool
from chatagent.llm.prepare import untrusted
from tests.support.openai_server import Reply

USER = [{"role": "user", "content": "Weather in Paris and Rome?"}]


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: City name.
    """
    return f"{city}: sunny"


def _cfg(server, **generate_cfg):
    return {"model": "m", "model_server": server.base_url, "api_key": "k", "generate_cfg": generate_cfg}


def _shape(rsp):
    """The response without call ids (they differ between modes)."""
    out = []
    for m in rsp:
        m = dict(m)
        m.pop("extra", None)
        if m.get("function_call"):
            m["function_call"] = {**m["function_call"], "arguments": json.loads(m["function_call"]["arguments"])}
        out.append(m)
    return out


@pytest.mark.timeout(60)
def test_native_tool_loop_over_http(openai_server):
    openai_server.add(
        Reply(tool_calls=[("get_weather", {"city": "Paris"}), ("get_weather", '{"city": "Rome"}')]),
        Reply(text="Both sunny.", usage={"prompt_tokens": 30, "completion_tokens": 3}),
    )
    bot = FnCallAgent(llm=_cfg(openai_server), function_list=[get_weather])
    run = bot.run(USER)
    rsp = list(run)[-1]
    assert [m["content"] for m in rsp if m["role"] == "function"] == ["Paris: sunny", "Rome: sunny"]
    assert rsp[-1]["content"] == "Both sunny."
    second = openai_server.chat_requests[1].json
    assert second["tools"][0]["function"]["name"] == "get_weather"
    tool_msgs = [m for m in second["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_msgs] == [
        untrusted(f"{c}: sunny", "tool get_weather") for c in ("Paris", "Rome")
    ]
    ids = [c["id"] for c in second["messages"][1]["tool_calls"]]
    assert [m["tool_call_id"] for m in tool_msgs] == ids
    assert run.usage.calls == 2


@pytest.mark.timeout(60)
def test_native_and_prompt_based_give_the_same_messages(openai_server):
    openai_server.add(Reply(tool_calls=[("get_weather", {"city": "Paris"})]), "It is sunny in Paris.")
    native = FnCallAgent(llm=_cfg(openai_server), function_list=[get_weather]).run_nonstream(USER)
    openai_server.add(
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        "It is sunny in Paris.",
    )
    prompted = FnCallAgent(
        llm=_cfg(openai_server, fncall_prompt_type="nous"), function_list=[get_weather]
    ).run_nonstream(USER)
    assert _shape(native) == _shape(prompted)
    assert prompted[1]["content"] == "Paris: sunny"
    req = openai_server.chat_requests[-1].json
    assert "tools" not in req and "<tools>" in req["messages"][0]["content"]
    assert "<tool_response>" in json.dumps(req["messages"])

"""DashScopeModel through the real dashscope SDK against the loopback DashScope server."""

from __future__ import annotations

import json
import sys
import time

import pytest

from chatagent import BasicAgent, ModelServiceError, Usage, get_chat_model, merge_delta
from chatagent.llm.dashscope.chat import DashScopeModel
from chatagent.schema import ContentItem, Message, to_messages
from tests.support import processes
from tests.support.call_paths import PATHS, tool_fields_by_path
from tests.support.dashscope_server import DashScopeServer, Reply

pytestmark = pytest.mark.timeout(30)

KEY = "sk-test-0123456789abcdef"
USER = to_messages([{"role": "user", "content": "hi"}])  # Messages in, Messages out (dicts in give dicts)
WEATHER = {
    "name": "get_weather",
    "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
TIME = {"name": "get_time", "description": "The time now", "parameters": {"type": "object", "properties": {}}}
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))


@pytest.fixture
def server(dashscope_server: DashScopeServer) -> DashScopeServer:
    """The loopback DashScope server, emptied, expecting KEY."""
    dashscope_server.api_key = KEY
    return dashscope_server


def model(server: DashScopeServer, name: str = "qwen-plus", **generate_cfg: object) -> DashScopeModel:
    cfg = {"model": name, "model_server": "dashscope", "api_key": KEY, "base_url": server.base_url}
    llm = get_chat_model({**cfg, "generate_cfg": {"retry_delay": 0.01, **generate_cfg}})
    assert isinstance(llm, DashScopeModel)
    return llm


# ---- streaming and replies ------------------------------------------------------------------------------


def test_stream_cumulative_each_yield_extends_the_last(server: DashScopeServer) -> None:
    server.add(Reply(text="Hello there, world!", chunk_size=3))
    yields = list(model(server).chat(USER))
    texts = [y[0].content for y in yields]
    assert texts[-1] == "Hello there, world!"
    assert len(texts) == 7 and all(b.startswith(a) for a, b in zip(texts, texts[1:], strict=False))
    req = server.requests[0]
    assert req.path.endswith("/text-generation/generation")
    assert req.headers["authorization"] == f"Bearer {KEY}" and req.headers["x-dashscope-sse"] == "enable"
    assert req.json["model"] == "qwen-plus"
    assert req.parameters["incremental_output"] is True and req.parameters["result_format"] == "message"
    assert req.messages == [{"role": "user", "content": "hi"}]


def test_delta_stream_yields_only_new_text(server: DashScopeServer) -> None:
    server.add(Reply(chunks=["ab", "cd", "ef"]))
    deltas = list(model(server).chat(USER, delta_stream=True))
    assert [[(f.content, f.index) for f in d] for d in deltas] == [[("ab", 0)], [("cd", 0)], [("ef", 0)]]
    full: list = []
    for d in deltas:
        merge_delta(full, d)
    assert full[0].content == "abcdef"


def test_non_stream_call_is_one_json_request(server: DashScopeServer) -> None:
    server.add(Reply(text="all at once", reasoning="because", usage={"input_tokens": 10, "output_tokens": 2}))
    usage = Usage()
    out = model(server).chat(USER, stream=False, usage=usage)
    assert [(m.content, m.reasoning_content) for m in out] == [("all at once", "because")]
    req = server.requests[0]
    assert "x-dashscope-sse" not in req.headers and "incremental_output" not in req.parameters
    assert (usage.prompt_tokens, usage.completion_tokens) == (10, 2)


def test_reasoning_streams_before_the_answer(server: DashScopeServer) -> None:
    server.add(Reply(reasoning="Let me think.", text="42", chunk_size=4), Reply(reasoning="r" * 9, text="t"))
    llm = model(server, "qwen3-235b-a22b", enable_thinking=True)
    deltas = list(llm.chat(USER, delta_stream=True))
    assert [(f.reasoning_content, f.content) for d in deltas for f in d] == [
        ("Let ", ""),
        ("me t", ""),
        ("hink", ""),
        (".", ""),
        (None, "42"),
    ]
    final = list(llm.chat(USER))[-1]
    assert [(m.reasoning_content, m.content) for m in final] == [("r" * 9, "t")]
    assert server.requests[0].parameters["enable_thinking"] is True


def test_usage_is_summed_over_calls(server: DashScopeServer) -> None:
    server.add(Reply(text="a", usage={"input_tokens": 7, "output_tokens": 3}))
    server.add(Reply(text="b", usage={"input_tokens": 5, "output_tokens": 1}))
    usage = Usage()
    llm = model(server)
    list(llm.chat(USER, usage=usage))
    llm.chat(USER, stream=False, usage=usage)
    assert (usage.prompt_tokens, usage.completion_tokens, usage.calls) == (12, 4, 2)


def test_generate_cfg_passes_through_to_parameters(server: DashScopeServer) -> None:
    server.add("ok")
    cfg = {
        "temperature": 0.3,
        "top_p": 0.9,
        "max_tokens": 50,
        "seed": 7,
        "stop": ["END"],
        "enable_thinking": False,
        "extra_headers": {"X-Trace": "t-1"},
        "request_timeout": 20,
        "max_retries": 1,
        "incremental_output": False,  # reserved: the backend decides
        "extra_body": {"repetition_penalty": 1.1, "stream": False},
    }
    list(model(server, **cfg).chat(USER))
    params = server.requests[0].parameters
    for k in ("temperature", "top_p", "max_tokens", "seed", "stop", "enable_thinking"):
        assert params[k] == cfg[k], k
    assert params["repetition_penalty"] == 1.1 and params["incremental_output"] is True
    assert not {"request_timeout", "max_retries", "extra_body", "extra_headers"} & set(params)
    assert server.requests[0].headers["x-trace"] == "t-1"


def test_request_timeout_applies(server: DashScopeServer) -> None:
    """The server waits 120 s before answering (released at the test's end): the timeout within the test's 30 s
    deadline is the 0.3 s one."""
    server.add(Reply(text="late", delay=120))
    with pytest.raises(ModelServiceError) as info:
        list(model(server, request_timeout=0.3, max_retries=0).chat(USER))
    assert info.value.code == "timeout" and info.value.retryable


# ---- tools ----------------------------------------------------------------------------------------------


def test_single_tool_call_is_emitted_complete(server: DashScopeServer) -> None:
    server.add(Reply(text="Let me look.", tool_calls=[("get_weather", {"city": "Paris"})], chunk_size=2))
    deltas = list(model(server).chat(USER, functions=[WEATHER], delta_stream=True))
    calls = [f for d in deltas for f in d if f.function_call is not None]
    assert len(calls) == 1 and deltas[-1] == [calls[0]]
    call = calls[0]
    assert call.index == 1 and call.extra == {"function_id": "call_0_get_weather"}
    assert call.function_call.name == "get_weather" and json.loads(call.function_call.arguments) == {"city": "Paris"}
    params = server.requests[0].parameters
    assert params["tools"] == [{"type": "function", "function": WEATHER}]
    assert params["parallel_tool_calls"] is True and "tool_choice" not in params


def test_parallel_tool_calls_stream_and_non_stream(server: DashScopeServer) -> None:
    calls = [("get_weather", {"city": "Oslo"}), ("get_time", {})]
    server.add(Reply(tool_calls=calls), Reply(tool_calls=calls))
    llm = model(server)
    streamed = list(llm.chat(USER, functions=[WEATHER, TIME]))[-1]
    once = llm.chat(USER, functions=[WEATHER, TIME], stream=False)
    for out in (streamed, once):
        assert [(m.function_call.name, json.loads(m.function_call.arguments)) for m in out] == [
            ("get_weather", {"city": "Oslo"}),
            ("get_time", {}),
        ]
        assert [m.extra["function_id"] for m in out] == ["call_0_get_weather", "call_1_get_time"]


@pytest.mark.parametrize(
    "gen,expected",
    [
        ({}, {"parallel_tool_calls": True}),
        ({"function_choice": "none"}, {"tool_choice": "none", "parallel_tool_calls": True}),
        ({"function_choice": "required"}, {"tool_choice": "required", "parallel_tool_calls": True}),
        (
            {"function_choice": "get_weather"},
            {"tool_choice": {"type": "function", "function": {"name": "get_weather"}}, "parallel_tool_calls": True},
        ),
        ({"parallel_function_calls": False}, {}),
    ],
)
def test_function_choice_becomes_tool_choice(server: DashScopeServer, gen: dict, expected: dict) -> None:
    """The choice reaches DashScope by every path (sync and async, streamed and whole), and only with tools."""
    server.add(*["ok"] * (len(PATHS) + 1))
    sent = tool_fields_by_path(model(server, **gen), USER, [WEATHER], lambda: [r.parameters for r in server.requests])
    assert sent == [expected] * len(PATHS)


def test_a_tool_choice_in_generate_cfg_is_sent_as_given(server: DashScopeServer) -> None:
    server.add("ok")
    llm = model(server, function_choice="none", tool_choice={"type": "function", "function": {"name": "get_time"}})
    llm.chat(USER, [WEATHER, TIME], stream=False)
    assert server.requests[0].parameters["tool_choice"] == {"type": "function", "function": {"name": "get_time"}}


def test_tool_history_is_sent_in_dashscope_format(server: DashScopeServer) -> None:
    server.add("It is sunny in Oslo at noon.")
    history = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather and time in Oslo?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "function_call": {"name": "get_weather", "arguments": "{}"},
            "extra": {"function_id": "c1"},
        },
        {
            "role": "assistant",
            "content": "",
            "function_call": {"name": "get_time", "arguments": "{}"},
            "extra": {"function_id": "c2"},
        },
        {"role": "function", "name": "get_weather", "content": "sunny", "extra": {"function_id": "c1"}},
        {"role": "function", "name": "get_time", "content": "noon"},
    ]
    list(model(server).chat(history, functions=[WEATHER, TIME]))
    sent = server.requests[0].messages
    assert sent[:2] == [{"role": "system", "content": "Be brief."}, history[1]]
    assert sent[2]["role"] == "assistant" and sent[2]["content"] == "Checking."
    assert [(c["id"], c["function"]["name"]) for c in sent[2]["tool_calls"]] == [
        ("c1", "get_weather"),
        ("c2", "get_time"),
    ]
    assert sent[3:] == [
        {"role": "tool", "content": "sunny", "tool_call_id": "c1", "name": "get_weather"},
        {"role": "tool", "content": "noon", "tool_call_id": "c2", "name": "get_time"},
    ]


# ---- multimodal ---------------------------------------------------------------------------------------------


def test_vl_model_gets_images_in_dashscope_format(server: DashScopeServer, tmp_path) -> None:
    image = tmp_path / "cat.png"
    image.write_bytes(PNG)
    server.add(Reply(text="A cat."), Reply(text="Still a cat."))
    llm = model(server, "qwen-vl-max")
    assert llm.support_multimodal_input
    content = [{"image": str(image)}, {"image": "https://example.com/dog.jpg"}, {"text": "What is this?"}]
    msgs = [{"role": "system", "content": "You see."}, {"role": "user", "content": content}]
    assert list(llm.chat(msgs))[-1][0]["content"] == "A cat."  # dicts in, dicts out
    assert llm.chat([msgs[1]], stream=False)[0]["content"] == "Still a cat."
    gen = server.generation_requests
    assert gen[0].path.endswith("/multimodal-generation/generation")
    (key,) = server.uploads
    assert server.uploads[key] == PNG and key.endswith("cat.png")
    user = [{"image": f"oss://{key}"}, {"image": "https://example.com/dog.jpg"}, {"text": "What is this?"}]
    assert gen[0].messages == [{"role": "system", "content": [{"text": "You see."}]}, {"role": "user", "content": user}]
    assert gen[1].messages == [{"role": "user", "content": user}]  # uploaded once, reused
    assert gen[0].headers["x-dashscope-ossresourceresolve"] == "enable"


def test_file_url_and_missing_file(server: DashScopeServer, tmp_path) -> None:
    image = tmp_path / "a b.png"
    image.write_bytes(PNG)
    server.add("seen")
    llm = model(server, "qwen2.5-vl-7b-instruct")
    list(llm.chat([{"role": "user", "content": [{"image": f"file://{image}"}, {"text": "?"}]}]))
    assert list(server.uploads.values()) == [PNG]
    with pytest.raises(ModelServiceError) as info:
        llm.chat([{"role": "user", "content": [{"image": str(tmp_path / "nope.png")}]}], stream=False)
    assert info.value.code == "file_not_found"


def test_text_model_gets_placeholders_not_images(server: DashScopeServer) -> None:
    server.add("I cannot see images.")
    msg = Message("user", [ContentItem(image="/photos/cat.png"), ContentItem(text="What is it?")])
    llm = model(server)
    assert not llm.support_multimodal_input
    list(llm.chat([msg]))
    assert server.generation_requests[0].messages == [{"role": "user", "content": "[image: cat.png]\nWhat is it?"}]
    assert not server.uploads and server.generation_requests[0].path.endswith("/text-generation/generation")


def test_multimodal_flag_overrides_the_name(server: DashScopeServer) -> None:
    llm = get_chat_model({"model": "my-vision", "model_server": "dashscope", "api_key": KEY, "multimodal": True})
    assert llm.support_multimodal_input
    assert not get_chat_model(
        {"model": "qwen-vl-max", "model_server": "dashscope", "multimodal": False}
    ).support_multimodal_input


# ---- faults ---------------------------------------------------------------------------------------------


def test_throttling_with_retry_after_is_retried(server: DashScopeServer) -> None:
    server.add(Reply(status=429, headers={"Retry-After": "0.3"}), Reply(status=429), "finally")
    t0 = time.monotonic()
    out = list(model(server, max_retries=3).chat(USER))[-1]
    assert out[0].content == "finally"
    assert len(server.generation_requests) == 3
    assert time.monotonic() - t0 >= 0.3  # the server's Retry-After was honoured


def test_server_errors_retry_a_bounded_number_of_times(server: DashScopeServer) -> None:
    server.add(*[Reply(status=500, code="InternalError", message="boom")] * 5)
    with pytest.raises(ModelServiceError) as info:
        list(model(server, max_retries=2).chat(USER))
    assert len(server.generation_requests) == 3
    assert info.value.code == "InternalError" and info.value.retryable and "boom" in info.value.message


def test_gateway_html_error_is_retried_and_shortened(server: DashScopeServer) -> None:
    page = "<html>" + "Bad gateway. " * 500 + "</html>"
    server.add(Reply(status=502, body=page), "through")
    assert model(server).chat(USER, stream=False)[0].content == "through"
    server.add(Reply(status=502, body=page))
    with pytest.raises(ModelServiceError) as info:
        list(model(server, max_retries=0).chat(USER))
    assert info.value.code == "502" and info.value.retryable and info.value.message.startswith("<html>Bad gateway.")
    assert len(info.value.message) < 1100


def test_invalid_key_is_not_retried_and_never_shown(server: DashScopeServer) -> None:
    bad = "sk-wrong-key-987654321"
    llm = get_chat_model(
        {"model": "qwen-plus", "model_server": "dashscope", "api_key": bad, "base_url": server.base_url}
    )
    with pytest.raises(ModelServiceError) as info:
        list(llm.chat(USER))
    assert len(server.generation_requests) == 1
    assert info.value.code == "InvalidApiKey" and not info.value.retryable and info.value.message
    assert bad not in str(info.value) and bad not in repr(info.value.args)


def test_key_echoed_by_the_service_is_masked(server: DashScopeServer) -> None:
    server.add(Reply(status=400, code="InvalidParameter", message=f"bad request from key {KEY}"))
    with pytest.raises(ModelServiceError) as info:
        model(server).chat(USER, stream=False)
    assert KEY not in str(info.value) and "***" in info.value.message
    assert len(server.generation_requests) == 1


def test_context_too_long_is_not_retried(server: DashScopeServer) -> None:
    server.add(Reply(status=400, code="InvalidParameter", message="Range of input length should be [1, 129024]"))
    with pytest.raises(ModelServiceError) as info:
        list(model(server).chat(USER))
    assert info.value.code == "context_too_long" and not info.value.retryable
    assert len(server.generation_requests) == 1


def test_dropped_stream_after_content_raises_partial(server: DashScopeServer) -> None:
    server.add(Reply(text="abcdefghijkl", drop_after=2), "never replayed")
    seen = []
    with pytest.raises(ModelServiceError) as info:
        for rsp in model(server).chat(USER):
            seen.append(rsp[0].content)
    assert seen == ["abcd", "abcdefgh"]
    assert info.value.partial and info.value.code == "connection_error"
    assert len(server.generation_requests) == 1 and server.pending == 1


def test_dropped_stream_before_content_is_retried(server: DashScopeServer) -> None:
    server.add(Reply(text="lost", drop_after=0), "second try")
    assert list(model(server).chat(USER))[-1][0].content == "second try"
    assert len(server.generation_requests) == 2


def test_error_event_in_the_stream(server: DashScopeServer) -> None:
    server.add(Reply(text="abcdefgh", error_after=1, code="InternalError.Algo", message="model crashed"))
    with pytest.raises(ModelServiceError) as info:
        list(model(server).chat(USER))
    assert info.value.partial and info.value.code == "InternalError.Algo" and info.value.retryable
    assert info.value.message == "model crashed (in the stream, request r-1)"
    server.add(Reply(text="x", error_after=0, code="Throttling.AllocationQuota"), "after throttling")
    assert list(model(server).chat(USER))[-1][0].content == "after throttling"
    server.add(Reply(text="x", error_after=0, code="DataInspectionFailed", message="inappropriate content"))
    with pytest.raises(ModelServiceError) as info:
        list(model(server).chat(USER))
    assert info.value.code == "DataInspectionFailed" and not info.value.retryable and not info.value.partial
    assert len(server.generation_requests) == 4


def test_connection_refused_is_retryable_and_bounded() -> None:
    with DashScopeServer() as gone:
        url = gone.base_url
    llm = get_chat_model(
        {
            "model": "qwen-plus",
            "model_server": "dashscope",
            "api_key": KEY,
            "base_url": url,
            "generate_cfg": {"retry_delay": 0.01, "max_retries": 1},
        }
    )
    with pytest.raises(ModelServiceError) as info:
        llm.chat(USER, stream=False)
    assert info.value.code == "connection_error" and info.value.retryable and KEY not in str(info.value)


def test_closing_the_stream_closes_the_connection(server: DashScopeServer) -> None:
    server.add(Reply(text="x" * 400, chunk_size=1, interval=0.02))
    stream = model(server).chat(USER)
    assert next(stream)[0].content == "x"
    stream.close()
    assert server.wait_done(timeout=5) == "aborted"


# ---- through the agent and the config -----------------------------------------------------------------


def test_basic_agent_run_stream_modes(server: DashScopeServer) -> None:
    server.add("Hi! How can I help?", "Hi! How can I help?", "Hi! How can I help?")
    bot = BasicAgent(
        llm={"model": "qwen-plus", "model_server": "dashscope", "api_key": KEY, "base_url": server.base_url}, name="bot"
    )
    messages = [{"role": "user", "content": "hi"}]
    yields = list(bot.run(messages))
    assert yields[-1] == [{"role": "assistant", "content": "Hi! How can I help?", "name": "bot"}]
    full: list = []
    for d in bot.run(messages, delta_stream=True):
        merge_delta(full, d)
    assert [{k: v for k, v in m.items() if k != "extra"} for m in full] == yields[-1]
    assert bot.run_nonstream(messages) == yields[-1]
    assert messages == [{"role": "user", "content": "hi"}]


def test_connections_are_reused_and_model_server_url_works(server: DashScopeServer) -> None:
    server.add("one", "two", "three")
    llm = get_chat_model(
        {"model_type": "dashscope", "model": "qwen-max", "model_server": server.base_url, "api_key": KEY}
    )
    list(llm.chat(USER))
    llm.chat(USER, stream=False)
    list(llm.chat(USER))
    assert len({r.peer for r in server.generation_requests}) == 1


def test_api_key_from_the_environment(server: DashScopeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DASHSCOPE_API_KEY", KEY)
    server.add("env key works")
    llm = get_chat_model({"model": "qwen-plus", "model_server": "dashscope", "base_url": server.base_url})
    assert llm.chat(USER, stream=False)[0].content == "env key works"


def test_import_chatagent_does_not_import_dashscope() -> None:
    code = "import sys, chatagent, chatagent.llm; chatagent.BasicAgent; assert 'dashscope' not in sys.modules"
    processes.run([sys.executable, "-c", code], check=True, timeout=20)


def test_streamed_tool_calls_without_index_are_told_apart_by_id() -> None:
    from chatagent.llm.dashscope.reply import gather_calls
    from chatagent.llm.reply_parts import ReplyParts

    parts = ReplyParts()
    pieces = [
        {"id": "a", "function": {"name": "f", "arguments": '{"x":'}},
        {"id": "", "function": {"arguments": " 1}"}},
        {"id": "b", "function": {"name": "g", "arguments": "{}"}},
    ]
    shown = [f for piece in pieces for f in gather_calls(parts, [piece])]
    got = {k: (c.id, c.name, c.pieces, c.index) for k, c in parts.calls.items()}
    assert got == {0: ("a", "f", ['{"x":', " 1}"], 0), 1: ("b", "g", ["{}"], 1)}
    # each piece of arguments is shown as it comes, at its call's place
    assert [(f.index, f.extra["streaming_call"]["arguments"]) for f in shown] == [(0, '{"x":'), (0, " 1}"), (1, "{}")]

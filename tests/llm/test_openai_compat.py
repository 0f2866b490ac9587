"""OpenAICompatModel against the loopback OpenAI-compatible server: real HTTP, SSE and faults."""

from __future__ import annotations

import base64
import email.utils
import json
import socket
import time

import pytest

from chatagent import BasicAgent, ModelServiceError, Usage, get_chat_model, merge_delta
from chatagent.llm.openai.chat import OpenAICompatModel
from chatagent.llm.openai.request import looks_multimodal
from chatagent.llm.sse import sse_data
from chatagent.schema import to_messages
from chatagent.schema.stream import collect
from tests.support.call_paths import PATHS, ask_every_path, tool_fields_by_path
from tests.support.openai_server import Reply

pytestmark = pytest.mark.timeout(30)

USER = to_messages([{"role": "user", "content": "hi"}])  # Messages in, Messages out (dicts in give dicts)
KEY = "sk-test-secret-4f2a9"
FAST = {"retry_delay": 0.001, "max_retries": 2}
WEATHER = {"name": "get_weather", "description": "Weather", "parameters": {"type": "object", "properties": {}}}


def model(server, **cfg) -> OpenAICompatModel:
    gen = {**FAST, **cfg.pop("generate_cfg", {})}
    llm = get_chat_model(
        {"model": "test-model", "model_server": server.base_url, "api_key": KEY, "generate_cfg": gen, **cfg}
    )
    assert isinstance(llm, OpenAICompatModel)
    return llm


# ---- streaming contract ------------------------------------------------------------------------------------


def test_cumulative_stream_extends_and_ends_equal_to_nonstream(openai_server):
    text = "The quick brown fox jumps over the lazy dog."
    openai_server.add(Reply(text=text, chunk_size=3), Reply(text=text, chunk_size=7))
    llm = model(openai_server)
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "tell me"}]
    before = json.dumps(messages)
    yields = list(llm.chat(messages))
    assert len(yields) == len(range(0, len(text), 3))
    for prev, cur in zip(yields, yields[1:], strict=False):  # dicts in, dicts out
        assert cur[0]["content"].startswith(prev[0]["content"]) and len(cur[0]["content"]) > len(prev[0]["content"])
    assert llm.chat(messages, stream=False) == yields[-1]
    assert yields[-1][0]["content"] == text
    assert json.dumps(messages) == before
    assert openai_server.requests[0].json["stream"] is True and "stream" not in openai_server.requests[1].json


def test_delta_stream_fragments_fold_to_the_cumulative_answer(openai_server):
    openai_server.add(Reply(reasoning="think", text="Sunny and warm", tool_calls=[("get_weather", {"city": "Paris"})]))
    deltas = list(model(openai_server).chat(USER, [WEATHER], delta_stream=True))
    assert all(f.index in (0, 1) for d in deltas for f in d)
    full: list = []
    for d in deltas:
        merge_delta(full, d)
    assert full[0].content == "Sunny and warm" and full[0].reasoning_content == "think"
    assert full[1].function_call.name == "get_weather" and json.loads(full[1].function_call.arguments) == {
        "city": "Paris"
    }


def test_basic_agent_run_over_http(openai_server):
    openai_server.add(Reply(text="Hello from the server", chunk_size=5), Reply(text="Hello from the server"))
    bot = BasicAgent(llm=model(openai_server), name="bot")
    messages = [{"role": "user", "content": "hello"}]
    yields = list(bot.run(messages))
    assert all(isinstance(m, dict) for m in yields[-1])
    for prev, cur in zip(yields, yields[1:], strict=False):
        assert cur[0]["content"].startswith(prev[0]["content"])
    assert yields[-1] == bot.run_nonstream(messages)
    assert yields[-1] == [{"role": "assistant", "content": "Hello from the server", "name": "bot"}]
    assert messages == [{"role": "user", "content": "hello"}]


def test_basic_agent_delta_mode_over_http(openai_server):
    openai_server.add(Reply(text="a b c d e f", chunk_size=2))
    full: list = []
    for d in BasicAgent(llm=model(openai_server)).run(USER, delta_stream=True):
        merge_delta(full, d)
    assert full[0]["content"] == "a b c d e f"


def test_non_stream_reply(openai_server):
    openai_server.add(Reply(text="whole answer", reasoning="because"))
    usage = Usage()
    reply = model(openai_server).chat(USER, stream=False, usage=usage)
    assert [(m.content, m.reasoning_content) for m in reply] == [("whole answer", "because")]
    assert "stream" not in openai_server.requests[0].json
    assert usage.completion_tokens > 0 and usage.prompt_tokens > 0


def test_connection_is_reused(openai_server):
    openai_server.add("one", "two", "three")
    llm = model(openai_server)
    list(llm.chat(USER))
    llm.chat(USER, stream=False)
    list(llm.chat(USER))
    assert len({r.peer for r in openai_server.requests}) == 1


# ---- tools, reasoning, usage ---------------------------------------------------------------------------------


def test_single_tool_call(openai_server):
    openai_server.add(Reply(tool_calls=[("get_weather", {"city": "Paris", "unit": "C"})], chunk_size=3))
    reply = model(openai_server).chat(USER, [WEATHER], stream=False)
    assert len(reply) == 1
    assert reply[0].function_call.name == "get_weather"
    assert json.loads(reply[0].function_call.arguments) == {"city": "Paris", "unit": "C"}
    assert reply[0].extra["function_id"] == "call_0_get_weather"
    sent = openai_server.requests[0].json
    assert sent["tools"] == [{"type": "function", "function": WEATHER}]


def test_parallel_tool_calls_stream_complete_after_text(openai_server):
    calls = [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"}), ("get_time", "{}")]
    openai_server.add(Reply(text="Let me check.", tool_calls=calls, chunk_size=2))
    yields = list(model(openai_server).chat(USER, [WEATHER]))
    final = yields[-1]
    assert final[0].content == "Let me check." and final[0].function_call is None
    assert [(m.function_call.name, json.loads(m.function_call.arguments)) for m in final[1:]] == [
        ("get_weather", {"city": "Paris"}),
        ("get_weather", {"city": "Rome"}),
        ("get_time", {}),
    ]
    assert [m.extra["function_id"] for m in final[1:]] == [
        "call_0_get_weather",
        "call_1_get_weather",
        "call_2_get_time",
    ]
    # a call never appears with partial arguments
    for y in yields:
        for m in y[1:]:
            json.loads(m.function_call.arguments)


def test_tool_call_results_are_sent_back_in_openai_format(openai_server):
    openai_server.add("It is sunny.")
    history = USER + [
        {
            "role": "assistant",
            "content": "",
            "function_call": {"name": "get_weather", "arguments": "{}"},
            "extra": {"function_id": "c1"},
        },
        {"role": "function", "name": "get_weather", "content": "sunny", "extra": {"function_id": "c1"}},
    ]
    model(openai_server).chat(history, [WEATHER], stream=False)
    sent = openai_server.requests[0].json["messages"]
    assert sent[1]["tool_calls"][0]["id"] == "c1"
    assert sent[2] == {"role": "tool", "tool_call_id": "c1", "content": "sunny"}


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_streamed_under_either_name(openai_server, field):
    openai_server.add(Reply(reasoning="Two plus two is four.", text="4", reasoning_field=field))
    final = list(model(openai_server).chat(USER))[-1]
    assert final[0].reasoning_content == "Two plus two is four." and final[0].content == "4"


def test_stream_usage_requested_and_counted(openai_server):
    openai_server.add(Reply(text="hello", usage={"prompt_tokens": 11, "completion_tokens": 5}))
    usage = Usage()
    list(model(openai_server).chat(USER, usage=usage))
    assert openai_server.requests[0].json["stream_options"] == {"include_usage": True}
    assert (usage.prompt_tokens, usage.completion_tokens, usage.calls) == (11, 5, 1)


def test_agent_run_usage(openai_server):
    openai_server.add(Reply(text="hello", usage={"prompt_tokens": 7, "completion_tokens": 2}))
    run = BasicAgent(llm=model(openai_server)).run(USER)
    list(run)
    assert (run.usage.prompt_tokens, run.usage.completion_tokens) == (7, 2)


# ---- configuration -------------------------------------------------------------------------------------------


def test_generate_cfg_passthrough(openai_server):
    openai_server.add("ok")
    gen = {
        "temperature": 0.3,
        "top_p": 0.9,
        "max_tokens": 77,
        "seed": 5,
        "stop": ["###"],
        "presence_penalty": 0.5,
        "top_k": 20,  # not an SDK argument: sent in the body
        "extra_body": {"repetition_penalty": 1.05, "chat_template_kwargs": {"enable_thinking": False}},
        "extra_headers": {"X-Trace": "abc"},
        "request_timeout": 9,
        "max_input_tokens": 5000,
    }
    llm = model(openai_server, generate_cfg=gen)
    list(llm.chat(USER, extra_generate_cfg={"temperature": 0.7}))
    req = openai_server.requests[0]
    body = req.json
    assert body["temperature"] == 0.7
    for key in ("top_p", "max_tokens", "seed", "stop", "presence_penalty", "top_k"):
        assert body[key] == gen[key]
    assert body["repetition_penalty"] == 1.05 and body["chat_template_kwargs"] == {"enable_thinking": False}
    for key in ("max_retries", "retry_delay", "request_timeout", "max_input_tokens", "extra_body", "extra_headers"):
        assert key not in body
    assert req.headers["x-trace"] == "abc"
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert body["model"] == "test-model"


def test_server_and_key_from_environment(openai_server, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "env-key-1234")
    openai_server.add("from env")
    llm = get_chat_model({"model": "m", "model_server": "openai"})
    assert llm.chat(USER, stream=False)[0].content == "from env"
    assert openai_server.requests[0].headers["authorization"] == "Bearer env-key-1234"


def test_multimodal_guess_from_model_name():
    for name in ("qwen-vl-max", "Qwen2.5-VL-7B-Instruct", "gpt-4o-mini", "qwen2.5-omni-7b", "llava-1.6"):
        assert looks_multimodal(name), name
    for name in ("qwen-plus", "gpt-3.5-turbo", "Qwen2.5-7B-Instruct", "devlin"):
        assert not looks_multimodal(name), name
    assert OpenAICompatModel({"model": "qwen-plus", "multimodal": True}).support_multimodal_input


# ---- images ------------------------------------------------------------------------------------------------


def test_images_as_image_url_parts(openai_server, tmp_path):
    png = tmp_path / "dot.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(64)))
    openai_server.add("a dot", "a cat")
    llm = model(openai_server, model="qwen-vl-max")
    content = [{"text": "what is this?"}, {"image": str(png)}, {"image": "https://example.com/cat.jpg"}]
    llm.chat([{"role": "user", "content": content}], stream=False)
    parts = openai_server.requests[0].json["messages"][0]["content"]
    assert parts[0] == {"type": "text", "text": "what is this?"}
    assert parts[1]["type"] == "image_url"
    assert parts[1]["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode()
    assert parts[2] == {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}}
    llm.chat([{"role": "user", "content": [{"image": png.as_uri()}]}], stream=False)
    part = openai_server.requests[1].json["messages"][0]["content"][0]
    assert part["image_url"]["url"].startswith("data:image/png;base64,")


def test_text_only_model_gets_placeholder(openai_server, tmp_path):
    openai_server.add("no eyes")
    llm = model(openai_server, model="qwen-plus")
    llm.chat([{"role": "user", "content": [{"text": "see"}, {"image": str(tmp_path / "x.jpg")}]}], stream=False)
    content = openai_server.requests[0].json["messages"][0]["content"]
    assert isinstance(content, str) and "see" in content and "[image: x.jpg]" in content


def test_missing_local_image_is_a_clear_error(openai_server, tmp_path):
    llm = model(openai_server, model="qwen-vl-max")
    with pytest.raises(FileNotFoundError, match="nope.png"):
        llm.chat([{"role": "user", "content": [{"image": str(tmp_path / "nope.png")}]}], stream=False)
    assert openai_server.requests == []


# ---- faults: retried -----------------------------------------------------------------------------------------


_TRANSIENT = {
    "429": Reply(status=429),
    "500": Reply(status=500),
    "502-html": Reply(status=502, body="<html><body><h1>502 Bad Gateway</h1></body></html>", content_type="text/html"),
    "503": Reply(status=503, error={"message": "overloaded"}),
    "empty-choices": Reply(empty_choices=True),
}
_STREAM_ONLY = {
    "drop": Reply(drop_after=1),  # the connection drops before any text
    "malformed": Reply(malformed_after=1),  # a data line that is not JSON, before any text
    "ended-early": Reply(end_after=1),  # the body ends cleanly with no finish_reason nor [DONE]
}
_CASES = [(k, v, True) for k, v in {**_TRANSIENT, **_STREAM_ONLY}.items()] + [
    (k, v, False) for k, v in _TRANSIENT.items()
]


@pytest.mark.parametrize(
    "fault,stream", [c[1:] for c in _CASES], ids=[f"{c[0]}-{'stream' if c[2] else 'once'}" for c in _CASES]
)
def test_transient_faults_are_retried(openai_server, fault, stream):
    openai_server.add(fault, "recovered")
    out = model(openai_server).chat(USER, stream=stream)
    final = out if not stream else list(out)[-1]
    assert final[0].content == "recovered"
    assert len(openai_server.requests) == 2


def test_retries_are_bounded(openai_server):
    openai_server.add(*[Reply(status=500, error={"message": "boom"})] * 5)
    with pytest.raises(ModelServiceError) as info:
        list(model(openai_server).chat(USER))
    assert info.value.code == 500 and "boom" in info.value.message and info.value.retryable
    assert len(openai_server.requests) == 3  # 1 + max_retries=2


def test_retry_after_is_honoured(openai_server):
    openai_server.add(Reply(status=429, headers={"Retry-After": "0.4"}, error={"message": "slow down"}), "ok")
    start = time.monotonic()
    assert model(openai_server, generate_cfg={"retry_delay": 5}).chat(USER, stream=False)[0].content == "ok"
    assert 0.4 <= time.monotonic() - start < 3
    assert len(openai_server.requests) == 2


def test_slow_first_byte_within_timeout(openai_server):
    openai_server.add(Reply(text="late but fine", delay=0.3))
    llm = model(openai_server, generate_cfg={"request_timeout": 3})
    assert list(llm.chat(USER))[-1][0].content == "late but fine"
    assert len(openai_server.requests) == 1


def test_first_byte_past_timeout_is_retried_then_raises(openai_server):
    openai_server.add(*[Reply(text="too late", delay=1.0)] * 2)
    llm = model(openai_server, generate_cfg={"request_timeout": 0.2, "max_retries": 1})
    start = time.monotonic()
    with pytest.raises(ModelServiceError) as info:
        list(llm.chat(USER))
    assert info.value.code == "timeout" and info.value.retryable and not info.value.partial
    assert len(openai_server.requests) == 2
    assert time.monotonic() - start < 1.5


def test_unreachable_server(openai_server):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    llm = get_chat_model(
        {"model": "m", "model_server": f"http://127.0.0.1:{port}/v1", "api_key": KEY, "generate_cfg": FAST}
    )
    with pytest.raises(ModelServiceError) as info:
        llm.chat(USER, stream=False)
    assert info.value.code == "connection_error" and str(port) in str(info.value)
    assert KEY not in str(info.value)


# ---- faults: not retried -----------------------------------------------------------------------------------


def test_bad_request_is_not_retried(openai_server):
    openai_server.add(Reply(status=400, error={"message": "temperature must be <= 2", "param": "temperature"}), "x")
    with pytest.raises(ModelServiceError) as info:
        list(model(openai_server).chat(USER))
    assert info.value.code == 400 and "temperature must be <= 2" in str(info.value) and not info.value.retryable
    assert len(openai_server.requests) == 1


@pytest.mark.parametrize(
    "error",
    [
        {"message": "This model's maximum context length is 8192 tokens.", "code": "context_length_exceeded"},
        {"message": "The input (9000 tokens) is longer than the model's context length (8192 tokens)."},
    ],
)
def test_context_too_long(openai_server, error):
    openai_server.add(Reply(status=400, error=error), "x")
    with pytest.raises(ModelServiceError) as info:
        model(openai_server).chat(USER, stream=False)
    assert info.value.code == "context_too_long" and not info.value.retryable
    assert len(openai_server.requests) == 1


@pytest.mark.parametrize("status", [401, 403, 404])
def test_auth_and_not_found_not_retried_and_key_never_shown(openai_server, status):
    openai_server.add(Reply(status=status, error={"message": f"Incorrect API key provided: {KEY}."}), "x")
    with pytest.raises(ModelServiceError) as info:
        list(model(openai_server).chat(USER))
    assert info.value.code == status and not info.value.retryable
    assert KEY not in str(info.value) and KEY not in repr(info.value) and "Incorrect API key" in str(info.value)
    assert len(openai_server.requests) == 1


def test_tools_rejected_is_reported_as_tools_unsupported(openai_server):
    openai_server.add(Reply(status=400, error={"message": '"auto" tool choice requires --enable-auto-tool-choice'}))
    llm = model(openai_server)
    with pytest.raises(ModelServiceError) as info:
        collect(llm._chat_stream(to_messages(USER), [WEATHER], {}, None))
    assert info.value.code == "tools_unsupported"


@pytest.mark.parametrize("stream", [True, False])
def test_html_instead_of_an_answer(openai_server, stream):
    openai_server.add(Reply(body="<html><body>Welcome to my web UI</body></html>", content_type="text/html"), "x")
    with pytest.raises(ModelServiceError) as info:
        list(model(openai_server).chat(USER, stream=stream))
    assert info.value.code == "bad_response" and "Welcome to my web UI" in info.value.message
    assert not info.value.retryable and len(openai_server.requests) == 1


def test_json_error_event_in_stream(openai_server):
    openai_server.add(
        Reply(body='data: {"error": {"message": "model crashed", "code": 400}}\n\n', content_type="text/event-stream")
    )
    with pytest.raises(ModelServiceError, match="model crashed") as info:
        list(model(openai_server).chat(USER))
    assert info.value.code == 400


# ---- streams that break after content --------------------------------------------------------------------


@pytest.mark.parametrize(
    "fault",
    [
        Reply(text="abcdefghijkl", drop_after=3),
        Reply(text="abcdefghijkl", malformed_after=3),
        Reply(text="abcdefghijkl", end_after=3),
    ],
    ids=["drop", "malformed", "ended-early"],
)
def test_break_after_content_raises_partial_and_is_not_replayed(openai_server, fault):
    openai_server.add(fault, "must not be used")
    seen = []
    with pytest.raises(ModelServiceError) as info:
        for rsp in model(openai_server).chat(USER):
            seen.append(rsp[0].content)
    assert info.value.partial and info.value.retryable
    assert seen == ["abcd", "abcdefgh"]
    assert len(openai_server.requests) == 1 and openai_server.pending == 1


def test_stall_mid_stream_times_out_as_partial(openai_server):
    openai_server.add(Reply(text="abcdefgh", stall_after=2, stall=5))
    llm = model(openai_server, generate_cfg={"request_timeout": 0.3})
    start = time.monotonic()
    seen = []
    with pytest.raises(ModelServiceError) as info:
        for rsp in BasicAgent(llm=llm).run(USER):
            seen.append(rsp)
    assert info.value.code == "timeout" and info.value.partial
    assert seen[-1][0]["content"] == "abcd" and len(openai_server.requests) == 1
    assert time.monotonic() - start < 2


def test_closing_the_stream_closes_the_connection(openai_server):
    openai_server.add(Reply(text="x" * 400, chunk_size=1, interval=0.01))
    stream = model(openai_server).chat(USER)
    assert next(stream)[0].content == "x"
    stream.close()
    assert openai_server.wait_done(0, timeout=5) == "aborted"


def test_closing_an_agent_run_closes_the_connection(openai_server):
    openai_server.add(Reply(text="y" * 400, chunk_size=1, interval=0.01))
    run = BasicAgent(llm=model(openai_server)).run(USER)
    next(run)
    run.close()
    assert openai_server.wait_done(0, timeout=5) == "aborted"


# ---- the SSE reader ----------------------------------------------------------------------------------------


def test_sse_reader_handles_any_chunking():
    body = (
        b": comment\r\n"
        b'event: message\r\ndata: {"a": 1}\r\n\r\n'
        b'data: {"b":\ndata: 2}\n\n'
        b"id: 7\nretry: 100\n\n"
        b"data:[DONE]\n\n"
    )
    expected = [b'{"a": 1}', b'{"b":\n2}', b"[DONE]"]
    for size in (1, 2, 3, 5, 8, 13, len(body)):
        chunks = [body[i : i + size] for i in range(0, len(body), size)]
        assert list(sse_data(chunks)) == expected, size
    assert list(sse_data([b'data: {"x": 1}'])) == [b'{"x": 1}']  # no trailing blank line
    assert list(sse_data([b'{"error": {"message": "raw"}}\n'])) == [b'{"error": {"message": "raw"}}']


def test_server_rejecting_tools_falls_back_to_prompted_calls(openai_server):
    rejection = Reply(status=400, error={"message": "registry.ollama.ai/library/gemma:2b does not support tools"})
    call_text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    openai_server.add(rejection, Reply(text=call_text, chunk_size=5), Reply(text=call_text))
    llm = model(openai_server)
    reply = list(llm.chat(USER, [WEATHER]))[-1]
    assert reply[-1].function_call.name == "get_weather"
    assert json.loads(reply[-1].function_call.arguments) == {"city": "Oslo"}
    assert not llm.native_tools
    first, second = (r.json for r in openai_server.requests)
    assert "tools" in first and "tools" not in second
    assert "get_weather" in json.dumps(second["messages"])
    llm.chat(USER, [WEATHER], stream=False)  # later calls go straight to prompted calling
    assert "tools" not in openai_server.requests[2].json and len(openai_server.requests) == 3


# ---- what real servers do differently -----------------------------------------------------------------------


def sse(*events: dict) -> Reply:
    """A reply whose body is exactly these events (then [DONE])."""
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    return Reply(body=body, content_type="text/event-stream")


def delta(d: dict, index: int = 0, finish: str | None = None) -> dict:
    return {"choices": [{"index": index, "delta": d, "finish_reason": finish}]}


def test_json_completion_to_a_streaming_request(openai_server):
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "not streamed"}}]}
    openai_server.add(Reply(body=json.dumps(body), content_type="application/json"))
    assert list(model(openai_server).chat(USER))[-1][0].content == "not streamed"


def test_only_the_first_of_several_choices(openai_server):
    openai_server.add(
        sse(delta({"content": "A1"}), delta({"content": "B1"}, 1), delta({"content": "A2"}), delta({}, 0, "stop"))
    )
    assert list(model(openai_server).chat(USER))[-1][0].content == "A1A2"


def test_content_as_parts_and_calls_without_ids(openai_server):
    call = {"function": {"name": "get_weather", "arguments": "{}"}}
    openai_server.add(
        sse(
            delta({"content": [{"type": "text", "text": "Checking"}]}),
            delta({"tool_calls": [{"index": 0, **call}, {"index": 1, **call}]}),
            delta({}, 0, "tool_calls"),
        )
    )
    reply = list(model(openai_server).chat(USER, [WEATHER]))[-1]
    assert reply[0].content == "Checking"
    ids = [m.extra["function_id"] for m in reply[1:]]
    assert len(ids) == 2 and len(set(ids)) == 2 and all(ids)


def test_call_name_repeated_in_every_delta(openai_server):
    openai_server.add(
        sse(
            delta({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "get_weather", "arguments": '{"a"'}}]}),
            delta({"tool_calls": [{"index": 0, "function": {"name": "get_weather", "arguments": ": 1}"}}]}),
            delta({}, 0, "tool_calls"),
        )
    )
    reply = list(model(openai_server).chat(USER, [WEATHER]))[-1]
    assert (reply[0].function_call.name, reply[0].function_call.arguments) == ("get_weather", '{"a": 1}')


def test_finish_reason_on_the_last_text_chunk_and_no_done(openai_server):
    body = f"data: {json.dumps(delta({'content': 'Hi'}))}\n\ndata: {json.dumps(delta({'content': '!'}, 0, 'stop'))}\n\n"
    openai_server.add(Reply(body=body, content_type="text/event-stream"))
    assert list(model(openai_server).chat(USER))[-1][0].content == "Hi!"


@pytest.mark.parametrize(
    "gen,expected",
    [
        ({}, {}),
        ({"function_choice": "required"}, {"tool_choice": "required"}),
        ({"function_choice": "none"}, {"tool_choice": "none"}),
        (
            {"function_choice": "get_weather"},
            {"tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
        ),
        ({"parallel_function_calls": False}, {"parallel_tool_calls": False}),
        (
            {"function_choice": "get_weather", "parallel_function_calls": False},
            {"tool_choice": {"type": "function", "function": {"name": "get_weather"}}, "parallel_tool_calls": False},
        ),
    ],
)
def test_function_choice_and_parallel_calls_become_tool_choice(openai_server, gen, expected):
    """The choice reaches the server by every path (sync and async, streamed and whole), and only with tools."""
    openai_server.add(*["ok"] * (len(PATHS) + 1))
    llm = model(openai_server, generate_cfg=gen)
    sent = tool_fields_by_path(llm, USER, [WEATHER], lambda: [r.json for r in openai_server.requests])
    assert sent == [expected] * len(PATHS)


def test_a_tool_choice_in_generate_cfg_is_sent_as_given(openai_server):
    """The server's own fields, given in generate_cfg, win over function_choice by every path (the sync path once
    sent function_choice's, the async path the given one)."""
    given = {"type": "function", "function": {"name": "get_time"}}
    openai_server.add(*["ok"] * len(PATHS))
    gen = {
        "function_choice": "none",
        "parallel_function_calls": False,
        "tool_choice": given,
        "parallel_tool_calls": True,
    }
    ask_every_path(model(openai_server, generate_cfg=gen), USER, [WEATHER])
    for path, request in zip(PATHS, openai_server.requests, strict=True):
        assert request.json["tool_choice"] == given and request.json["parallel_tool_calls"] is True, path


def test_retry_after_forms():
    from chatagent.llm.openai.errors import _retry_after

    assert _retry_after({"retry-after": "3"}) == 3.0
    assert _retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    future = time.time() + 30
    when = email.utils.formatdate(future, usegmt=True)
    assert 25 <= _retry_after({"retry-after": when}) <= 31
    assert _retry_after({"retry-after": "soon"}) is None and _retry_after({}) is None


def test_key_never_in_logs(openai_server, caplog):
    openai_server.add(Reply(status=429, error={"message": f"rate limit for key {KEY}"}), "fine")
    with caplog.at_level("DEBUG"):
        assert model(openai_server).chat(USER, stream=False)[0].content == "fine"
    assert "rate limit" in caplog.text and KEY not in caplog.text


# ---- servers that refuse or ignore stream_options ------------------------------------------------------


@pytest.fixture
def fresh_server_memory(monkeypatch):
    """Forget which servers refused stream_options (the loopback server is shared by the whole session)."""
    from chatagent.llm.openai import request as openai_request

    monkeypatch.setattr(openai_request, "_NO_STREAM_OPTIONS", set())


AZURE_400 = Reply(status=400, error={"message": "Unrecognized request argument supplied: stream_options"})
PROXY_422 = Reply(
    status=422,
    body=json.dumps({"detail": [{"loc": ["body", "stream_options"], "msg": "Extra inputs are not permitted"}]}),
    content_type="application/json",
)


@pytest.mark.parametrize("refusal", [AZURE_400, PROXY_422], ids=["azure-400", "proxy-422"])
def test_a_server_refusing_stream_options_is_asked_again_without_and_remembered(
    openai_server, fresh_server_memory, refusal, caplog
):
    from chatagent.utils.tokens import count_tokens

    answer = "The ferry to Skye leaves from pier four at seven."
    openai_server.add(refusal)
    openai_server.add(answer)
    usage = Usage()
    final = list(model(openai_server).chat(USER, usage=usage))[-1]
    assert final[0].content == answer
    first, second = openai_server.chat_requests
    assert "stream_options" in first.json and "stream_options" not in second.json
    assert "rejects stream_options" in caplog.text
    # the server sent no usage: estimated, never 0
    assert usage.completion_tokens == count_tokens(answer) and usage.prompt_tokens > 0
    # remembered for the server: another model on it does not ask again
    openai_server.add("again")
    list(model(openai_server).chat(USER))
    assert "stream_options" not in openai_server.chat_requests[-1].json
    assert len(openai_server.chat_requests) == 3


def test_a_stream_without_a_usage_report_is_estimated_and_a_run_counts_it(openai_server):
    from chatagent.utils.tokens import count_tokens

    events = [
        {"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]} for piece in ("Hel", "lo")
    ]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    openai_server.add(Reply(body=body, content_type="text/event-stream"))
    run = BasicAgent(llm=model(openai_server)).run([{"role": "user", "content": "Say hello to everyone here."}])
    assert list(run)[-1][-1]["content"] == "Hello"
    assert run.usage.completion_tokens == count_tokens("Hello")
    assert run.usage.prompt_tokens >= count_tokens("Say hello to everyone here.")


def test_other_400s_are_not_retried_without_stream_options(openai_server, fresh_server_memory):
    openai_server.add(Reply(status=400, error={"message": "messages[0].content must not be empty"}))
    with pytest.raises(ModelServiceError) as info:
        list(model(openai_server).chat(USER))
    assert info.value.code == 400 and len(openai_server.chat_requests) == 1

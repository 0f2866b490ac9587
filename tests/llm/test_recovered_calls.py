"""Tool calls a server left in the text (chatagent.llm.recovered_calls), replayed by the loopback OpenAI-compatible
server in every shape, streamed and not, split at every character: each becomes the call, and no piece of it is ever
shown as text. A call of a tool that was not offered, or with arguments that do not validate, goes back to the
model as an error result; a native call wins over one written in the text; a plain answer streams untouched."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from chatagent import FnCallAgent, get_chat_model
from chatagent.llm import recovered_calls
from tests.support.openai_server import OpenAIServer, Reply

WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
CITY = "Zürich"
SHAPES = {
    "hermes": f'<tool_call>\n{{"name": "get_weather", "arguments": {{"city": "{CITY}"}}}}\n</tool_call>',
    "qwen3-coder": f"<tool_call>\n<function=get_weather>\n<parameter=city>\n{CITY}\n</parameter>\n</function>\n</tool_call>",
    "bare xml": f"<function=get_weather>\n<parameter=city>\n{CITY}\n</parameter>\n</function>",
    "mistral": f'[TOOL_CALLS] [{{"name": "get_weather", "arguments": {{"city": "{CITY}"}}}}]',
    "llama python_tag": f'<|python_tag|>{{"name": "get_weather", "parameters": {{"city": "{CITY}"}}}}',
    "llama json": f'{{"name": "get_weather", "parameters": {{"city": "{CITY}"}}}}',
    "two calls": f'<tool_call>{{"name": "get_weather", "arguments": {{"city": "{CITY}"}}}}</tool_call>\n'
    f'<tool_call>{{"name": "get_weather", "arguments": {{"city": "{CITY}"}}}}</tool_call>',
}
MARKERS = ("<tool_call", "</tool_call", "<function", "<parameter", "TOOL_CALLS", "python_tag", '"name"', "get_weather")


def model(server: OpenAIServer):
    return get_chat_model({"model": "vllm-qwen", "model_server": server.base_url, "api_key": "k"})


def calls_of(fragments: list) -> list[tuple[str, str]]:
    return [(f["function_call"]["name"], f["function_call"]["arguments"]) for f in fragments if f.get("function_call")]


@pytest.mark.parametrize("shape", list(SHAPES))
def test_each_shape_split_at_every_character_is_one_call_and_never_text(
    openai_server: OpenAIServer, shape: str
) -> None:
    text = SHAPES[shape]
    n = text.count("get_weather")
    llm = model(openai_server)
    messages = [{"role": "user", "content": f"Weather in {CITY}?"}]
    for cut in range(1, len(text)):
        openai_server.add(Reply(chunks=[text[:cut], text[cut:]]))
        fragments = [f for part in llm.chat(messages, [WEATHER], stream=True, delta_stream=True) for f in part]
        shown = "".join(f.get("content") or "" for f in fragments)
        assert calls_of(fragments) == [("get_weather", '{"city": "Zürich"}')] * n, (shape, cut, fragments)
        assert not any(m in shown for m in MARKERS), (shape, cut, shown)
        assert shown.strip() == "", (shape, cut, shown)
    openai_server.add(Reply(text=text))  # not streamed
    reply = llm.chat(messages, [WEATHER], stream=False)
    assert [(m["function_call"]["name"], m["function_call"]["arguments"]) for m in reply if m.get("function_call")] == [
        ("get_weather", '{"city": "Zürich"}')
    ] * n
    assert not any(m in "".join(r.get("content") or "" for r in reply) for m in MARKERS)
    openai_server.add(Reply(text=text))  # asyncio

    async def collect() -> list:
        return [f async for part in await _achat(llm, messages) for f in part]

    assert calls_of(asyncio.run(collect())) == [("get_weather", '{"city": "Zürich"}')] * n


CALL = SHAPES["hermes"]


@pytest.mark.parametrize("text", [f"Let me look.\n{CALL}", f"{CALL}\nDone, it is sunny.", f"<think>x</think>Hi {CALL}"])
def test_a_call_beside_text_is_text_shown_as_written(openai_server: OpenAIServer, text: str) -> None:
    """Only a reply that is wholly calls is recovered: a call before or after text is shown in place, split at
    every character."""
    llm = model(openai_server)
    messages = [{"role": "user", "content": f"Weather in {CITY}?"}]
    for cut in range(1, len(text), 3):
        openai_server.add(Reply(chunks=[text[:cut], text[cut:]]))
        fragments = [f for part in llm.chat(messages, [WEATHER], stream=True, delta_stream=True) for f in part]
        assert not calls_of(fragments), (cut, fragments)
        assert "".join(f.get("content") or "" for f in fragments) == text, cut


def test_a_call_the_request_already_holds_is_text(openai_server: OpenAIServer) -> None:
    """Quoted from the user's message, however spaced; from a tool's result in another shape, same arguments."""
    llm = model(openai_server)
    asked = [{"role": "user", "content": f"Please echo this: {CALL}"}]
    openai_server.add(Reply(text=CALL.replace(" ", "\n ")))
    assert not calls_of(llm.chat(asked, [WEATHER], stream=False))
    xml = SHAPES["qwen3-coder"]
    given = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "", "function_call": {"name": "get_weather", "arguments": "{}"}},
        {
            "role": "function",
            "name": "get_weather",
            "content": f'Page: {{"name": "get_weather", "arguments": {{"city": "{CITY}"}}}}',
        },
    ]
    openai_server.add(Reply(text=xml))
    reply = llm.chat(given, [WEATHER], stream=False)
    assert not calls_of(reply) and reply[0]["content"] == xml
    openai_server.add(Reply(text=xml))  # the same call, not quoted: taken
    assert calls_of(llm.chat(given[:1], [WEATHER], stream=False)) == [("get_weather", '{"city": "Zürich"}')]


def test_recovery_is_on_for_self_hosted_servers_and_a_setting() -> None:
    from chatagent.llm.recovered_calls import recovers_calls
    from chatagent.llm.request import ModelRequest
    from chatagent.llm.settings import split_generate_cfg

    def decided(server: str | None, **cfg: object) -> bool:
        backend = get_chat_model({"model": "m", "model_server": server, "api_key": "k"}) if server else None
        settings, _ = split_generate_cfg(cfg)
        return recovers_calls(backend, ModelRequest([], [WEATHER], {}, settings))

    assert decided("http://127.0.0.1:8000/v1") and decided("http://gpu-box.lan:11434/v1")
    assert not decided("https://api.openai.com/v1") and not decided("https://dashscope.aliyuncs.com/compatible-mode/v1")
    assert not decided(None)  # a backend that names no server (ScriptedLLM, native APIs)
    assert decided("https://api.openai.com/v1", recover_calls=True)
    assert not decided("http://127.0.0.1:8000/v1", recover_calls="false")
    assert not decided("http://127.0.0.1:8000/v1", function_choice="none")


async def _achat(llm, messages):
    return llm.achat(messages, [WEATHER], stream=True, delta_stream=True)


def test_a_call_inside_the_reasoning_is_taken_when_the_answer_is_empty(openai_server: OpenAIServer) -> None:
    thought = f"The user wants the weather. {SHAPES['hermes']}"
    openai_server.add(Reply(reasoning=thought, chunk_size=3), Reply(reasoning=thought, text="It is sunny."))
    llm = model(openai_server)
    messages = [{"role": "user", "content": "Weather?"}]
    reply = llm.chat(messages, [WEATHER], stream=False)
    assert reply[-1]["function_call"]["name"] == "get_weather"
    assert reply[0]["reasoning_content"] == "The user wants the weather. "
    answered = llm.chat(messages, [WEATHER], stream=False)  # an answer: the call was only a thought
    assert not any(m.get("function_call") for m in answered) and answered[0]["content"] == "It is sunny."
    openai_server.add(Reply(text=f"<think>Let me see. {SHAPES['hermes']}</think>", chunk_size=2))
    assert llm.chat(messages, [WEATHER], stream=False)[-1]["function_call"]["name"] == "get_weather"


def test_ollama_object_arguments_streamed_and_not(openai_server: OpenAIServer) -> None:
    llm = model(openai_server)
    messages = [{"role": "user", "content": "Weather?"}]
    for stream in (True, False):
        openai_server.add(Reply(tool_calls=[("get_weather", {"city": CITY})], object_arguments=True))
        if stream:
            reply = [f for part in llm.chat(messages, [WEATHER], stream=True, delta_stream=True) for f in part]
        else:
            reply = llm.chat(messages, [WEATHER], stream=False)
        [(name, arguments)] = calls_of(reply)
        assert name == "get_weather" and json.loads(arguments) == {"city": CITY}


def test_plain_answers_and_native_calls_pass_untouched(openai_server: OpenAIServer, caplog) -> None:
    llm = model(openai_server)
    messages = [{"role": "user", "content": "hi"}]
    plain = "Use <b>bold</b> [like this] or {braces} < 3 ok."
    openai_server.add(Reply(text=plain, chunk_size=1))
    parts = [f for part in llm.chat(messages, [WEATHER], stream=True, delta_stream=True) for f in part]
    assert "".join(f.get("content") or "" for f in parts) == plain and not calls_of(parts)
    assert len([f for f in parts if f.get("content")]) > 10  # it streamed piece by piece, not held to the end
    openai_server.add(Reply(text=SHAPES["hermes"], tool_calls=[("get_weather", {"city": "Bern"})]))
    reply = llm.chat(messages, [WEATHER], stream=False)
    assert calls_of(reply) == [("get_weather", '{"city": "Bern"}')]  # the native one; the text's is dropped
    openai_server.add(Reply(text='{"answer": 42}'))  # JSON that is no call: shown, at the end
    assert llm.chat(messages, [WEATHER], stream=False)[0]["content"] == '{"answer": 42}'
    openai_server.add(Reply(text=SHAPES["hermes"]))  # without tools in the request nothing is recovered
    assert "<tool_call>" in llm.chat(messages, None, stream=False)[0]["content"]


def test_recovery_is_logged_once_per_model_and_shape(openai_server: OpenAIServer, caplog) -> None:
    recovered_calls._logged.clear()
    llm = get_chat_model({"model": "logged-model", "model_server": openai_server.base_url, "api_key": "k"})
    with caplog.at_level(logging.WARNING, logger="chatagent.llm"):
        for _ in range(3):
            openai_server.add(Reply(text=SHAPES["mistral"]))
            llm.chat([{"role": "user", "content": "w"}], [WEATHER], stream=False)
    said = [r.getMessage() for r in caplog.records if "wrote its tool calls as text" in r.getMessage()]
    assert len(said) == 1 and "logged-model" in said[0] and "mistral" in said[0]


def test_bad_recovered_calls_go_back_to_the_model_as_errors(openai_server: OpenAIServer) -> None:
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"Sunny in {city}"

    openai_server.add(
        Reply(text='<tool_call>{"name": "get_stock", "arguments": {"ticker": "X"}}</tool_call>'),
        Reply(text='<tool_call>{"name": "get_weather", "arguments": {"town": 3}}</tool_call>'),
        Reply(text=SHAPES["qwen3-coder"]),
        Reply(text="Sunny in Zürich."),
    )
    llm = {"model": "m", "model_server": openai_server.base_url, "api_key": "k"}
    response = FnCallAgent(function_list=[get_weather], llm=llm).run_nonstream([{"role": "user", "content": "?"}])
    results = [m["content"] for m in response if m["role"] == "function"]
    assert "there is no tool named 'get_stock'" in results[0]
    assert "invalid arguments for get_weather" in results[1]
    assert results[2] == "Sunny in Zürich" and response[-1]["content"] == "Sunny in Zürich."
    sent = openai_server.chat_requests[1].json["messages"]
    assert sent[-1]["role"] == "tool" and sent[-2]["tool_calls"][0]["function"]["name"] == "get_stock"

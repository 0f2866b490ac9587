"""Prompt-based function calling: prompts rendered, calls parsed from streamed text, the fallback path."""

from __future__ import annotations

import json
import logging

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatagent import FnCallAgent, ModelServiceError, Reply, ScriptedLLM, Usage, get_chat_model, tool, tool_call
from chatagent.llm.fncall_prompt import (
    FN_ARGS,
    FN_EXIT,
    FN_NAME,
    FN_RESULT,
    StreamParser,
    parse_reply,
    with_stop_words,
)
from chatagent.llm.prepare import untrusted
from chatagent.schema import ASSISTANT, Message, to_messages
from chatagent.schema.fragment import Fragment
from chatagent.schema.stream import collect
from tests.support.openai_server import Reply as ServerReply

pytestmark = pytest.mark.timeout(60)

WEATHER = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "zip": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
    },
}
TIME = {"name": "get_time", "description": "The time now.", "parameters": {"type": "object", "properties": {}}}
FUNCS = [WEATHER, TIME]
USER = to_messages(
    [{"role": "user", "content": "What's the weather in Paris?"}]
)  # Messages in, Messages out (dicts in give dicts)
FAST = {"retry_delay": 0.001}


def prompted(replies: list, fmt: str = "nous", chunk_size: int = 4, **gen) -> ScriptedLLM:
    """A model whose replies are the raw text it writes, in prompt-based function calling."""
    return ScriptedLLM(replies, chunk_size=chunk_size, generate_cfg={"fncall_prompt_type": fmt, **FAST, **gen})


def dump(msgs: list[Message]) -> list[dict]:
    """Messages as dicts without the generated call ids (checked separately)."""
    out = []
    for m in msgs:
        d = dict(m) if isinstance(m, dict) else m.model_dump()
        d.pop("index", None)
        extra = {k: v for k, v in (d.pop("extra", None) or {}).items() if k != "function_id"}
        if extra:
            d["extra"] = extra
        out.append(d)
    return out


def text(content: str, reasoning: str | None = None) -> dict:
    d = {"role": ASSISTANT, "content": content}
    if reasoning is not None:
        d["reasoning_content"] = reasoning
    return d


def call(name: str, args: dict | str) -> dict:
    arguments = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return {"role": ASSISTANT, "content": "", "function_call": {"name": name, "arguments": arguments}}


def parse_chunks(raw: str, chunks: list[str] | None = None, fmt: str = "nous") -> list[Message]:
    """The parser alone over `raw` split into `chunks` (one chunk if None)."""
    chunks = [raw] if chunks is None else chunks
    assert "".join(chunks) == raw
    stream = [[Fragment(ASSISTANT, c, index=0)] for c in chunks]
    return collect(StreamParser(fmt, functions=FUNCS).run(stream))


def split_at(raw: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(raw) + 1) for c in cuts} | {0, len(raw)})
    return [raw[a:b] for a, b in zip(points, points[1:], strict=False)]


PARIS = {"city": "Paris"}
CALL_PARIS = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'

# ---- golden: outputs models really write ----------------------------------------------------------------------

NOUS_GOLDEN = [
    pytest.param("It is sunny in Paris.", [text("It is sunny in Paris.")], id="plain-text"),
    pytest.param(CALL_PARIS, [call("get_weather", PARIS)], id="one-call"),
    pytest.param("Let me check.\n" + CALL_PARIS, [text("Let me check."), call("get_weather", PARIS)], id="text-first"),
    pytest.param(
        '<tool_call>\n```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```\n</tool_call>',
        [call("get_weather", PARIS)],
        id="code-fence",
    ),
    pytest.param(
        "<tool_call>\n{'name': 'get_weather', 'arguments': {'city': 'Paris', 'days': 3, 'zip': None,}}\n</tool_call>",
        [call("get_weather", {"city": "Paris", "days": 3, "zip": None})],
        id="python-dict",
    ),
    pytest.param(
        "<tool_call>\n{name: 'get_weather', arguments: {city: 'Paris', days: 2,},}\n</tool_call>",
        [call("get_weather", {"city": "Paris", "days": 2})],
        id="json5-unquoted-keys",
    ),
    pytest.param(
        "**Action:**\n<tool_call>\n**Action Input:** ```json\n"
        '{"name": "get_weather", "arguments": {"city": "Paris"}}\n```\n</tool_call>',
        [text("**Action:**"), call("get_weather", PARIS)],
        id="action-decoration",
    ),
    pytest.param(
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par',
        [call("get_weather", {"city": "Par"})],
        id="truncated-in-string",
    ),
    pytest.param(
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "da',
        [call("get_weather", PARIS)],
        id="truncated-in-key",
    ),
    pytest.param(
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}',
        [call("get_weather", PARIS)],
        id="missing-closing-tag",
    ),
    pytest.param(
        '<think>\nI could write <tool_call>{"name": "get_time"}</tool_call> but no.\n</think>\n\nIt is noon.',
        [text("It is noon.", reasoning='I could write <tool_call>{"name": "get_time"}</tool_call> but no.')],
        id="call-inside-think",
    ),
    pytest.param(
        "<think>\nThe user wants the weather.\n</think>\n\n" + CALL_PARIS,
        [text("", reasoning="The user wants the weather."), call("get_weather", PARIS)],
        id="think-then-call",
    ),
    pytest.param(
        "Checking both.\n" + CALL_PARIS + '\n<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>',
        [text("Checking both."), call("get_weather", PARIS), call("get_time", {})],
        id="two-calls",
    ),
    pytest.param(
        CALL_PARIS + '<tool_call>{"name": "get_time", "arguments": {}}',
        [call("get_weather", PARIS), call("get_time", {})],
        id="two-calls-no-newline-last-unclosed",
    ),
    pytest.param(CALL_PARIS + "\nI will wait for the result.", [call("get_weather", PARIS)], id="text-after-dropped"),
    pytest.param(
        CALL_PARIS + "\n<tool_response>\nSunny, 25C\n</tool_response>\nIt is sunny.",
        [call("get_weather", PARIS)],
        id="imagined-response-cut",
    ),
    pytest.param(
        '<tool_call>\n{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}\n</tool_call>',
        [call("get_weather", PARIS)],
        id="arguments-as-json-string",
    ),
    pytest.param(
        '<tool_call>\n{"name": "get_weather", "parameters": {"city": "Paris"}}\n</tool_call>',
        [call("get_weather", PARIS)],
        id="parameters-key",
    ),
    pytest.param(
        '<tool_call>\n{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}'
        "\n</tool_call>",
        [call("get_weather", PARIS)],
        id="openai-shaped",
    ),
    pytest.param(
        '<tool_call>\nget_weather(city="Paris", days=3)\n</tool_call>',
        [call("get_weather", {"city": "Paris", "days": 3})],
        id="python-call-syntax",
    ),
    pytest.param(
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=zip>\n75001\n"
        "</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
        [call("get_weather", {"city": "Paris", "zip": "75001", "days": 3})],
        id="qwen3-coder-xml",
    ),
    pytest.param(
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "note": "line one\nline two"}}'
        "\n</tool_call>",
        [call("get_weather", {"city": "Paris", "note": "line one\nline two"})],
        id="raw-newline-in-string",
    ),
    pytest.param(
        "Compare a < b and <b>bold</b> and <tool_", [text("Compare a < b and <b>bold</b> and <tool_")], id="lt"
    ),
    pytest.param("\n\nHello\n", [text("Hello\n")], id="leading-whitespace"),
    pytest.param("<tool_call>\n\n</tool_call>", [text("")], id="empty-call"),
]


@pytest.mark.parametrize("raw, expected", NOUS_GOLDEN)
def test_nous_golden(raw, expected):
    llm = prompted([raw] * 3)
    assert dump(list(llm.chat(USER, FUNCS))[-1]) == expected
    assert dump(llm.chat(USER, FUNCS, stream=False)) == expected
    assert dump(collect(llm.chat(USER, FUNCS, delta_stream=True))) == expected


QWEN_GOLDEN = [
    pytest.param(
        f'{FN_NAME}: get_weather\n{FN_ARGS}: {{"city": "Paris"}}', [call("get_weather", PARIS)], id="one-call"
    ),
    pytest.param(
        f'I will look it up.\n{FN_NAME}: get_weather\n{FN_ARGS}: {{"city": "Paris"}}\n',
        [text("I will look it up."), call("get_weather", PARIS)],
        id="text-first",
    ),
    pytest.param(
        f'{FN_NAME}: get_weather\n{FN_ARGS}: {{"city": "Paris"}}\n{FN_NAME}: get_time\n{FN_ARGS}: {{}}',
        [call("get_weather", PARIS), call("get_time", {})],
        id="parallel",
    ),
    pytest.param(
        f'{FN_NAME}: get_weather\n{FN_ARGS}: {{"city": "Paris"}} <!-- an example comment -->',
        [call("get_weather", PARIS)],
        id="trailing-comment",
    ),
    pytest.param(
        f'{FN_NAME}: get_weather\n{FN_ARGS}: {{"city": "Paris"}}\n{FN_RESULT}: sunny\n{FN_EXIT}: It is sunny.',
        [call("get_weather", PARIS)],
        id="stop-word-not-honoured-by-server",
    ),
    pytest.param(
        f"{FN_NAME}: code_interpreter\n{FN_ARGS}: ```py\nprint(1)\n```",
        [call("code_interpreter", "```py\nprint(1)\n```")],
        id="code-args-kept",
    ),
    pytest.param(f"{FN_NAME}: get_time", [call("get_time", {})], id="no-args"),
    pytest.param(
        f"{FN_NAME}: get_weather\n{FN_ARGS}: {{'city': 'Paris', 'days': 2,}}",
        [call("get_weather", {"city": "Paris", "days": 2})],
        id="python-dict",
    ),
    pytest.param(
        f"<think>maybe {FN_NAME}: get_time</think>\nNo tool needed.",
        [text("No tool needed.", reasoning=f"maybe {FN_NAME}: get_time")],
        id="call-inside-think",
    ),
    pytest.param("Plain ✿ answer ✿FUNC", [text("Plain ✿ answer ✿FUNC")], id="stray-flower"),
    pytest.param(f"{FN_EXIT}: It is sunny.", [text("It is sunny.")], id="answer-after-return-tag"),
]


@pytest.mark.parametrize("raw, expected", QWEN_GOLDEN)
def test_qwen_golden(raw, expected):
    llm = prompted([raw] * 2, fmt="qwen")
    assert dump(list(llm.chat(USER, FUNCS))[-1]) == expected
    assert dump(llm.chat(USER, FUNCS, stream=False)) == expected


def test_calls_get_unique_ids_and_indexes_follow_the_text():
    raw = "Both.\n" + CALL_PARIS + '\n<tool_call>{"name": "get_time", "arguments": {}}</tool_call>'
    final = list(prompted([raw]).chat(USER, FUNCS))[-1]
    ids = [m.extra["function_id"] for m in final[1:]]
    assert len(set(ids)) == 2 and all(i.startswith("call_") for i in ids)
    assert final[0].extra is None or "function_id" not in final[0].extra


def test_unreadable_call_is_logged_not_shown(caplog):
    with caplog.at_level(logging.WARNING, logger="chatagent.llm"):
        out = parse_reply("<tool_call>\nplease run the weather tool\n</tool_call>")
    assert dump(out) == [text("")]
    assert "could not read a tool call" in caplog.text


# ---- streaming: a partial tag is never shown, whatever the chunking ----------------------------------------------

ALL_RAW = [(p.values[0], p.values[1], "nous") for p in NOUS_GOLDEN] + [
    (p.values[0], p.values[1], "qwen") for p in QWEN_GOLDEN
]


@pytest.mark.parametrize("raw, expected, fmt", ALL_RAW)
def test_every_two_chunk_split_and_char_by_char_agree(raw, expected, fmt):
    assert dump(parse_chunks(raw, list(raw), fmt)) == expected
    for cut in range(1, len(raw)):
        assert dump(parse_chunks(raw, [raw[:cut], raw[cut:]], fmt)) == expected, cut


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(ALL_RAW), cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=30))
def test_any_chunking_gives_the_same_reply(case, cuts):
    raw, expected, fmt = case
    assert dump(parse_chunks(raw, split_at(raw, cuts), fmt)) == expected


# Text made of pieces that look like the start of a tag, but no complete tag.
_PIECES = ["<", "<tool", "<tool_", "<tool_call", "</tool_call", "<tool_response", "<think", "</think", "</", "<b>"]
_PIECES += ["a", "Hi", " ", "\t", "\n", "{", "é", "✿", "✿FUNC"]
MARKERS = [
    "<tool_call>",
    "</tool_call>",
    "<think>",
    "</think>",
    "<tool_response>",
    FN_NAME,
    FN_ARGS,
    FN_RESULT,
    FN_EXIT,
]


def render_call(fmt: str, name: str, n: int) -> str:
    if fmt == "nous":
        return f'\n<tool_call>\n{{"name": "{name}", "arguments": {{"n": {n}}}}}\n</tool_call>'
    return f'\n{FN_NAME}: {name}\n{FN_ARGS}: {{"n": {n}}}'


@settings(max_examples=300, deadline=None)
@given(
    fmt=st.sampled_from(["nous", "qwen"]),
    pieces=st.lists(st.sampled_from(_PIECES), max_size=12),
    reasoning=st.sampled_from(["", "Think first.", " spaced \n"]),
    calls=st.lists(st.sampled_from(["get_weather", "get_time"]), max_size=3),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=20),
)
def test_generated_replies_stream_exactly(fmt, pieces, reasoning, calls, cuts):
    """Text full of half-tags, maybe a thought, maybe calls: the text shown only grows, never past the end."""
    visible = "".join(pieces)
    if any(m in visible for m in MARKERS):
        return
    raw = (f"<think>{reasoning}</think>" if reasoning else "") + visible
    raw += "".join(render_call(fmt, name, n) for n, name in enumerate(calls))
    shown = visible.lstrip() if not calls else visible.strip()
    thought = reasoning.strip() or None
    expected = [text(shown, thought)] if shown or thought or not calls else []
    expected += [call(name, {"n": n}) for n, name in enumerate(calls)]
    chunks = split_at(raw, cuts)
    stream = [[Fragment(ASSISTANT, c, index=0)] for c in chunks]
    seen = ""
    for out in StreamParser(fmt).run(stream):
        for f in out:
            if f.index == 0 and f.content:
                seen += f.content
                assert shown.startswith(seen), (seen, shown)  # never more than the final text
    assert dump(parse_chunks(raw, chunks, fmt)) == expected


def test_partial_tag_is_held_back_while_streaming():
    raw = "Sure, checking.\n" + CALL_PARIS + " trailing"
    llm = prompted([Reply(text=raw, chunks=list(raw))])
    yields = list(llm.chat(USER, FUNCS))
    texts = [y[0].content for y in yields]
    assert all("<" not in t and "\n" not in t for t in texts)
    assert texts[-1] == "Sure, checking."
    assert dump(yields[-1]) == [text("Sure, checking."), call("get_weather", PARIS)]


@pytest.mark.timeout(120)
def test_parsing_is_linear_in_the_reply():
    """1-character chunks over a long reply with many '<' and a long call body: no re-scanning. What the parser
    holds back between chunks (a possible marker's start) stays a few characters, whatever the reply's length, and
    the call's 60,000 characters of arguments arrive whole (a ratio of times measured under load said nothing)."""
    n = 10_000
    body = json.dumps({"name": "get_weather", "arguments": {"city": "x < y " * n}})
    raw = "a<b " * n + "<tool_call>" + body + "</tool_call>"
    parser = StreamParser("nous")
    held = 0

    def stream():
        nonlocal held
        for c in raw:
            held = max(held, len(parser._held))
            yield [Fragment(ASSISTANT, c, index=0)]

    out = collect(parser.run(stream()))
    assert out[0].content == ("a<b " * n).rstrip() and out[1].function_call.name == "get_weather"
    assert json.loads(out[1].function_call.arguments) == {"city": "x < y " * n}
    assert held <= 16  # ("<tool_call>" is 11)


# ---- native and prompt-based modes give the same messages -------------------------------------------------------

EQUIVALENT = [
    (Reply(text="It is sunny."), "It is sunny."),
    (tool_call("get_weather", PARIS), CALL_PARIS),
    (Reply(text="Let me check.", function_calls=[tool_call("get_weather", PARIS)]), "Let me check.\n" + CALL_PARIS),
    (
        [tool_call("get_weather", PARIS), tool_call("get_time", {})],
        CALL_PARIS + '\n<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>',
    ),
    (
        Reply(reasoning="Need the weather.", function_calls=[tool_call("get_weather", PARIS)]),
        "<think>\nNeed the weather.\n</think>\n\n" + CALL_PARIS,
    ),
    (Reply(reasoning="Easy.", text="Noon."), "<think>Easy.</think>Noon."),
]


@pytest.mark.parametrize("native, raw", EQUIVALENT)
@pytest.mark.parametrize("fmt", ["nous", "qwen"])
def test_native_and_prompt_based_give_the_same_messages(native, raw, fmt):
    if fmt == "qwen":
        raw = raw.replace(CALL_PARIS, f'{FN_NAME}: get_weather\n{FN_ARGS}: {{"city": "Paris"}}')
        raw = raw.replace(
            '\n<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>',
            f"\n{FN_NAME}: get_time\n{FN_ARGS}: {{}}",
        )
    native_llm = ScriptedLLM([native] * 2, generate_cfg=FAST)
    prompt_llm = prompted([raw] * 2, fmt=fmt)
    for stream in (True, False):
        a = native_llm.chat(USER, FUNCS, stream=stream)
        b = prompt_llm.chat(USER, FUNCS, stream=stream)
        a, b = (list(a)[-1], list(b)[-1]) if stream else (a, b)
        assert dump(a) == dump(b)
        assert [m.extra["function_id"] is not None for m in b if m.function_call] == [True] * sum(
            1 for m in a if m.function_call
        )


def test_agent_runs_the_same_conversation_natively_and_by_prompt():
    @tool
    def get_weather(city: str) -> str:
        """Current weather for a city.

        Args:
            city: City name.
        """
        return f"Sunny in {city}"

    native = ScriptedLLM([tool_call("get_weather", PARIS), "Sunny in Paris."])
    by_prompt = prompted([CALL_PARIS, "Sunny in Paris."])
    results = []
    for llm in (native, by_prompt):
        bot = FnCallAgent(llm=llm, function_list=[get_weather])
        results.append(dump(to_messages(bot.run_nonstream(USER))))
        llm.assert_complete()
    assert results[0] == results[1]
    assert [m["role"] for m in results[1]] == ["assistant", "function", "assistant"]
    second = by_prompt.calls[1].messages
    result = untrusted("Sunny in Paris", "tool get_weather")
    assert second[-1].role == "user" and second[-1].content == f"<tool_response>\n{result}\n</tool_response>"
    assert by_prompt.calls[1].functions is None


# ---- the prompt: tools in the system message, history rendered in the format ----------------------------------

HISTORY = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Weather in Paris and the time?"},
    {
        "role": "assistant",
        "content": "Checking.",
        "function_call": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    },
    {"role": "assistant", "content": "", "function_call": {"name": "get_time", "arguments": "{}"}},
    {"role": "function", "name": "get_weather", "content": "Sunny"},
    {"role": "function", "name": "get_time", "content": "12:00"},
]


def test_nous_prompt_renders_tools_calls_and_results():
    llm = prompted(["It is sunny and noon."])
    before = json.dumps(HISTORY)
    assert dump(llm.chat(HISTORY, FUNCS, stream=False)) == [text("It is sunny and noon.")]
    assert json.dumps(HISTORY) == before
    sent = llm.calls[0]
    assert sent.functions is None and "stop" not in sent.generate_cfg
    system, user, assistant, results = sent.messages
    assert system.role == "system" and system.content.startswith("You are helpful.\n\n# Tools\n")
    tools_block = system.content.split("<tools>\n")[1].split("\n</tools>")[0].splitlines()
    assert [json.loads(line) for line in tools_block] == [{"type": "function", "function": f} for f in FUNCS]
    assert '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>' in system.content
    assert user.content == "Weather in Paris and the time?"
    assert assistant.role == "assistant" and assistant.content == (
        'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'
    )
    assert results.role == "user" and results.content == (
        "<tool_response>\nSunny\n</tool_response>\n<tool_response>\n12:00\n</tool_response>"
    )


def test_qwen_prompt_renders_tools_calls_and_results():
    llm = prompted([": It is sunny and noon."], fmt="qwen", stop="END")
    assert dump(llm.chat(HISTORY, FUNCS, stream=False)) == [text("It is sunny and noon.")]
    sent = llm.calls[0]
    assert sent.functions is None
    assert sent.generate_cfg["stop"] == ["END", FN_RESULT]
    system, user = sent.messages  # the turn so far is handed over at the end of the user's message
    assert system.content.startswith("You are helpful.\n\n# Tools\n\n## You have access to the following tools:")
    assert "### get_weather\n\nget_weather: Current weather for a city. Parameters: {" in system.content
    assert f"{FN_NAME}: The name of tool 1, should be one of [get_weather,get_time]" in system.content
    assert user.content == (
        "Weather in Paris and the time?\n\nChecking.\n"
        f'{FN_NAME}: get_weather\n{FN_ARGS}: {{"city": "Paris"}}\n{FN_NAME}: get_time\n{FN_ARGS}: {{}}\n'
        f"{FN_RESULT}: Sunny\n{FN_RESULT}: 12:00\n{FN_EXIT}"
    )


def test_qwen_history_with_answer_after_results_stays_in_the_assistant_turn():
    history = [
        *HISTORY[:3],
        {"role": "function", "name": "get_weather", "content": "Sunny"},
        {"role": "assistant", "content": "It is sunny."},
        {"role": "user", "content": "Thanks!"},
    ]
    llm = prompted(["You're welcome."], fmt="qwen", parallel_function_calls=False)
    llm.chat(history, FUNCS, stream=False)
    msgs = llm.calls[0].messages
    assert [m.role for m in msgs] == ["system", "user", "assistant", "user"]
    assert msgs[2].content == (
        f'Checking.\n{FN_NAME}: get_weather\n{FN_ARGS}: {{"city": "Paris"}}\n'
        f"{FN_RESULT}: Sunny\n{FN_EXIT}: It is sunny."
    )
    assert f"{FN_NAME}: The tool to use, should be one of [get_weather,get_time]" in msgs[0].content


def test_qwen_prompt_in_chinese_for_a_chinese_user():
    llm = prompted(["晴天。"], fmt="qwen")
    llm.chat([{"role": "user", "content": "巴黎天气怎么样？"}], FUNCS, stream=False)
    system = llm.calls[0].messages[0]
    assert system.content.startswith("# 工具\n\n## 你拥有如下工具：") and "输入参数：" in system.content


def test_qwen_prompt_in_english_for_a_japanese_user():
    llm = prompted(["晴れです。"], fmt="qwen")
    llm.chat([{"role": "user", "content": "東京の天気は？"}], FUNCS, stream=False)
    system = llm.calls[0].messages[0]
    assert "你拥有如下工具" not in system.content and "get_weather" in system.content


def test_system_message_is_added_when_missing_and_list_content_is_kept():
    llm = prompted(["ok"])
    msgs = [{"role": "user", "content": [{"text": "look"}, {"image": "https://example.com/a.png"}]}]
    llm.chat(msgs, FUNCS, stream=False)
    sent = llm.calls[0].messages
    assert sent[0].role == "system" and sent[0].content.startswith("# Tools")
    assert sent[1].content[1].image == "https://example.com/a.png"


def test_function_choice_none_offers_no_tools_and_parses_no_calls():
    llm = prompted([CALL_PARIS], function_choice="none")
    out = llm.chat(HISTORY[:2], FUNCS, stream=False)
    assert dump(out) == [text(CALL_PARIS)]
    assert all("<tools>" not in m.text for m in llm.calls[0].messages)


def test_function_choice_by_name_is_asked_for():
    llm = prompted([CALL_PARIS], function_choice="get_weather")
    llm.chat(USER, FUNCS, stream=False)
    assert llm.calls[0].messages[0].content.endswith("You must call the tool get_weather in this reply.")


def test_parallel_function_calls_off_keeps_the_first_call():
    raw = CALL_PARIS + '\n<tool_call>{"name": "get_time", "arguments": {}}</tool_call>'
    out = prompted([raw], parallel_function_calls=False).chat(USER, FUNCS, stream=False)
    assert dump(out) == [call("get_weather", PARIS)]


def test_stop_words_are_added_up_to_the_server_limit():
    assert with_stop_words({"stop": ["a", "b", "c"]}, [FN_RESULT, "x"]) == {"stop": ["a", "b", "c", FN_RESULT]}
    assert with_stop_words({}, [FN_RESULT]) == {"stop": [FN_RESULT]}
    assert with_stop_words({"stop": FN_RESULT}, [FN_RESULT]) == {"stop": [FN_RESULT]}


def test_history_with_calls_but_no_tools_is_still_rendered_as_text():
    """A final answer asked without tools (e.g. after the tool budget) must not send raw function messages."""
    llm = prompted(["Sunny and noon."])
    assert dump(llm.chat(HISTORY, None, stream=False)) == [text("Sunny and noon.")]
    sent = llm.calls[0].messages
    assert [m.role for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[0].content == "You are helpful." and "<tool_response>" in sent[3].content


def test_retries_and_usage_go_through_the_model():
    llm = prompted([ModelServiceError(503, "busy", retryable=True), CALL_PARIS])
    usage = Usage()
    out = llm.chat(USER, FUNCS, stream=False, usage=usage)
    assert dump(out) == [call("get_weather", PARIS)]
    assert len(llm.calls) == 2 and usage.calls == 1 and usage.prompt_tokens > 0


def test_native_calls_from_the_backend_pass_through():
    llm = prompted([Reply(text="Sure.", function_calls=[tool_call("get_time", {})])])
    out = llm.chat(USER, FUNCS, stream=False)
    assert dump(out) == [text("Sure."), call("get_time", {})] and out[1].extra["function_id"] == "call_1_0"


def test_unknown_format_is_a_clear_error():
    with pytest.raises(ValueError, match="fncall_prompt_type"):
        prompted(["x"], fmt="react").chat(USER, FUNCS, stream=False)


# ---- the fallback: a server that rejects tools ---------------------------------------------------------------


class NoToolsLLM(ScriptedLLM):
    """A ScriptedLLM whose 'server' rejects requests with tools, as many OpenAI-compatible servers do."""

    def _chat_stream(self, messages, functions, cfg, usage):
        if functions:
            self.calls.append(None)
            raise ModelServiceError("tools_unsupported", "this model does not support tools")
        return super()._chat_stream(messages, functions, cfg, usage)


@pytest.mark.parametrize("stream", [True, False])
def test_fallback_when_the_server_rejects_tools(stream, caplog):
    llm = NoToolsLLM(["Let me check.\n" + CALL_PARIS, CALL_PARIS], generate_cfg=FAST)
    with caplog.at_level(logging.WARNING, logger="chatagent.llm"):
        out = llm.chat(USER, FUNCS, stream=stream)
        out = list(out)[-1] if stream else out
    assert dump(out) == [text("Let me check."), call("get_weather", PARIS)]
    assert llm.native_tools is False and "prompt-based function calling" in caplog.text
    assert llm.calls[0] is None and llm.calls[1].functions is None
    assert "<tools>" in llm.calls[1].messages[0].content
    # from now on the model goes straight to the prompt
    assert dump(llm.chat(USER, FUNCS, stream=False)) == [call("get_weather", PARIS)]
    assert len(llm.calls) == 3 and llm.calls[2] is not None


@pytest.mark.parametrize("stream", [True, False])
def test_fallback_when_the_server_rejects_tools_under_achat(stream):
    import asyncio

    llm = NoToolsLLM(["Let me check.\n" + CALL_PARIS, CALL_PARIS], generate_cfg=FAST)

    async def ask():
        if not stream:
            return await llm.achat(USER, FUNCS, stream=False)
        return [rsp async for rsp in llm.achat(USER, FUNCS)][-1]

    out = asyncio.run(asyncio.wait_for(ask(), 20))
    assert dump(out) == [text("Let me check."), call("get_weather", PARIS)]
    assert llm.native_tools is False
    assert llm.calls[0] is None and llm.calls[1].functions is None
    assert dump(asyncio.run(asyncio.wait_for(ask(), 20))) == [call("get_weather", PARIS)]  # straight to the prompt
    assert len(llm.calls) == 3 and llm.calls[2] is not None


def test_fallback_over_http_with_the_loopback_server(openai_server):
    openai_server.add(
        ServerReply(status=400, error={"message": "tools are not supported by this model", "code": None}),
        ServerReply(text="Checking.\n" + CALL_PARIS, chunk_size=3),
    )
    llm = get_chat_model({"model": "m", "model_server": openai_server.base_url, "api_key": "k", "generate_cfg": FAST})
    out = list(llm.chat(USER, FUNCS))[-1]
    assert dump(out) == [text("Checking."), call("get_weather", PARIS)]
    first, second = (r.json for r in openai_server.requests)
    assert "tools" in first and "tools" not in second
    assert second["messages"][0]["role"] == "system" and "<tools>" in second["messages"][0]["content"]


def test_qwen_stop_words_reach_the_server(openai_server):
    openai_server.add(ServerReply(text=f'{FN_NAME}: get_weather\n{FN_ARGS}: {{"city": "Paris"}}\n'))
    llm = get_chat_model(
        {
            "model": "m",
            "model_server": openai_server.base_url,
            "api_key": "k",
            "generate_cfg": {**FAST, "fncall_prompt_type": "qwen"},
        }
    )
    assert dump(llm.chat(USER, FUNCS, stream=False)) == [call("get_weather", PARIS)]
    sent = openai_server.requests[0].json
    assert sent["stop"] == [FN_RESULT] and "tools" not in sent

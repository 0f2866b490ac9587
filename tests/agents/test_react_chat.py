"""ReActChat: the text parser on what models really write, the loop, corrections, limits and streaming."""

from __future__ import annotations

import copy
import json
import logging
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatagent import Reply, ScriptedLLM, merge_delta
from chatagent.agents.react_chat import ReActChat
from chatagent.agents.react_parser import ReActParser, parse_react

ASK = [{"role": "user", "content": "Weather in Paris?"}]
CALLS: list[dict] = []


def get_weather(city: str, unit: str = "celsius") -> str:
    """Current weather for a city.

    Args:
        city: City name.
        unit: celsius or fahrenheit.
    """
    CALLS.append({"city": city, "unit": unit})
    return f"Sunny, 21 degrees {unit} in {city}"


def broken(x: int) -> str:
    """Always fails.

    Args:
        x: anything.
    """
    raise RuntimeError("the backend is down")


@pytest.fixture(autouse=True)
def _clear_calls():
    CALLS.clear()


def react(*replies, chunk_size: int = 4, **kw) -> ReActChat:
    kw.setdefault("transcript", False)  # the structured messages these tests read
    return ReActChat(llm=ScriptedLLM(list(replies), chunk_size=chunk_size), function_list=[get_weather, broken], **kw)


ACTION = 'Thought: I need the weather.\nAction: get_weather\nAction Input: {"city": "Paris"}'
FINAL = "Thought: I now know the final answer.\nFinal Answer: It is sunny in Paris."


# ---- the parser -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "action", "action_input"),
    [
        (ACTION, "get_weather", '{"city": "Paris"}'),
        ('Thought:   spaces  \nAction:    get_weather   \nAction Input:   {"city": "Paris"}  ', "get_weather", None),
        ('**Thought:** hmm\n**Action:** get_weather\n**Action Input:** {"city": "Paris"}', "get_weather", None),
        ('**Action**: get_weather\n**Action Input**: {"city": "Paris"}', "get_weather", None),
        ('### Action: `get_weather`\nAction Input: {"city": "Paris"}', "get_weather", None),
        ('thought: x\naction: get_weather\naction input: {"city": "Paris"}', "get_weather", None),
        ('Action：get_weather\nAction Input：{"city": "Paris"}', "get_weather", None),
        ('  Action: get_weather()\n  Action Input: {"city": "Paris"}', "get_weather", None),
        ("Action: get_weather\nAction Input: {city: 'Paris',}", "get_weather", "{city: 'Paris',}"),
        ('Action: get_weather\nAction Input: ```json\n{"city": "Paris"}\n```', "get_weather", None),
        ("Action: get_weather\nAction Input: Paris", "get_weather", "Paris"),
        ("Action: get_weather", "get_weather", None),
        ('Action: get_weather\n{"city": "Paris"}', "get_weather", '{"city": "Paris"}'),
        (ACTION + "\nObservation: Rainy.\nThought: done\nFinal Answer: Rainy.", "get_weather", '{"city": "Paris"}'),
        (ACTION + "\nFinal Answer: I guess sunny.", "get_weather", '{"city": "Paris"}'),
        (ACTION + "\nAction: broken\nAction Input: {}", "get_weather", '{"city": "Paris"}'),
    ],
)
def test_parser_reads_actions_as_models_write_them(text, action, action_input):
    step = parse_react(text)
    assert step.kind == "action" and step.action == action
    if action_input is not None:
        assert step.action_input == action_input
    assert "Observation" not in step.raw and "Final Answer" not in step.raw


@pytest.mark.parametrize(
    ("text", "thought", "answer"),
    [
        (FINAL, "I now know the final answer.", "It is sunny in Paris."),
        ("Final Answer: 42", "", "42"),
        ("**Final Answer:** 42", "", "42"),
        ("Thought: easy\n\nFinal Answer:\n\nLine one.\n\nLine two.\n", "easy", "Line one.\n\nLine two."),
        ("Just a plain answer with no markers.", "", "Just a plain answer with no markers."),
        ("Thought: a\nThought: b\nFinal Answer: c", "a\nb", "c"),
        ("Final Answer: it is 42.\nAction: get_weather\nAction Input: {}", "", "it is 42."),
        ("Final Answer: see below\nThought: this stays text", "", "see below\nThought: this stays text"),
        ("Actions speak louder.\nFinal Answer: ok", "", "Actions speak louder.\n\nok"),
        ("思考一下。\nFinal Answer: 巴黎晴天。", "", "思考一下。\n\n巴黎晴天。"),
    ],
)
def test_parser_reads_final_answers(text, thought, answer):
    step = parse_react(text)
    assert (step.kind, step.thought, step.answer) == ("final", thought, answer)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("Thought: I should look it up.", "no_action"),
        ("Thought: hmm\nAction:\nAction Input: {}", "no_tool_name"),
        ('Thought: hmm\nAction Input: {"city": "Paris"}', "input_without_action"),
        ("", "empty"),
        ("   \n  ", "empty"),
    ],
)
def test_parser_flags_malformed_replies(text, problem):
    step = parse_react(text)
    assert (step.kind, step.problem) == ("malformed", problem)


REPLIES = [
    ACTION,
    FINAL,
    '**Thought:** a\n\n**Action:** get_weather\n**Action Input:** {"city": "Paris"}\nObservation: x',
    "Thought: one\nthought two\n\nFinal Answer: **bold** answer\n- item\n- Action item",
    "Final Answer: done.\nAction: get_weather",
    "plain text\nover lines\n",
]


def _runs(text: str, size: int) -> list[tuple[str, str]]:
    """What the parser shows of `text` fed in chunks of `size`, as runs of reasoning or content in order."""
    parser, runs = ReActParser(), []
    for chunk in [text[i : i + size] for i in range(0, len(text), size)] + [None]:
        for r, c in parser.pieces(chunk):
            if runs and bool(runs[-1][0]) == bool(r):
                runs[-1] = (runs[-1][0] + r, runs[-1][1] + c)
            else:
                runs.append((r, c))
    return runs


@pytest.mark.parametrize("size", [1, 2, 5, 10_000])
def test_what_is_shown_follows_the_reply_in_its_order_whatever_the_chunking(size):
    """Regression: text before a Thought came after the thought when both were in one chunk (a transcript then
    differed from the one streamed a character at a time)."""
    text = "Plain text first.\nThought: then a thought\nFinal Answer: done"
    assert _runs(text, size) == [("", "Plain text first."), ("then a thought", ""), ("", "\n\ndone")]
    transcript = react(text, chunk_size=size, transcript=True).run_nonstream(ASK)
    written = "Final Answer: Plain text first.\nThought: then a thought\nFinal Answer: \n\ndone"
    assert transcript[-1]["content"] == written


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(REPLIES), st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=60))
def test_any_chunking_gives_the_same_result_and_never_shows_an_action(text, sizes):
    parser = ReActParser()
    shown_r, shown_c, pos, k = [], [], 0, 0
    while pos < len(text):
        size = sizes[k % len(sizes)]
        r, c = parser.feed(text[pos : pos + size])
        shown_r.append(r), shown_c.append(c)
        pos, k = pos + size, k + 1
    r, c, step = parser.finish()
    shown_r.append(r), shown_c.append(c)
    whole = parse_react(text)
    assert step == whole
    assert "".join(shown_r) == whole.thought and "".join(shown_c) == whole.answer
    assert not any("Action:" in s or "Action Input" in s for s in shown_r + shown_c)


def test_parser_is_linear_in_the_reply_length():
    def feed_time(n):
        text = "Thought: " + "word and more words\n" * n + "Final Answer: " + "x y z\n" * n
        parser = ReActParser()
        t = time.perf_counter()
        for i in range(0, len(text), 3):
            parser.feed(text[i : i + 3])
        parser.finish()
        return time.perf_counter() - t

    small = min(feed_time(2_000) for _ in range(3))
    large = min(feed_time(8_000) for _ in range(3))
    assert large < small * 4 * 2  # 4x the text: linear would be 4x, quadratic 16x


# ---- the agent ------------------------------------------------------------------------------------------


def test_action_runs_the_tool_and_the_final_answer_ends_the_run():
    bot = react(ACTION, FINAL)
    out = bot.run_nonstream(ASK)
    assert out == [
        {"role": "assistant", "content": "", "reasoning_content": "I need the weather."},
        {
            "role": "assistant",
            "content": "",
            "function_call": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            "extra": {"function_id": "react_1"},
        },
        {
            "role": "function",
            "content": "Sunny, 21 degrees celsius in Paris",
            "name": "get_weather",
            "extra": {"function_id": "react_1"},
        },
        {"role": "assistant", "content": "It is sunny in Paris.", "reasoning_content": "I now know the final answer."},
    ]
    calls = bot.llm.calls
    assert calls[0].functions is None and calls[0].generate_cfg["stop"] == ["Observation:", "Observation:\n"]
    system = calls[0].messages[0].content
    assert "get_weather: Current weather for a city." in system and "Action: the tool to use" in system
    assert [(m.role, m.content) for m in calls[1].messages[-2:]] == [
        ("assistant", ACTION),
        ("user", "Observation: Sunny, 21 degrees celsius in Paris"),
    ]
    bot.llm.assert_complete()


def test_own_stop_words_are_kept():
    bot = ReActChat(
        llm=ScriptedLLM([FINAL], generate_cfg={"stop": ["<|end|>"]}), function_list=[get_weather], transcript=False
    )
    bot.run_nonstream(ASK)
    assert bot.llm.calls[0].generate_cfg["stop"] == ["<|end|>", "Observation:", "Observation:\n"]


@pytest.mark.parametrize(
    ("action_text", "args"),
    [
        ('Action: GET_WEATHER\nAction Input: {"city": "Paris"}', {"city": "Paris"}),
        ("Action: get_weather\nAction Input: {city: 'Paris', unit: 'kelvin',}", {"city": "Paris", "unit": "kelvin"}),
        ("Action: get_weather\nAction Input: Paris", None),
        ('Action: get_weather\nAction Input: "Paris"', None),
        ('Action: `get_weather`\nAction Input:\n```json\n{"city": "Paris"}\n```', {"city": "Paris"}),
    ],
)
def test_tool_names_and_inputs_as_models_write_them(action_text, args):
    bot = react("Thought: t\n" + action_text, FINAL)
    out = bot.run_nonstream(ASK)
    call = out[1]["function_call"]
    assert call["name"] == "get_weather"
    if args is not None:
        assert json.loads(call["arguments"]) == args
    assert CALLS and CALLS[0]["city"] == "Paris"
    assert out[2]["content"].startswith("Sunny")


def test_a_bare_input_for_a_tool_with_several_parameters_is_reported():
    def two(a: str, b: str) -> str:
        """Two params.

        Args:
            a: first.
            b: second.
        """
        return a + b

    bot = ReActChat(llm=ScriptedLLM(["Action: two\nAction Input: hello", FINAL]), function_list=[two], transcript=False)
    out = bot.run_nonstream(ASK)
    assert out[1]["content"].startswith("Error: invalid arguments for two")


def test_missing_action_input_calls_with_no_arguments():
    bot = react("Action: get_weather", FINAL)
    out = bot.run_nonstream(ASK)
    assert out[0]["function_call"]["arguments"] == "{}"
    assert "Error: invalid arguments for get_weather" in out[1]["content"] and "city" in out[1]["content"]
    assert not CALLS


def test_tool_errors_come_back_as_observations(caplog):
    bot = react(
        "Action: forecast\nAction Input: {}",
        'Action: broken\nAction Input: {"x": 1}',
        FINAL,
    )
    with caplog.at_level(logging.WARNING):
        out = bot.run_nonstream(ASK)
    unknown, failed = out[1]["content"], out[3]["content"]
    assert "no tool named 'forecast'" in unknown and "get_weather" in unknown
    assert failed == "Error: broken failed: RuntimeError: the backend is down"
    assert "Observation: Error: broken failed" in bot.llm.calls[2].messages[-1].content
    assert out[-1]["content"] == "It is sunny in Paris."


def test_action_before_a_final_answer_wins_and_the_guess_is_dropped():
    bot = react(ACTION + "\nFinal Answer: probably rainy", FINAL)
    out = bot.run_nonstream(ASK)
    assert CALLS == [{"city": "Paris", "unit": "celsius"}]
    assert all("rainy" not in (m.get("content") or "") for m in out)
    assert "rainy" not in bot.llm.calls[1].messages[-2].content


def test_final_answer_before_an_action_wins_and_the_action_is_ignored(caplog):
    bot = react('Thought: sure\nFinal Answer: Sunny.\nAction: get_weather\nAction Input: {"city": "Paris"}')
    with caplog.at_level(logging.WARNING, logger="chatagent.react"):
        out = bot.run_nonstream(ASK)
    assert out == [{"role": "assistant", "content": "Sunny.", "reasoning_content": "sure"}]
    assert not CALLS and "action was ignored" in caplog.text


def test_a_made_up_observation_is_cut_off():
    bot = react(ACTION + "\nObservation: Rainy (made up)\nThought: rain\nFinal Answer: Rainy.", FINAL)
    out = bot.run_nonstream(ASK)
    assert out[2]["content"].startswith("Sunny") and out[-1]["content"] == "It is sunny in Paris."
    assert all("made up" not in m.content for call in bot.llm.calls for m in call.messages)


def test_malformed_reply_gets_a_correction_and_counts_against_the_limit(caplog):
    bot = react("Thought: I should check.", "Thought: x\nAction Input: {}", FINAL)
    with caplog.at_level(logging.WARNING, logger="chatagent.react"):
        out = bot.run_nonstream(ASK)
    assert out[-1]["content"] == "It is sunny in Paris."
    first, second = bot.llm.calls[1].messages[-1], bot.llm.calls[2].messages[-1]
    assert first.role == "user" and "neither an Action nor a Final Answer" in first.content
    assert "'Action Input:' without 'Action:'" in second.content and "get_weather" in second.content
    assert "malformed reply (no_action)" in caplog.text


def test_the_limit_asks_for_a_final_answer_and_says_why_it_stopped():
    bot = react("Thought: hmm", ACTION, "Final Answer: best effort: sunny.", max_llm_calls=2)
    out = bot.run_nonstream(ASK)
    assert out[-1]["content"] == "best effort: sunny." and out[-1]["extra"] == {"stop_reason": "max_llm_calls"}
    assert "used all the steps" in bot.llm.calls[2].messages[-1].content
    bot.llm.assert_complete()


def test_the_limit_with_no_answer_still_ends_with_a_message():
    bot = react("Thought: a", "Thought: b", max_llm_calls=1)
    out = bot.run_nonstream(ASK)
    assert out[-1]["content"].endswith("Stopped after 1 model calls without reaching a final answer.")
    assert out[-1]["extra"]["stop_reason"] == "max_llm_calls"


def test_the_same_call_three_times_is_reported_as_a_loop():
    bot = react(ACTION, ACTION, ACTION, FINAL)
    out = bot.run_nonstream(ASK)
    results = [m["content"] for m in out if m["role"] == "function"]
    assert len(CALLS) == 2 and "same arguments 3 times in a row" in results[2]


def test_chinese_conversations_get_chinese_prompts():
    bot = react("Final Answer: 巴黎晴天。")
    out = bot.run_nonstream([{"role": "user", "content": "巴黎天气怎么样？"}])
    assert out[0]["content"] == "巴黎晴天。"
    assert "你可以使用以下工具" in bot.llm.calls[0].messages[0].content


def test_history_with_tool_calls_is_shown_to_the_model_as_react_text():
    history = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Rome?"},
        {"role": "assistant", "content": "", "function_call": {"name": "get_weather", "arguments": '{"city": "Rome"}'}},
        {"role": "function", "name": "get_weather", "content": "Cloudy in Rome"},
        {"role": "assistant", "content": "Cloudy."},
        *ASK,
    ]
    bot = react(FINAL)
    bot.run_nonstream(history)
    sent = bot.llm.calls[0].messages
    assert sent[0].content.startswith("Be brief.\n\nAnswer the user")
    assert [(m.role, m.content) for m in sent[1:]] == [
        ("user", "Weather in Rome?"),
        ("assistant", 'Action: get_weather\nAction Input: {"city": "Rome"}'),
        ("user", "Observation: Cloudy in Rome"),
        ("assistant", "Cloudy."),
        ("user", "Weather in Paris?"),
    ]


def _assert_contract(build):
    yields = [copy.deepcopy(r) for r in build().run(ASK)]
    for prev, cur in zip(yields, yields[1:], strict=False):
        assert len(cur) >= len(prev)
        for p, c in zip(prev, cur, strict=False):
            assert c["content"].startswith(p["content"])
            assert (c.get("reasoning_content") or "").startswith(p.get("reasoning_content") or "")
            assert c.get("function_call") == p.get("function_call")
    final = build().run_nonstream(ASK)
    assert yields[-1] == final
    full: list = []
    for d in build().run(ASK, delta_stream=True):
        merge_delta(full, d)
    assert full == final
    return yields


@pytest.mark.parametrize("chunk_size", [1, 3, 7])
def test_stream_contract_and_no_half_parsed_action(chunk_size):
    replies = [
        "**Thought:** I need the weather, so I will call a tool.\n**Action:** get_weather\n"
        '**Action Input:** {"city": "Paris"}\nObservation: invented',
        "Thought: not sure yet",
        "Thought: I now know.\nFinal Answer: It is **sunny** in Paris.\n\n- 21 degrees\n- light wind",
    ]
    yields = _assert_contract(lambda: react(*replies, chunk_size=chunk_size))
    for y in yields:
        for m in y:
            text = (m.get("content") or "") + (m.get("reasoning_content") or "")
            assert "Action" not in text and "Observation" not in text and "**" not in text[:2]
    assert len(yields) > 10
    assert yields[-1][-1]["content"] == "It is **sunny** in Paris.\n\n- 21 degrees\n- light wind"


def test_thought_streams_before_the_reply_is_complete():
    bot = react(
        Reply(
            text=ACTION,
            chunks=["Thought: I need ", "the weather.\n", "Action: get_weather\n", "Action Input: {"]
            + ['"city": "Paris"}'],
        ),
        FINAL,
    )
    yields = [copy.deepcopy(r) for r in bot.run(ASK)]
    assert yields[0] == [{"role": "assistant", "content": "", "reasoning_content": "I need "}]
    assert yields[1] == [{"role": "assistant", "content": "", "reasoning_content": "I need the weather."}]
    # the three chunks from "Action:" on yield nothing; the call appears whole once the reply is complete
    assert yields[2][1]["function_call"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}


def test_thinking_model_reasoning_is_kept():
    bot = react(Reply(text="Final Answer: 42", reasoning="native thoughts"))
    out = bot.run_nonstream(ASK)
    assert out == [{"role": "assistant", "content": "42", "reasoning_content": "native thoughts"}]

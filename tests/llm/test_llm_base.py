"""BaseChatModel machinery over ScriptedLLM: stream modes, retries, truncation, registry, placeholders."""

import time

import pytest

from chatagent import ModelServiceError, Reply, ScriptedLLM, get_chat_model, register_llm, tool_call
from chatagent.llm.base import DEFAULT_TOOL_CHOICE, BaseChatModel, ToolChoice, split_generate_cfg, truncate_messages
from chatagent.llm.registry import LLM_REGISTRY
from chatagent.schema import ContentItem, Message, to_messages
from chatagent.utils.tokens import count_tokens, truncate_tokens

USER = to_messages([{"role": "user", "content": "hi"}])  # Messages in, Messages out (dicts in give dicts)
FAST = {"retry_delay": 0.001}


def test_three_modes_agree():
    reply = Reply(text="hello world", function_calls=[tool_call("f", {"x": 1})])
    llm = ScriptedLLM([reply] * 3, generate_cfg=FAST)
    once = llm.chat(USER, stream=False)
    cumulative = list(llm.chat(USER))[-1]
    from chatagent.schema.stream import collect

    delta = collect(llm.chat(USER, delta_stream=True))
    assert [m.extra["function_id"] for m in (once[1], cumulative[1], delta[1])] == ["call_1_0", "call_2_0", "call_3_0"]
    for m in (once[1], cumulative[1], delta[1]):
        m.extra = None
    assert once == cumulative == delta


def test_retries_transient_errors_then_succeeds():
    llm = ScriptedLLM([ModelServiceError(503, "busy", retryable=True)] * 2 + ["ok"], generate_cfg=FAST)
    assert llm.chat(USER, stream=False)[0].content == "ok"
    assert len(llm.calls) == 3


def test_retries_are_bounded():
    err = ModelServiceError(429, "slow down", retryable=True)
    llm = ScriptedLLM([err] * 10, generate_cfg={**FAST, "max_retries": 2})
    with pytest.raises(ModelServiceError):
        llm.chat(USER, stream=False)
    assert len(llm.calls) == 3


def test_retry_after_is_honoured():
    llm = ScriptedLLM([ModelServiceError(429, "wait", retryable=True, retry_after=0.2), "ok"], generate_cfg=FAST)
    t = time.monotonic()
    llm.chat(USER, stream=False)
    assert time.monotonic() - t >= 0.2


def test_no_retry_for_client_errors_and_key_scrubbed():
    llm = ScriptedLLM([ModelServiceError(401, "invalid key sk-secret-123")], generate_cfg=FAST)
    llm.api_key = "sk-secret-123"
    with pytest.raises(ModelServiceError) as e:
        list(llm.chat(USER))
    assert "sk-secret-123" not in str(e.value) and len(llm.calls) == 1


def test_break_after_content_is_not_replayed():
    class Breaking(ScriptedLLM):
        def _chat_stream(self, *a, **kw):
            yield from list(super()._chat_stream(*a, **kw))[:2]
            raise ModelServiceError("stream_interrupted", "connection reset", retryable=True)

    llm = Breaking(["abcdefgh", "never"], generate_cfg=FAST)
    seen = []
    with pytest.raises(ModelServiceError) as e:
        for rsp in llm.chat(USER):
            seen.append(rsp[-1].content)
    assert e.value.partial and seen == ["abcd", "abcdefgh"] and len(llm.calls) == 1


def test_generate_cfg_split_and_passthrough():
    settings, rest = split_generate_cfg({"max_retries": 1, "temperature": 0.3, "extra_body": {"a": 1}})
    assert settings.max_retries == 1 and rest == {"temperature": 0.3, "extra_body": {"a": 1}}
    llm = ScriptedLLM(["ok"], generate_cfg={"temperature": 0.1})
    llm.chat(USER, stream=False, extra_generate_cfg={"top_p": 0.5, "max_retries": 0})
    assert llm.calls[0].generate_cfg == {"temperature": 0.1, "top_p": 0.5}


def test_text_only_models_get_placeholders():
    class TextOnly(ScriptedLLM):
        support_multimodal_input = False

    llm = TextOnly(["ok"])
    llm.chat([{"role": "user", "content": [{"text": "look"}, {"image": "/tmp/cat.png"}]}], stream=False)
    sent = llm.calls[0].messages[0].content
    assert [i.text for i in sent] == ["look", "[image: cat.png]"]


def conversation(n_turns, result_size=2000):
    msgs = [Message("system", "sys")]
    for i in range(n_turns):
        msgs += [
            Message("user", f"question {i}"),
            Message("assistant", "", function_call={"name": "f", "arguments": "{}"}),
            Message("function", "word " * result_size, name="f"),
            Message("assistant", f"answer {i}"),
        ]
    return msgs + [Message("user", "latest question")]


def test_truncation_shortens_old_results_first():
    msgs = conversation(3)
    out = truncate_messages(msgs, 3000)
    assert len(out) == len(msgs)
    assert all(count_tokens(m.text) <= 520 for m in out if m.role == "function")
    assert out[0].content == "sys" and out[-1].content == "latest question"


def test_truncation_drops_whole_old_turns_and_keeps_pairs():
    msgs = conversation(10)
    out = truncate_messages(msgs, 1200)
    assert out[0].content == "sys" and out[-1].content == "latest question"
    assert out[1].role == "user"  # starts at a turn boundary: no orphan function result
    assert sum(count_tokens(m.text) for m in out) < 1200


def test_truncation_shortens_an_over_long_latest_message_in_the_middle():
    """As Qwen-Agent does: the beginning (often the request) and the end (often the question) are kept."""
    text = "Summarise this report. " + "filler " * 1000 + "What does it conclude?"
    out = truncate_messages([Message("system", "sys"), Message("user", text)], 100)
    kept = out[-1].text
    assert kept.startswith("Summarise this report.") and kept.endswith("What does it conclude?")
    assert "[middle cut]" in kept and sum(count_tokens(m.text) + 5 for m in out) + 16 <= 100
    items = [ContentItem(text="Look at this: " + "word " * 1000), ContentItem(image="https://x.test/cat.png")]
    shortened = truncate_messages([Message("user", items)], 100)[-1]
    assert isinstance(shortened.content, list) and shortened.content[1].image == "https://x.test/cat.png"


def test_truncation_raises_for_an_over_long_latest_message_when_asked():
    with pytest.raises(ModelServiceError) as e:
        truncate_messages([Message("user", "word " * 1000)], 100, long_input="raise")
    assert e.value.code == "context_too_long"
    with pytest.raises(ModelServiceError):  # nothing worth keeping would be left: the system message fills it
        truncate_messages([Message("system", "rule " * 95), Message("user", "word " * 1000)], 100)


def test_tokens_estimate():
    assert count_tokens("") == 0
    assert 8 <= count_tokens("The quick brown fox jumps over the lazy dog.") <= 12
    assert count_tokens("你好世界") in (2, 3)  # Qwen's BPE: 你好 / 世界
    cut = truncate_tokens("one two three four five", 2)
    assert cut.startswith("one two") and cut.endswith("[truncated]")


def test_registry_and_get_chat_model():
    @register_llm("test-echo")
    class Echo(BaseChatModel):
        def _chat_stream(self, messages, functions, cfg, usage):
            yield [Message.unchecked("assistant", messages[-1].text, extra={"index": 0})]

    try:
        llm = get_chat_model({"model_type": "test-echo", "model": "e"})
        assert isinstance(llm, Echo) and llm.chat(USER, stream=False)[0].content == "hi"
        assert get_chat_model(llm) is llm
        with pytest.raises(ValueError, match="unknown model_type"):
            get_chat_model({"model_type": "nope"})
    finally:
        LLM_REGISTRY.pop("test-echo")
    assert isinstance(get_chat_model({"model_type": "scripted", "replies": ["x"]}), ScriptedLLM)


def test_empty_messages_rejected():
    with pytest.raises(ValueError):
        ScriptedLLM(["x"]).chat([], stream=False)


def test_scripted_assert_complete():
    llm = ScriptedLLM(["a", "b"])
    llm.chat(USER, stream=False)
    with pytest.raises(AssertionError, match="1 of 2"):
        llm.assert_complete()
    with pytest.raises(AssertionError):
        ScriptedLLM([]).chat(USER, stream=False)
    assert to_messages([{"role": "user", "content": [ContentItem(text="x")]}])


def test_the_deadline_is_a_keyword_of_chat_not_a_generate_cfg_key():
    from chatagent import BasicAgent, RunDeadlineExceeded

    llm = ScriptedLLM(["a", "b"])
    with pytest.raises(RunDeadlineExceeded):
        llm.chat(USER, stream=False, deadline=time.monotonic() - 1)
    assert llm.calls == []  # the model was never called
    llm.chat(USER, stream=False, deadline=time.monotonic() + 30)
    assert 0 < llm.calls[0].generate_cfg["request_timeout"] <= 30  # the backend's timeout is capped by it
    BasicAgent(llm=llm).run_nonstream(USER, deadline=20)  # an agent's run passes its deadline the same way
    assert 0 < llm.calls[1].generate_cfg["request_timeout"] <= 20


# ---- the tool choice: a typed keyword of the backend methods, never a cfg key ---------------------------------

WEATHER = {"name": "get_weather", "description": "Weather", "parameters": {"type": "object", "properties": {}}}


class OwnBackend(BaseChatModel):
    """A user's backend as the README shows it: `_chat_stream` without the `tool_choice` keyword."""

    def __init__(self, cfg=None):
        super().__init__(cfg)
        self.cfgs = []

    def _chat_stream(self, messages, functions, cfg, usage):
        self.cfgs.append(cfg)
        yield [Message.unchecked("assistant", f"{len(functions or [])} tools", extra={"index": 0})]


def test_a_backend_without_the_tool_choice_keyword_works_while_the_choice_is_the_default():
    from tests.support.call_paths import PATHS, ask_every_path

    llm = OwnBackend({"generate_cfg": {"function_choice": "auto", "parallel_function_calls": True}})
    replies = ask_every_path(llm, USER, [WEATHER])
    assert [r[0].content for r in replies] == ["1 tools"] * len(PATHS)
    # a forced choice without functions has nothing to force: nothing is passed
    replies = ask_every_path(llm, USER, None, {"function_choice": "none", "parallel_function_calls": False})
    assert [r[0].content for r in replies] == ["0 tools"] * len(PATHS)
    assert not any(key.startswith("_") for cfg in llm.cfgs for key in cfg)


FORCED = [{"function_choice": "none"}, {"function_choice": "get_weather"}, {"parallel_function_calls": False}]


@pytest.mark.parametrize("gen", FORCED)
@pytest.mark.parametrize("path", ["chat stream", "chat once", "achat stream", "achat once"])
def test_a_forced_tool_choice_is_not_dropped_by_a_backend_without_the_keyword(gen, path):
    """As chat(deadline=) is passed only when a run has one: the keyword only when it asks for something, and a
    backend that cannot take it fails loudly, naming it, rather than answer as if the choice were 'auto'."""
    from tests.support.call_paths import ask_every_path

    llm = OwnBackend()
    with pytest.raises(TypeError, match="tool_choice"):
        ask_every_path(llm, USER, [WEATHER], gen, path=path)
    assert llm.cfgs == []  # the model was never asked


@pytest.mark.parametrize(
    "gen,expected",
    [
        ({}, ToolChoice("auto", True)),
        ({"function_choice": "none"}, ToolChoice("none", True)),
        ({"function_choice": "required", "parallel_function_calls": False}, ToolChoice("required", False)),
        ({"function_choice": "get_weather"}, ToolChoice("get_weather", True)),
    ],
)
def test_a_backend_with_the_keyword_gets_the_choice_and_a_clean_cfg(gen, expected):
    from tests.support.call_paths import PATHS, ask_every_path

    llm = ScriptedLLM(["ok"] * (len(PATHS) + 1), generate_cfg=gen)
    ask_every_path(llm, USER, [WEATHER])
    llm.chat(USER, stream=False)  # without functions: the default
    assert [c.tool_choice for c in llm.calls] == [expected] * len(PATHS) + [DEFAULT_TOOL_CHOICE]
    assert not any(key.startswith("_") for c in llm.calls for key in c.generate_cfg)


def test_prompt_based_function_calling_passes_the_backend_no_tool_choice():
    """The choice is then written into the prompt; the backend is asked without functions, so without a choice."""
    llm = OwnBackend({"generate_cfg": {"fncall_prompt_type": "nous", "function_choice": "get_weather"}})
    assert llm.chat(USER, [WEATHER], stream=False)[0].content == "0 tools"


def test_tool_choice_request_field():
    assert ToolChoice().request_field() is None
    assert ToolChoice("none").request_field() == "none" and ToolChoice("required").request_field() == "required"
    assert ToolChoice("f").request_field() == {"type": "function", "function": {"name": "f"}}


@pytest.mark.parametrize("value", ["", " ", {"type": "function", "function": {"name": "f"}}, 3])
def test_a_bad_function_choice_names_the_key(value):
    """Once sent as a function named '' or named by a dict; now a clear error when the model is built, or, given
    per call, before the model is asked."""
    with pytest.raises(ValueError, match=r"generate_cfg\['function_choice'\] must be"):
        ScriptedLLM(["ok"], generate_cfg={"function_choice": value})
    llm = ScriptedLLM(["ok"])
    with pytest.raises(ValueError, match=r"generate_cfg\['function_choice'\] must be"):
        llm.chat(USER, [WEATHER], stream=False, extra_generate_cfg={"function_choice": value})
    assert llm.calls == []

"""The run() template: streaming contract, output types, no mutation, language, system message, name."""

import copy
import threading

import pytest

from chatagent import Agent, BasicAgent, Message, ModelServiceError, Reply, ScriptedLLM, merge_delta, tool_call
from chatagent.errors import RunDeadlineExceeded
from chatagent.schema import ContentItem

USER = [{"role": "user", "content": "hello"}]


def scripted(*replies, **kw):
    return ScriptedLLM(list(replies), **kw)


def test_each_yield_extends_the_previous_and_last_equals_nonstream():
    text = "The quick brown fox jumps over the lazy dog. " * 5
    reply = Reply(text=text, reasoning="think first", function_calls=[tool_call("f", {"a": 1})])
    bot = BasicAgent(llm=scripted(reply, reply), name="bot")
    yields = [copy.deepcopy(r) for r in bot.run(USER)]
    assert len(yields) > 10
    for prev, cur in zip(yields, yields[1:], strict=False):
        assert len(cur) >= len(prev)
        for p, c in zip(prev, cur, strict=False):
            assert c["content"].startswith(p["content"])
            assert (c.get("reasoning_content") or "").startswith(p.get("reasoning_content") or "")
    final = bot.run_nonstream(USER)
    assert final[1].pop("extra")["function_id"] != yields[-1][1].pop("extra")["function_id"]  # ids are per call
    assert yields[-1] == final
    assert yields[-1][0]["content"] == text
    assert yields[-1][1]["function_call"] == {"name": "f", "arguments": '{"a": 1}'}
    assert all(m["name"] == "bot" for m in yields[-1])


def test_delta_mode_adds_up_to_cumulative():
    reply = Reply(text="abcdefghij" * 3, reasoning="why", function_calls=[tool_call("f"), tool_call("g")])
    bot = BasicAgent(llm=scripted(reply, reply))
    deltas = list(bot.run(USER, delta_stream=True))
    assert all(isinstance(f["index"], int) and "index" not in f.get("extra", {}) for d in deltas for f in d)
    assert sum(len(f["content"]) for d in deltas for f in d) == 30  # only new text each time
    full: list = []
    for d in deltas:
        merge_delta(full, d)
    final = bot.run_nonstream(USER)
    for a, b in zip(full, final, strict=True):
        a.pop("extra", None), b.pop("extra", None)
    assert full == final


def test_messages_in_messages_out_and_input_untouched():
    msgs = [Message("system", [ContentItem(text="be brief")]), Message("user", [ContentItem(text="hi")])]
    snapshot = copy.deepcopy(msgs)
    llm = scripted("ok")
    bot = BasicAgent(llm=llm, system_message="You are kind.")
    out = bot.run_nonstream(msgs)
    assert isinstance(out[0], Message) and out[0].content == "ok"
    assert msgs == snapshot
    sent = llm.calls[0].messages
    assert sent[0].content[0].text == "You are kind.\n\n" and sent[0].content[1].text == "be brief"


def test_dict_input_untouched_and_system_merged_for_strings():
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi", "extra": {"k": [1]}}]
    snapshot = copy.deepcopy(msgs)
    llm = scripted("ok")
    out = list(BasicAgent(llm=llm, system_message="You are kind.").run(msgs))
    out[-1][0]["extra"] = {"mutated": True}
    assert msgs == snapshot
    assert llm.calls[0].messages[0].content == "You are kind.\n\nbe brief"


def test_system_message_inserted_when_absent():
    llm = scripted("ok")
    BasicAgent(llm=llm, system_message="S").run_nonstream(USER)
    assert [m.role for m in llm.calls[0].messages] == ["system", "user"]


class LangAgent(Agent):
    def _run(self, messages, lang="en", **kwargs):
        yield [Message.unchecked("assistant", lang, extra={"index": 0})]


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("hello there", "en"),
        ("你好，请介绍一下", "zh"),
        ("use 中文 please", "zh"),
        ("東京の天気は？", "ja"),
        ("서울 날씨는?", "ko"),
    ],
)
def test_language_detection(text, lang):
    assert LangAgent().run_nonstream([{"role": "user", "content": text}])[0]["content"] == lang


def test_lang_can_be_forced():
    assert LangAgent().run_nonstream(USER, lang="zh")[0]["content"] == "zh"


def test_empty_and_wrong_shaped_input_raise_clearly():
    bot = BasicAgent(llm=scripted())
    with pytest.raises(ValueError, match="empty"):
        bot.run([])
    with pytest.raises(TypeError, match="list of messages"):
        bot.run({"role": "user", "content": "x"})
    with pytest.raises(ValueError, match=r"messages\[1\]\.role"):
        bot.run([{"role": "user", "content": "x"}, {"role": "wizard", "content": "y"}])


def test_errors_propagate_typed():
    llm = scripted(ModelServiceError(401, "bad key"))
    with pytest.raises(ModelServiceError) as e:
        BasicAgent(llm=llm).run_nonstream(USER)
    assert e.value.code == 401 and len(llm.calls) == 1


def test_usage_summed_on_the_run():
    run = BasicAgent(llm=scripted("one two three")).run(USER)
    for _ in run:
        pass
    assert run.usage.completion_tokens == 3 and run.usage.prompt_tokens > 0 and run.usage.calls == 1


def test_deadline():
    def slow(messages, functions):
        return Reply(text="x" * 50, chunk_size=1)

    bot = BasicAgent(llm=ScriptedLLM([slow]))
    run = bot.run(USER, deadline=0.0001)
    import time

    time.sleep(0.01)
    with pytest.raises(RunDeadlineExceeded):
        list(run)


def test_closing_the_run_closes_the_model_stream():
    closed = threading.Event()

    class Tracking(ScriptedLLM):
        def _chat_stream(self, *a, **kw):
            try:
                yield from super()._chat_stream(*a, **kw)
            finally:
                closed.set()

    run = BasicAgent(llm=Tracking(["a" * 100], chunk_size=1)).run(USER)
    next(run)
    run.close()
    assert closed.is_set()


def test_same_agent_many_threads():
    bot = BasicAgent(llm=ScriptedLLM(default=lambda m, f: f"echo {m[-1].text}"))
    results = {}

    def work(i):
        results[i] = bot.run_nonstream([{"role": "user", "content": f"n{i}"}])[-1]["content"]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert results == {i: f"echo n{i}" for i in range(50)}

"""`_run`s written the Qwen-Agent way (whole response lists, plain for loops over `_call_llm`) next to ours."""

from __future__ import annotations

import copy

import pytest

from chatagent import Agent, BasicAgent, Message, ScriptedLLM, merge_delta, tool_call
from chatagent.agents.fncall import FnCallAgent

USER = [{"role": "user", "content": "hi"}]


def fold(deltas):
    out: list = []
    for d in deltas:
        merge_delta(out, d)
    return out


def both_modes(make):
    """(cumulative yields, the delta yields folded): the two must agree on the final response."""
    cumulative = [copy.deepcopy(r) for r in make().run(USER)]
    folded = fold(copy.deepcopy(d) for d in make().run(USER, delta_stream=True))
    assert folded == cumulative[-1]
    return cumulative


class ReturnsCallLLM(Agent):
    def _run(self, messages, lang="en", **kwargs):
        return self._call_llm(messages)


class ForLoopYieldsWhole(Agent):
    def _run(self, messages, lang="en", **kwargs):
        for rsp in self._call_llm(messages):
            yield [Message("assistant", "Answer: " + rsp[-1].content)] if rsp else []


class UnpacksLast(Agent):
    def _run(self, messages, lang="en", **kwargs):
        *_, last = self._call_llm(messages)
        yield [Message("assistant", last[-1].content.upper())]


class YieldsRspItself(Agent):
    def _run(self, messages, lang="en", **kwargs):
        rsp = []
        for rsp in self._call_llm(messages):
            yield rsp
        yield rsp + [Message("assistant", f"({len(rsp)} message)")]


class NonStream(Agent):
    def _run(self, messages, lang="en", **kwargs):
        reply = self._call_llm(messages, stream=False)
        yield [Message("assistant", "once: " + reply[-1].content)]


class Rewrites(Agent):
    """Qwen's Router shows 'Call: x' and then overwrites that message with the sub-agent's answer."""

    def _run(self, messages, lang="en", **kwargs):
        yield [Message("assistant", "Call: helper")]
        yield [Message("assistant", "The helper says hi", name="helper")]


@pytest.mark.parametrize(
    "cls, expected",
    [
        (ReturnsCallLLM, "hello world"),
        (ForLoopYieldsWhole, "Answer: hello world"),
        (UnpacksLast, "HELLO WORLD"),
        (NonStream, "once: hello world"),
        (Rewrites, "The helper says hi"),
    ],
)
def test_qwen_patterns_give_the_same_answer_in_both_stream_modes(cls, expected):
    def make():
        return cls(llm=ScriptedLLM(["hello world"], chunk_size=3))

    yields = both_modes(make)
    assert yields[-1][-1]["content"] == expected
    assert len(yields[-1]) == 1


def test_yielding_the_request_itself_shows_the_reply_once_and_goes_on():
    def make():
        return YieldsRspItself(llm=ScriptedLLM(["hello world"], chunk_size=3), name="q")

    yields = both_modes(make)
    assert [m["content"] for m in yields[-1]] == ["hello world", "(1 message)"]
    llm = ScriptedLLM(["hello world"], chunk_size=3)
    YieldsRspItself(llm=llm).run_nonstream(USER)
    assert len(llm.calls) == 1  # the model was not asked twice


def test_a_rewritten_message_replaces_it_in_delta_mode():
    deltas = [copy.deepcopy(d) for d in Rewrites(llm=ScriptedLLM([])).run(USER, delta_stream=True)]
    assert deltas[1][0]["replace"] is True
    assert fold(deltas) == [{"role": "assistant", "content": "The helper says hi", "name": "helper"}]


def test_a_subclass_of_our_agent_iterating_super_run_keeps_the_tool_loop():
    """Qwen's Router pattern over one of our agents: `for response in super()._run(...): yield response`."""

    def weather(city: str) -> str:
        """Weather."""
        return f"sunny in {city}"

    class Wrapper(FnCallAgent):
        def _run(self, messages, lang="en", **kwargs):
            for response in super()._run(messages, lang=lang, **kwargs):  # noqa: UP028 (the pattern under test)
                yield response

    llm = ScriptedLLM([tool_call("weather", {"city": "Rome"}), "It is sunny."])
    out = Wrapper(llm=llm, function_list=[weather]).run_nonstream(USER)
    assert [m["role"] for m in out] == ["assistant", "function", "assistant"]
    assert out[1]["content"] == "sunny in Rome" and out[-1]["content"] == "It is sunny."
    assert len(llm.calls) == 2


def test_our_own_agents_are_untouched_by_the_adapter():
    yields = both_modes(lambda: BasicAgent(llm=ScriptedLLM(["plain answer"], chunk_size=2)))
    assert yields[-1] == [{"role": "assistant", "content": "plain answer"}]
    assert len(yields) == len("plain answer") // 2

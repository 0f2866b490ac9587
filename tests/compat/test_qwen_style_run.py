"""Issue 13 item 3 (the lead's part): a `_run` written the Qwen-Agent way, yielding whole response lists
(`yield response + rsp`), and `_call_llm` read with a plain `for` loop yielding the reply so far, work in
cumulative and delta modes."""

from __future__ import annotations

import pytest

from chatagent import Agent, BasicAgent, ScriptedLLM
from chatagent.schema import ASSISTANT, Message
from chatagent.schema.stream import merge_delta

USER = [{"role": "user", "content": "Tell me two things."}]


class TwoSteps(Agent):
    """Nests two agents and yields `response + rsp`, as Qwen-Agent's docs show."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.first = BasicAgent(llm=ScriptedLLM(["First thing."]))
        self.second = BasicAgent(llm=ScriptedLLM(["Second thing."]))

    def _run(self, messages, lang="en", **kwargs):
        response = []
        rsp = []
        for rsp in self.first.run(messages):
            yield response + rsp
        response.extend(rsp)
        for rsp in self.second.run(messages + response):
            yield response + rsp


class LoopOverCallLlm(Agent):
    """Iterates `_call_llm` with a for loop and yields what it gives, plus a closing message."""

    def _run(self, messages, lang="en", **kwargs):
        output = []
        for output in self._call_llm(messages):
            yield output
        yield output + [Message(ASSISTANT, "(end)")]


def final(agent, delta):
    if not delta:
        *_, last = agent.run(USER)
        return last
    full: list = []
    for d in agent.run(USER, delta_stream=True):
        merge_delta(full, d)
    return full


@pytest.mark.parametrize("delta", [False, True], ids=["cumulative", "delta"])
def test_a_run_yielding_whole_lists(delta):
    out = final(TwoSteps(name="two"), delta)
    assert [(m["content"], m["name"]) for m in out] == [("First thing.", "two"), ("Second thing.", "two")]


@pytest.mark.parametrize("delta", [False, True], ids=["cumulative", "delta"])
def test_call_llm_in_a_for_loop_gives_the_reply_so_far(delta):
    out = final(LoopOverCallLlm(llm=ScriptedLLM(["Hello there."])), delta)
    assert [m["content"] for m in out] == ["Hello there.", "(end)"]

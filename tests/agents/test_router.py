"""Router: answers itself or delegates by name; calls never leak into the stream; unknown names fall back."""

from __future__ import annotations

import copy
import logging

import pytest

from chatagent import BasicAgent, Reply, ScriptedLLM, merge_delta
from chatagent.agents.router import Router

ASK = [{"role": "user", "content": "Translate 'hello' into French."}]


def sub(name: str, *replies, description: str = "") -> BasicAgent:
    return BasicAgent(llm=ScriptedLLM(list(replies)), name=name, description=description or f"does {name} work")


def make(router_replies: list, system_message: str | None = "Route carefully.", **kw):
    coder = sub("coder", *kw.pop("coder", []), description="writes code")
    translator = sub("translator", *kw.pop("translator", []), description="translates text")
    router = Router([coder, translator], llm=ScriptedLLM(router_replies, **kw), system_message=system_message)
    return router, coder, translator


def test_router_answers_itself_when_no_agent_is_called():
    router, coder, translator = make(["Bonjour is the word."])
    out = router.run_nonstream(ASK)
    assert out == [{"role": "assistant", "content": "Bonjour is the word.", "name": "Router"}]
    sent = router.llm.calls[0].messages
    assert sent[0].role == "system" and sent[0].content.startswith("Route carefully.\n\n")
    assert "- coder: writes code" in sent[0].content and "- translator: translates text" in sent[0].content
    assert not coder.llm.calls and not translator.llm.calls


@pytest.mark.parametrize(
    "reply",
    [
        "Call: translator\n",
        "Call: translator",
        "  call :   translator  \nReply: ignored",
        "**Call:** translator\n",
        "**Call: translator**\n",
        "Call：Translator\n",
        "Call: `translator`.\n",
    ],
)
def test_router_delegates_on_a_call_line_as_models_write_it(reply):
    router, coder, translator = make([reply], translator=["Bonjour."])
    out = router.run_nonstream(ASK)
    assert out == [{"role": "assistant", "content": "Bonjour.", "name": "translator"}]
    assert not coder.llm.calls


def test_chosen_agent_gets_the_original_conversation_without_the_routers_instructions():
    msgs = [{"role": "system", "content": "The user is Anna."}, *ASK]
    router, _, translator = make(["Call: translator\n"], translator=["Bonjour, Anna."])
    router.run_nonstream(msgs)
    seen = translator.llm.calls[0].messages
    assert [(m.role, m.content) for m in seen] == [("system", "The user is Anna."), ("user", ASK[0]["content"])]
    assert "Route carefully" in router.llm.calls[0].messages[0].content
    assert "The user is Anna." in router.llm.calls[0].messages[0].content


def test_the_call_line_never_appears_in_any_yield():
    router, _, _ = make([Reply(text="Call: coder\n", chunks=list("Call: coder\n"))], coder=["print('hi')"])
    yields = [copy.deepcopy(r) for r in router.run(ASK)]
    assert yields and all("Call" not in m["content"] for y in yields for m in y)
    assert yields[-1] == [{"role": "assistant", "content": "print('hi')", "name": "coder"}]


def test_text_that_only_starts_like_a_call_is_shown():
    router, _, _ = make(
        [Reply(text="Call me Ishmael.\nThen sail.", chunks=["Ca", "ll me", " Ishmael.\nThen", " sail."])]
    )
    yields = [copy.deepcopy(r) for r in router.run(ASK)]
    assert yields[-1][0]["content"] == "Call me Ishmael.\nThen sail."
    router, _, _ = make(["Callers welcome"])
    assert router.run_nonstream(ASK)[0]["content"] == "Callers welcome"


def test_unknown_agent_is_logged_and_the_router_answers_itself(caplog):
    router, coder, translator = make(["Call: poet\n", "I will answer myself: Bonjour."])
    with caplog.at_level(logging.WARNING, logger="chatagent.router"):
        out = router.run_nonstream(ASK)
    assert out == [{"role": "assistant", "content": "I will answer myself: Bonjour.", "name": "Router"}]
    assert "unknown agent 'poet'" in caplog.text
    retry = router.llm.calls[1].messages
    assert retry[-2].content == "Call: poet" and "no agent called 'poet'" in retry[-1].content
    assert not coder.llm.calls and not translator.llm.calls


def test_router_uses_chinese_prompts_for_chinese_input():
    router, _, translator = make(["Call: translator"], system_message=None, translator=["你好 = hello"])
    out = router.run_nonstream([{"role": "user", "content": "把“你好”翻译成英文"}])
    assert out[0]["name"] == "translator"
    assert "你可以把用户的请求交给以下智能体之一" in router.llm.calls[0].messages[0].content


def test_reasoning_shown_before_a_call_keeps_its_place():
    def build():
        return make([Reply(text="Call: coder\n", reasoning="needs code")], coder=["x = 1"])[0]

    final = build().run_nonstream(ASK)
    assert [(m.get("reasoning_content"), m["content"], m["name"]) for m in final] == [
        ("needs code", "", "Router"),
        (None, "x = 1", "coder"),
    ]
    assert [copy.deepcopy(r) for r in build().run(ASK)][-1] == final


@pytest.mark.parametrize("router_reply", ["Call: coder\n", "Bonjour, " * 20])
def test_stream_contract(router_reply):
    def build():
        return make([Reply(text=router_reply, chunk_size=3)], coder=[Reply(text="print(1)\n" * 10, chunk_size=4)])[0]

    yields = [copy.deepcopy(r) for r in build().run(ASK)]
    for prev, cur in zip(yields, yields[1:], strict=False):
        assert len(cur) >= len(prev)
        assert all(c["content"].startswith(p["content"]) for p, c in zip(prev, cur, strict=False))
    final = build().run_nonstream(ASK)
    assert yields[-1] == final
    full: list = []
    for d in build().run(ASK, delta_stream=True):
        merge_delta(full, d)
    assert full == final


def test_usage_includes_the_chosen_agent():
    router, _, _ = make(["Call: coder\n"], coder=["print('a long answer with many tokens')"])
    run = router.run(ASK)
    list(run)
    assert run.usage.calls == 2 and run.usage.completion_tokens >= 5


def test_bad_construction():
    with pytest.raises(ValueError, match="at least one"):
        Router([], llm=ScriptedLLM([]))
    with pytest.raises(ValueError, match="unique"):
        Router([sub("a"), sub("a")], llm=ScriptedLLM([]))
    with pytest.raises(ValueError, match="needs a name"):
        Router([BasicAgent(llm=ScriptedLLM([]))], llm=ScriptedLLM([]))

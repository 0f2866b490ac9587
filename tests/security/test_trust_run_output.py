"""Attacks on output checks (issue 24, item 2): text an output hook blocks or rewrites must reach no client, on any
surface: `chatagent serve` (whole and streamed, over HTTP with the openai client), `run(delta_stream=True)`, the web
UI in Chromium and `chatagent chat` in a pty. Each test fails on the code before the fix, where the text streamed
out before the check ran and the OpenAI wire format ignored `Fragment.replace`."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import openai
import pytest

from chatagent import BasicAgent, Reply, ScriptedLLM
from chatagent.llm.base import BaseChatModel
from chatagent.plugins.guardrails import OutputGuardrail, TextPolicy
from chatagent.schema import Message
from chatagent.schema.fragment import Fragment
from chatagent.server.runner import AgentServer

pytestmark = pytest.mark.timeout(120)

KEY = "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2"
EMAIL = "mallory@example.com"
SECRET = "hunter2"


def no_email(text: str) -> str | None:
    return "an e-mail address" if "@" in text else None


def no_secret(text: str) -> str | None:
    return "a password" if SECRET in text else None


# Each case: the agent's plugins and model replies, what must never reach a client, and the final answer.
CASES: dict[str, tuple[dict[str, Any], list[Any], str, str]] = {
    "blocked": (
        {"plugins": [OutputGuardrail(no_email, message="I can't share that.")]},
        [f"Sure: mail me at {EMAIL} any time."],
        EMAIL,
        "I can't share that.",
    ),
    "redacted": (
        {"plugins": [TextPolicy(redact=[r"sk-[A-Za-z0-9]{20,}"])]},
        [f"Your key is {KEY}, keep it safe."],
        KEY,
        "Your key is [redacted], keep it safe.",
    ),
    "retried": (
        {"response_format": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
        ["DRAFT-NOT-JSON the city is Paris", '{"city": "Paris"}'],
        "DRAFT-NOT-JSON",
        '{"city": "Paris"}',
    ),
    "thinking": (
        {"plugins": [OutputGuardrail(no_secret, message="I can't share that.")]},
        [Reply(text=f"The password is {SECRET}.", reasoning=f"They want it; it is {SECRET}.")],
        SECRET,
        "I can't share that.",
    ),
}


def agent_for(case: str) -> BasicAgent:
    options, replies, _, _ = CASES[case]
    return BasicAgent(llm=ScriptedLLM(replies, chunk_size=3), name="bot", **options)


@pytest.mark.parametrize("case", list(CASES))
def test_serve_clients_never_receive_text_an_output_check_blocks_or_rewrites(case: str) -> None:
    _, _, forbidden, final = CASES[case]
    ask = [{"role": "user", "content": "hello"}]
    with AgentServer(agent_for(case), "127.0.0.1", 0).start() as server:
        client = openai.OpenAI(base_url=server.url, api_key="none", max_retries=0, timeout=30)
        whole = client.chat.completions.create(model="bot", messages=ask)
        server.service.agents["bot"] = agent_for(case)
        chunks = list(client.chat.completions.create(model="bot", messages=ask, stream=True))
    message = whole.choices[0].message
    received = json.dumps(whole.model_dump())
    assert forbidden not in received, "the whole answer carries text an output check blocked or rewrote"
    assert message.content == final
    assert not (message.model_extra or {}).get("reasoning_content")
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    reasoning = "".join(
        (c.choices[0].delta.model_extra or {}).get("reasoning_content") or "" for c in chunks if c.choices
    )
    assert forbidden not in streamed + reasoning, "the stream carried text before the output check had passed"
    assert streamed == final


class Redrafting(BasicAgent):
    """Written the Qwen-Agent way: shows a draft, then the whole response again with the message rewritten."""

    def _run(self, messages, lang="en", **kwargs):
        yield [{"role": "assistant", "content": "DRAFT: not checked yet"}]
        yield [{"role": "assistant", "content": "Final answer."}]


def test_a_whole_serve_answer_carries_only_the_final_text_of_a_replaced_message() -> None:
    with AgentServer(Redrafting(name="bot"), "127.0.0.1", 0).start() as server:
        client = openai.OpenAI(base_url=server.url, api_key="none", max_retries=0, timeout=30)
        whole = client.chat.completions.create(model="bot", messages=[{"role": "user", "content": "hi"}])
    assert whole.choices[0].message.content == "Final answer."


@pytest.mark.parametrize("case", list(CASES))
def test_run_delta_stream_never_yields_unchecked_text(case: str) -> None:
    _, _, forbidden, final = CASES[case]
    seen = []
    for fragments in agent_for(case).run([{"role": "user", "content": "hello"}], delta_stream=True):
        seen += [(f.get("content") or "", f.get("reasoning_content") or "") for f in fragments]
    assert not any(forbidden in text + reasoning for text, reasoning in seen)
    cumulative = list(agent_for(case).run([{"role": "user", "content": "hello"}]))
    assert not any(forbidden in json.dumps(response) for response in cumulative)
    assert cumulative[-1][-1]["content"] == final


class GatedLLM(BaseChatModel):
    """Streams `pieces`; after piece `pause_after` it waits for `go` (set by the test, with a deadline)."""

    def __init__(self, pieces: list[str], pause_after: int) -> None:
        super().__init__({"model": "gated"})
        self.pieces, self.pause_after = pieces, pause_after
        self.go = threading.Event()

    def _chat_stream(self, messages, functions, cfg, usage, **kwargs):
        for i, piece in enumerate(self.pieces):
            yield [Fragment.unchecked("assistant", piece, index=0)]
            if i == self.pause_after:
                assert self.go.wait(30), "the test never let the model go on"


def test_sentence_checks_release_each_sentence_that_passed_while_the_model_streams() -> None:
    """`per='sentence'`: a sentence is shown once it is complete and checked, before the model has finished."""
    llm = GatedLLM(["The weather ", "is fine. ", "Call me at ", EMAIL, " today."], pause_after=1)
    guard = OutputGuardrail(no_email, message="I can't share that.", per="sentence")
    bot = BasicAgent(llm=llm, plugins=[guard])
    shown: list[str] = []
    for fragments in bot.run([Message("user", "weather?")], delta_stream=True):
        shown += [f.text for f in fragments if f.text]
        if "".join(shown) == "The weather is fine. ":
            llm.go.set()  # the first sentence came while the model was still waiting to go on
    assert llm.go.is_set(), "the checked sentence was held until the end"
    assert EMAIL not in "".join(shown) and shown[-1] == "I can't share that."


# ---- the web UI and the terminal ------------------------------------------------------------------------------


def paced_reply(text: str) -> Any:
    from tests.support.openai_server import Reply as ServerReply

    return ServerReply(text=text, chunk_size=3, interval=0.03)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_web_ui_never_shows_text_an_output_check_blocks(openai_server) -> None:
    from playwright.sync_api import sync_playwright

    from chatagent.gui import WebUI
    from tests.e2e.test_gui_browser import CHROMIUM, CHROMIUM_ARGS, free_port, send

    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed at /usr/bin/chromium")
    openai_server.add(paced_reply(f"Well, the admin password is {SECRET}, as you asked."))
    llm = {"model": "m", "model_server": openai_server.base_url, "api_key": "k", "generate_cfg": {"max_retries": 0}}
    guard = OutputGuardrail(no_secret, message="I can't share that.", name="pw")
    ui = WebUI(BasicAgent(llm=llm, plugins=[guard], name="Ops"))
    url = ui.run(server_port=free_port(), block=False).rstrip("/")
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            page = browser.new_context().new_page()
            page.set_default_timeout(30_000)
            page.goto(url)
            page.wait_for_selector("#chat-input textarea")
            page.evaluate(
                """() => {
                    window.__seen = [];
                    const chat = document.querySelector('#chatbot');
                    new MutationObserver(() => window.__seen.push(chat.innerText))
                        .observe(chat, {subtree: true, childList: true, characterData: true});
                }"""
            )
            send(page, "what is the admin password?")
            page.locator("#chatbot").get_by_text("I can't share that.").wait_for()
            seen = page.evaluate("() => window.__seen")
            browser.close()
    finally:
        ui.close()
    assert len(seen) > 1
    assert not [s for s in seen if SECRET in s], "the web UI showed the blocked text while it streamed"


def test_the_terminal_never_prints_text_an_output_check_blocks(tmp_path: Path, openai_server) -> None:
    from tests.support.pty_process import PtyProcess

    openai_server.add(paced_reply(f"Well, the admin password is {SECRET}, as you asked."))
    agent_file = tmp_path / "guarded_agent.py"
    agent_file.write_text(
        "from chatagent import BasicAgent\n"
        "from chatagent.plugins.guardrails import OutputGuardrail\n"
        "def make():\n"
        f"    llm = {{'model': 'm', 'model_server': {openai_server.base_url!r}, 'api_key': 'k',\n"
        "           'generate_cfg': {'max_retries': 0}}\n"
        f"    guard = OutputGuardrail(lambda t: {SECRET!r} in t and 'a password', message='I cannot share that.')\n"
        "    return BasicAgent(llm=llm, plugins=[guard], name='ops')\n"
    )
    env = {**os.environ, "CHATAGENT_WORKSPACE": str(tmp_path / "ws"), "PYTHONUNBUFFERED": "1"}
    term = PtyProcess(["chat", "--agent", f"{agent_file}:make"], env)
    try:
        term.read_until(b"you> ", 60)
        term.send("what is the admin password?")
        out = term.read_until(b"I cannot share that.", 60)
    finally:
        term.close()
    assert SECRET.encode() not in out, "the terminal printed the blocked text while it streamed"


# ---- structured output streaming past the checks (issue 36 item 9) -----------------------------------------------

ADDRESS = "12 Rue de la Paix, Paris"
CONTACT = {"type": "object", "properties": {"name": {"type": "string"}, "address": {"type": "string"}}}


def no_address(text: str) -> str | None:
    return "a home address" if "Rue de la Paix" in text else None


def contact_reply(openai_server) -> dict:
    answer = json.dumps({"name": "Alice Martin", "address": ADDRESS})
    openai_server.add(paced_reply(answer))
    return {"model": "m", "model_server": openai_server.base_url, "api_key": "k", "generate_cfg": {"max_retries": 0}}


@pytest.mark.parametrize("per", ["answer", "sentence"])
def test_a_streamed_partial_object_never_holds_what_an_output_check_withholds(openai_server, per: str) -> None:
    """`run(response_format=...)` streams the object parsed so far in `extra['parsed']`; before, each partial object
    was parsed from the model's text before the output checks held it, and carried the address the guardrail then
    withheld. Now it follows only text the checks let out: nothing of the withheld answer."""
    guard = OutputGuardrail(no_address, message="I can't share that.", per=per)
    bot = BasicAgent(llm=contact_reply(openai_server), plugins=[guard])
    parsed: list[Any] = []
    texts: list[str] = []
    for fragments in bot.run([Message("user", "Alice's contact?")], delta_stream=True, response_format=CONTACT):
        parsed += [f["extra"]["parsed"] for f in fragments if "parsed" in (f.get("extra") or {})]
        texts += [f.get("content") or "" for f in fragments]
    assert not [p for p in parsed if "Rue de la Paix" in json.dumps(p)], "a partial object held the withheld address"
    assert "Rue de la Paix" not in "".join(texts) and "I can't share that." in "".join(texts)


def test_a_streamed_partial_object_still_grows_without_content_checks(openai_server) -> None:
    """Structured output alone (its validation checks only the answer's form): the object streams as it grows."""
    bot = BasicAgent(llm=contact_reply(openai_server))
    parsed: list[Any] = []
    for fragments in bot.run([Message("user", "Alice's contact?")], delta_stream=True, response_format=CONTACT):
        parsed += [f["extra"]["parsed"] for f in fragments if "parsed" in (f.get("extra") or {})]
    assert len(parsed) > 3 and parsed[0] != parsed[-1]
    assert parsed[-1] == {"name": "Alice Martin", "address": ADDRESS}

"""Attacks on `A2AAgent`, the A2A client (issue 36, items 4 and 13), by a scripted hostile partner on loopback
(tests/support/a2a_partner.py) and through `chatagent serve`. Before the fix a card at one origin naming another
sent that other host the partner's key and the customer's message; a tool building an `A2AAgent` inside `serve`
reached this machine's own services; a 100 MB answer was read whole, an endless one until the timeout, and a
400 KB card description went into every request to the model."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

pytest.importorskip("a2a")

from chatagent import A2AAgent, FnCallAgent, ScriptedLLM, tool, tool_call  # noqa: E402
from chatagent.server.runner import AgentServer  # noqa: E402
from tests.support.a2a_partner import A2APartner  # noqa: E402
from tests.support.openai_server import OpenAIServer  # noqa: E402

pytestmark = pytest.mark.timeout(120)

IBAN = "DE89 3704 0044 0532 0130 00"


def ask_helper(helper: A2AAgent, message: str) -> str:
    return asyncio.run(helper.acall({"message": message}))


def test_a_card_naming_another_origin_gets_neither_the_key_nor_the_message() -> None:
    with A2APartner() as elsewhere, A2APartner() as partner:
        partner.interface = f"{elsewhere.url}/a2a/steal"
        with pytest.raises(ValueError, match="names no interface at its own origin"):
            helper = A2AAgent(partner.url, api_key="partner-key-0123456789")
            bot = FnCallAgent(llm=ScriptedLLM([tool_call("partner", {"message": f"Refund to {IBAN}"}), "ok"]),
                              function_list=[helper])  # fmt: skip
            bot.run_nonstream([{"role": "user", "content": "Refund me."}])
        assert elsewhere.requests == [], "the other origin was reached"
        # listed explicitly, the operator's choice: it is used, and gets the key
        helper = A2AAgent(partner.url, api_key="partner-key-0123456789", interfaces=[f"{elsewhere.url}/a2a/steal"])
        assert ask_helper(helper, "hello") == "Done."
        assert elsewhere.requests[-1][2]["authorization"] == "Bearer partner-key-0123456789"


def test_no_request_of_a2a_leaves_the_configured_origins() -> None:
    """Whatever URL the SDK is handed (a redirect, an interface changed after the card was read), the guarded
    client refuses it before connecting: the key never leaves."""
    with A2APartner() as elsewhere, A2APartner() as partner:
        helper = A2AAgent(partner.url, api_key="partner-key-0123456789")
        helper.card.supported_interfaces[0].url = f"{elsewhere.url}/a2a/steal"
        answer = ask_helper(helper, f"Refund to {IBAN}")
        assert "is not where this connection was configured to go" in answer and elsewhere.requests == []


def test_a_served_run_cannot_make_a2a_reach_this_machine(tmp_path: Path) -> None:
    """A tool that asks the A2A agent at a URL the client names, inside `serve`: the run's URL policy refuses a
    loopback host, card and message alike (before the fix the internal service's answer came back)."""
    with A2APartner(answer="internal secrets") as internal:

        @tool
        def ask_agent(url: str, message: str) -> str:
            """Ask the A2A agent at a URL."""
            try:
                return ask_helper(A2AAgent(url), message)
            except Exception as e:  # what the model reads
                return f"Error: {e}"

        script = [tool_call("ask_agent", {"url": internal.url, "message": "hi"}), "Done."]
        bot = FnCallAgent(llm=ScriptedLLM(script), function_list=[ask_agent], name="front")
        with AgentServer(bot, "127.0.0.1", 0, store=f"sqlite:///{tmp_path}/s.db") as server:
            body = {"model": "front", "messages": [{"role": "user", "content": "Ask it."}], "session_id": "new"}
            reply = httpx.post(f"{server.url}/chat/completions", json=body, timeout=60).json()
            sid = reply["choices"][0]["message"]["chatagent"]["session_id"]
        assert internal.requests == [], "the served run reached a loopback A2A agent"
        from chatagent import Session

        stored = Session(sid, f"sqlite:///{tmp_path}/s.db", user="serve:anonymous").messages()
        result = next(m["content"] for m in stored if m["role"] == "function")
        assert "internal secrets" not in result and "private network" in result


def test_an_answer_of_100_mb_is_not_read_whole() -> None:
    with A2APartner() as partner:
        helper = A2AAgent(partner.url)
        partner.answer_bytes = 100 << 20
        answer = ask_helper(helper, "Tell me everything.")
    assert "larger than 8388608 bytes" in answer, answer[:300]  # the default bound


def test_an_endless_answer_stops_at_the_bound_not_the_timeout() -> None:
    with A2APartner() as partner:
        helper = A2AAgent(partner.url, max_bytes=1 << 20, timeout=60)
        partner.endless = True
        answer = ask_helper(helper, "Go on.")
    assert "larger than 1048576 bytes" in answer, answer[:300]


def test_the_text_handed_to_the_model_is_cut_and_marked() -> None:
    with A2APartner(answer="A" * 300_000) as partner:
        answer = ask_helper(A2AAgent(partner.url), "Long?")
    assert len(answer) < 33_000 and answer.startswith("A" * 1000) and "[... cut: 268000 more characters]" in answer


def test_a_card_description_of_400_kb_is_cut_and_runs_go_on(openai_server: OpenAIServer) -> None:
    with A2APartner(description="Buy now! " * 45_000) as partner:
        helper = A2AAgent(partner.url)
        assert len(helper.description) < 1_100 and "[... cut:" in helper.description
        openai_server.add("Hello.")
        llm = {"model": "m", "model_server": openai_server.base_url, "api_key": "k", "generate_cfg": {"max_retries": 0}}
        bot = FnCallAgent(llm=llm, function_list=[helper])
        assert bot.run_nonstream([{"role": "user", "content": "hi"}])[-1]["content"] == "Hello."


def test_a_card_larger_than_the_bound_is_refused() -> None:
    with A2APartner(description="x" * (2 << 20)) as partner, pytest.raises(Exception, match="larger than"):
        A2AAgent(partner.url)

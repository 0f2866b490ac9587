"""Attacks on tool approval and the tool result cache (issue 24, items 5, 7 and 15), each performed through the real
surface: a real sandbox, `chatagent serve` over HTTP, the command line in a pty. Each test fails on the code before
the fix: a call that needs a person's yes ran without one."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from chatagent import Agent, FnCallAgent, InputGuardrail, Plugin, ScriptedLLM, tool, tool_call
from chatagent.agents.tir_agent import TIRMathAgent
from chatagent.run.approval import approval_message, pending_approval
from chatagent.schema import FUNCTION, content_text
from chatagent.server.runner import AgentServer
from tests.security.conftest import needs_bwrap

pytestmark = pytest.mark.timeout(120)

PROGRAM = "Let me compute it.\n```python\nprint(6 * 7 * 1001)\n```"
PRINTED = "42042"


def texts(response: list[dict]) -> str:
    return "\n".join(content_text(m.get("content") or "") for m in response)


# ---- item 5: approval wherever a tool runs ----------------------------------------------------------------------


@needs_bwrap
def test_tir_math_agent_code_waits_for_approval_in_the_real_sandbox(tmp_path: Path) -> None:
    """TIRMathAgent runs its programs with `_call_tool`, outside the controlled run: the code ran with no pause."""
    cfg = {"requires_approval": True, "sandbox": "bwrap", "timeout": 30, "work_dir": str(tmp_path / "ci")}
    llm = ScriptedLLM([PROGRAM, "So the answer is 42042."])
    bot = TIRMathAgent(llm=llm, code_interpreter=cfg)
    ask = [{"role": "user", "content": "What is 6*7*1001?"}]
    try:
        paused = bot.run_nonstream(ask)
        assert PRINTED not in texts(paused), "the program ran without the user's approval"
        waiting = pending_approval(paused)
        assert waiting and waiting[0]["name"] == "code_interpreter"
        assert "6 * 7 * 1001" in json.loads(waiting[0]["arguments"])["code"]  # the person sees what would run
        resumed = bot.run_nonstream(ask + paused + [approval_message(True)])
    finally:
        bot.function_map["code_interpreter"].close()
    assert resumed[0]["role"] == FUNCTION and PRINTED in content_text(resumed[0]["content"])
    assert "So the answer is 42042." in texts(resumed)


class QwenStyleAgent(Agent):
    """An agent written the Qwen-Agent way: `for` over `_call_llm`, then `self._call_tool` for each call."""

    def _run(self, messages, lang="en", **kwargs):
        response: list = []
        for _ in range(3):
            out: list = []
            for out in self._call_llm(messages + response, [f.function for f in self.function_map.values()]):
                yield response + out
            response += out
            calls = [m for m in out if m.function_call is not None]
            if not calls:
                return
            for m in calls:
                result = self._call_tool(m.function_call.name, m.function_call.arguments)
                response.append({"role": "function", "name": m.function_call.name, "content": result,
                                 "extra": dict(m.extra or {})})  # fmt: skip
                yield response


def wire_tool(ran: list) -> Any:
    @tool(requires_approval=True)
    def wire(to: str, amount: float) -> str:
        """Send money."""
        ran.append((to, amount))
        return f"sent {amount} to {to}"

    return wire


def test_a_qwen_style_loop_calling_call_tool_pauses_for_approval() -> None:
    ran: list = []
    llm = ScriptedLLM([tool_call("wire", {"to": "MALLORY", "amount": 1e6}), "Sent."])
    bot = QwenStyleAgent(llm=llm, function_list=[wire_tool(ran)])
    ask = [{"role": "user", "content": "Pay my rent."}]
    paused = bot.run_nonstream(ask)
    assert ran == [], "a Qwen-style loop ran an approval-gated tool with no pause"
    assert pending_approval(paused)[0]["name"] == "wire"
    denied = bot.run_nonstream(ask + paused + [approval_message(False, "Not to Mallory.")])
    assert ran == [] and "denied" in denied[0]["content"]


def test_before_tool_hooks_and_input_checks_hold_on_the_call_tool_path() -> None:
    ran: list = []

    class Sandboxed(Plugin):
        def before_tool(self, agent, call):
            return "refused by policy"

    @tool
    def launch(target: str) -> str:
        """Launch."""
        ran.append(target)
        return "launched"

    llm = ScriptedLLM([tool_call("launch", {"target": "x"}), "Done."])
    bot = QwenStyleAgent(llm=llm, function_list=[launch], plugins=[Sandboxed()])
    out = bot.run_nonstream([{"role": "user", "content": "go"}])
    assert ran == [] and out[1]["content"] == "refused by policy"

    tripped = InputGuardrail(lambda text: "not allowed" if "launch" in text else None)
    llm = ScriptedLLM([tool_call("launch", {"target": "y"}), "Done."])
    bot = QwenStyleAgent(llm=llm, function_list=[launch], plugins=[tripped])
    out = bot.run_nonstream([{"role": "user", "content": "launch it"}])
    assert ran == [], "the tool ran before the concurrent input check had passed"
    assert out[-1]["extra"]["blocked_by"]


# ---- item 7: approval before the cache; results cached per conversation ---------------------------------------


def records_agent(reads: list) -> FnCallAgent:
    @tool(cache=True, requires_approval=True)
    def read_record(record_id: str) -> str:
        """Read a personnel record."""
        reads.append(record_id)
        return f"record {record_id}: salary 250000"

    def answer(messages, functions):
        last = messages[-1]
        if last.role == FUNCTION:
            return f"It says: {last.text}"
        return tool_call("read_record", {"record_id": "42"})

    return FnCallAgent(llm=ScriptedLLM(default=answer), function_list=[read_record], name="hr")


def test_an_approved_cached_result_is_not_served_to_another_conversation_over_serve(tmp_path: Path) -> None:
    reads: list = []
    store = f"sqlite:///{tmp_path}/sessions.db"
    with AgentServer(records_agent(reads), "127.0.0.1", 0, store=store, api_key="k-alice").start() as server:
        auth = {"Authorization": "Bearer k-alice"}

        def ask(session: str, messages: list[dict]) -> dict:
            body = {"model": "hr", "session_id": session, "messages": messages}
            r = httpx.post(f"{server.url}/chat/completions", json=body, headers=auth, timeout=30)
            assert r.status_code == 200, r.text
            return r.json()["choices"][0]["message"]

        first = ask("alice-1", [{"role": "user", "content": "Show record 42."}])
        assert first["chatagent"]["pending_approval"]
        approve = {"role": "user", "content": "", "extra": {"approval": True}}
        assert "salary 250000" in ask("alice-1", [approve])["content"]
        assert reads == ["42"]
        other = ask("other-2", [{"role": "user", "content": "Show record 42."}])
    assert "salary" not in other["content"], "a cached result of an approval-gated tool was served without a pause"
    assert other["chatagent"]["pending_approval"]


def test_the_cache_is_read_after_the_approval_check_in_process() -> None:
    reads: list = []
    bot = records_agent(reads)
    ask = [{"role": "user", "content": "Show record 42."}]
    paused = bot.run_nonstream(ask, session_id="conversation-a")
    bot.run_nonstream(ask + paused + [approval_message(True)], session_id="conversation-a")
    again = bot.run_nonstream(ask, session_id="conversation-a")  # the same conversation: still asks first
    assert pending_approval(again) and "salary" not in texts(again)
    other = bot.run_nonstream(ask, session_id="conversation-b")
    assert pending_approval(other) and "salary" not in texts(other)
    assert reads == ["42"]


# ---- item 15: non-finite numbers, unique call ids ---------------------------------------------------------------


@pytest.mark.parametrize("amount", ["NaN", "Infinity", "-Infinity"])
def test_a_non_finite_number_does_not_slip_past_a_numeric_approval_rule(amount: str) -> None:
    ran: list = []

    @tool(requires_approval=lambda args: args["amount"] > 100)
    def pay(to: str, amount: float) -> str:
        """Pay someone."""
        ran.append((to, amount))
        return "paid"

    llm = ScriptedLLM([tool_call("pay", f'{{"to": "MALLORY", "amount": {amount}}}'), "OK."])
    with AgentServer(FnCallAgent(llm=llm, function_list=[pay], name="bank"), "127.0.0.1", 0).start() as server:
        body = {"model": "bank", "messages": [{"role": "user", "content": "Pay."}]}
        r = httpx.post(f"{server.url}/chat/completions", json=body, timeout=30)
    assert r.status_code == 200, r.text
    assert ran == [], f"pay ran with amount={amount} and no approval"
    sent = llm.calls[1].messages[-1]
    assert sent.role == FUNCTION and "finite" in sent.text


def test_two_calls_with_one_id_get_a_decision_each_in_the_terminal(tmp_path: Path, openai_server) -> None:
    """A model (or its server) gives two calls the same id; the person says no to the first and yes to the second
    in `chatagent chat`: the first must not run."""
    from tests.support.pty_process import PtyProcess

    paid = tmp_path / "paid.txt"
    agent_file = tmp_path / "bank_agent.py"
    agent_file.write_text(
        "from chatagent import FnCallAgent, tool\n"
        f"PAID = {str(paid)!r}\n"
        "@tool(requires_approval=True)\n"
        "def pay(to: str, amount: float) -> str:\n"
        '    """Pay someone."""\n'
        "    with open(PAID, 'a') as f:\n"
        "        f.write(f'{to} {amount}\\n')\n"
        "    return 'paid'\n"
        "def make():\n"
        f"    llm = {{'model': 'm', 'model_server': {openai_server.base_url!r}, 'api_key': 'k',\n"
        "           'generate_cfg': {'max_retries': 0}}\n"
        "    return FnCallAgent(llm=llm, function_list=[pay], name='bank')\n"
    )
    calls = [("pay", {"to": "MALLORY", "amount": 1000000}), ("pay", {"to": "landlord", "amount": 900})]
    events = [{"role": "assistant", "content": ""}]
    for i, (name, args) in enumerate(calls):
        fn = {"name": name, "arguments": json.dumps(args)}
        events.append({"tool_calls": [{"index": i, "id": "call_same", "type": "function", "function": fn}]})
    chunks = [{"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
               "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in events]  # fmt: skip
    chunks.append({**chunks[0], "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    from tests.support.openai_server import Reply as ServerReply

    openai_server.add(ServerReply(body=body, content_type="text/event-stream"), "Done.")
    env = {**os.environ, "CHATAGENT_WORKSPACE": str(tmp_path / "ws"), "PYTHONUNBUFFERED": "1"}
    term = PtyProcess(["chat", "--agent", f"{agent_file}:make"], env)
    try:
        term.read_until(b"you> ", 60)
        term.send("Pay the rent.")
        term.read_until(b"MALLORY", 60)
        term.read_until(b"[y/N]", 60)
        term.send("n")
        term.read_until(b"landlord", 60)
        term.send("y")
        term.send("")  # the reason asked for when a call is refused (an empty line at the prompt is skipped)
        term.read_until(b"Done.", 60)
    finally:
        term.close()
    paid_to = paid.read_text()
    assert "MALLORY" not in paid_to, "the call the person refused ran"
    assert paid_to.startswith("landlord 900")

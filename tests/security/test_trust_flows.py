"""Flows have owners (issue 36 item 12), attacked through `chatagent serve` by two clients with keys.

The served agent's tools start and resume a payment flow that pauses for a person's approval (`Flow.ask`). Alice
starts one (900 to her landlord) and it waits; Mallory, another client, calls the same tools with Alice's flow id.
Before the fix her `kickoff(inputs={'id': <alice's flow>, ...})` rewrote the paused flow (Alice's approval then
"paid 99999 to MALLORY"), and `resume` took anyone's flow; a stored record could name any attribute as the next
step. Now `kickoff` refuses a stored id, the record carries its owner and `resume` answers a client only for its own
flows, and a pending step must be one of the flow's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from chatagent import Flow, FlowPaused, FnCallAgent, ScriptedLLM, listen, start, tool, tool_call
from chatagent.server.runner import AgentServer
from chatagent.sessions.flow_states import FlowStates

pytestmark = pytest.mark.timeout(120)

KEYS = {"alice": "key-alice", "mallory": "key-mallory"}
PAID: list[tuple[str, float]] = []


class Payment(Flow):
    """Ask a person, then pay."""

    @start()
    def confirm(self) -> str:
        return self.ask(f"Pay {self.state['amount']} to {self.state['to']}?")

    @listen(confirm)
    def pay(self, answer: str) -> str:
        if answer != "approved":
            return "not paid"
        PAID.append((self.state["to"], self.state["amount"]))
        return f"paid {self.state['amount']} to {self.state['to']}"

    def wire_everything(self) -> str:  # not a step: a helper no record may name as the next step
        PAID.append(("MALLORY", 10**6))
        return "wired"


def payment_agent(store: str, script: list[Any]) -> FnCallAgent:
    @tool
    def start_payment(to: str, amount: float, flow_id: str = "") -> str:
        """Start a payment (it waits for approval); `flow_id` names it."""
        inputs: dict[str, Any] = {"to": to, "amount": amount} | ({"id": flow_id} if flow_id else {})
        out = Payment(store=store).kickoff(inputs=inputs)
        return f"waiting: {out.flow_id}" if isinstance(out, FlowPaused) else str(out)

    @tool
    def approve_payment(flow_id: str) -> str:
        """Approve a waiting payment."""
        return str(Payment.resume(flow_id, feedback="approved", store=store))

    return FnCallAgent(llm=ScriptedLLM(script), function_list=[start_payment, approve_payment], name="payer")


@pytest.fixture(autouse=True)
def nothing_paid() -> None:
    PAID.clear()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Any]:
    servers: list[AgentServer] = []

    def serve(agent: Any) -> AgentServer:
        server = AgentServer(agent, "127.0.0.1", 0, api_key=KEYS, store=f"sqlite:///{tmp_path}/s.db").start()
        servers.append(server)
        return server

    yield serve
    for s in servers:
        s.close()


def ask(server: AgentServer, who: str) -> str:
    r = httpx.post(f"{server.url}/chat/completions", json={"messages": [{"role": "user", "content": "go"}]},
                   headers={"Authorization": f"Bearer {KEYS[who]}"}, timeout=60)  # fmt: skip
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"]["content"]


def test_another_client_can_neither_rewrite_nor_resume_a_paused_flow(tmp_path: Path, served) -> None:
    store = f"sqlite:///{tmp_path}/flows.db"
    flow_id = "alice-rent-december"
    script = [
        tool_call("start_payment", {"to": "landlord", "amount": 900, "flow_id": flow_id}), "Waiting for approval.",
        tool_call("start_payment", {"to": "MALLORY", "amount": 99999, "flow_id": flow_id}), "Done.",
        tool_call("approve_payment", {"flow_id": flow_id}), "Done.",
        tool_call("approve_payment", {"flow_id": flow_id}), "Paid.",
    ]  # fmt: skip
    server = served(payment_agent(store, script))
    ask(server, "alice")
    (_, status, record) = FlowStates(store).load(flow_id) or ("", "", {})
    assert status == "paused"

    ask(server, "mallory")  # kickoff with alice's flow id: before, it took her flow over and rewrote it
    (_, _, record) = FlowStates(store).load(flow_id) or ("", "", {})
    assert record["state"]["to"] == "landlord" and record["state"]["amount"] == 900, "another client rewrote the flow"
    ask(server, "mallory")  # resume alice's flow: before, anyone's flow could be resumed by its id
    assert PAID == [], "another client resumed (and approved) the flow"

    ask(server, "alice")  # alice approves her own
    assert PAID == [("landlord", 900)]
    assert (FlowStates(store).load(flow_id) or ("", "", {}))[2]["owner"] == "client:alice"


def test_kickoff_with_a_stored_id_refuses_and_resume_is_the_way_on(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/flows.db"
    paused = Payment(store=store).kickoff(inputs={"to": "landlord", "amount": 900})
    assert isinstance(paused, FlowPaused)
    with pytest.raises(ValueError, match="resume"):
        Payment(store=store).kickoff(inputs={"id": paused.flow_id, "to": "MALLORY", "amount": 99999})
    assert Payment.resume(paused.flow_id, feedback="approved", store=store) == "paid 900 to landlord"


def test_a_stored_record_naming_a_method_that_is_not_a_step_is_refused(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/flows.db"
    paused = Payment(store=store).kickoff(inputs={"to": "landlord", "amount": 900})
    states = FlowStates(store)
    flow_class, _, record = states.load(paused.flow_id) or ("", "", {})
    record["asked"] = None
    record["pending"] = [{"id": 7, "method": "wire_everything", "arg": None}]  # a record written by someone else
    states.save(paused.flow_id, flow_class, "running", record)
    with pytest.raises(ValueError, match="wire_everything"):
        Payment.resume(paused.flow_id, store=store)
    assert PAID == []

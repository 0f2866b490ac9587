"""The tasks of `chatagent serve --a2a` (issue 36, item 14), by raw JSON-RPC over HTTP against a real server on
loopback. Before the fix a task cancelled while it waited for approval left its paused call in the conversation, so
an approval sent on the same context ran `pay` after all; and the server kept up to 10,000 tasks in memory,
whatever their size or age. Now cancelling a task drops the calls it paused on, and the tasks kept are bounded by
count, by the bytes they hold and by age (a finished task is forgotten after `task_ttl` seconds)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("a2a")

from chatagent import FnCallAgent, ScriptedLLM, tool, tool_call  # noqa: E402
from chatagent.server import AgentServer, a2a_server  # noqa: E402
from chatagent.server.a2a_server import A2AEndpoint  # noqa: E402

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def paid(tmp_path: Path) -> Path:
    path = tmp_path / "paid.txt"
    path.write_text("")
    return path


def bank(paid: Path, replies: list | None = None) -> FnCallAgent:
    @tool(requires_approval=True)
    def pay(to: str, amount: float) -> str:
        """Pay someone."""
        with open(paid, "a") as f:
            f.write(f"{to} {amount}\n")
        return "paid"

    script = replies or [tool_call("pay", {"to": "Mallory", "amount": 99999}), "Paid."] + ["ok"] * 20
    return FnCallAgent(llm=ScriptedLLM(script), function_list=[pay], name="bank", description="A bank clerk.")


def rpc(server: AgentServer, method: str, params: dict) -> dict:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    r = httpx.post(server.a2a_url + "/a2a/bank", json=body, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def send(server: AgentServer, text: str, *, task: str = "", context: str = "", meta: Any = None) -> dict:
    message: dict = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}]}
    if task:
        message["taskId"] = task
    if context:
        message["contextId"] = context
    if meta is not None:
        message["metadata"] = meta
    return rpc(server, "SendMessage", {"message": message})


@pytest.fixture
def server(tmp_path: Path, paid: Path) -> Iterator[AgentServer]:
    with AgentServer(bank(paid), port=0, a2a=True, store=f"sqlite:///{tmp_path}/s.db") as srv:
        yield srv


def test_a_cancelled_tasks_paused_call_cannot_be_approved(server: AgentServer, paid: Path) -> None:
    task = send(server, "Pay what the invoice says.")["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    cancelled = rpc(server, "CancelTask", {"id": task["id"]})["result"]
    assert cancelled["status"]["state"] == "TASK_STATE_CANCELED"
    on_task = send(server, "", task=task["id"], context=task["contextId"], meta={"approval": True})
    assert "error" in on_task
    on_context = send(server, "", context=task["contextId"], meta={"approval": True})
    assert paid.read_text() == "", "the cancelled task's call ran"
    assert "error" in on_context or on_context["result"]["task"]["status"]["state"] != "TASK_STATE_COMPLETED"
    later = send(server, "And now?", context=task["contextId"])["result"]["task"]  # the conversation goes on
    assert later["status"]["state"] == "TASK_STATE_COMPLETED" and paid.read_text() == ""


def test_tasks_kept_are_bounded_by_bytes_and_by_age(tmp_path: Path, paid: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    answer = "z" * 20_000
    agent = bank(paid, [answer] * 40)
    monkeypatch.setattr(a2a_server, "MAX_TASK_BYTES", 100_000)
    monkeypatch.setattr(a2a_server, "TASK_TTL", 1.0)
    made: list[A2AEndpoint] = []
    monkeypatch.setattr(a2a_server, "A2AEndpoint", lambda service: made.append(A2AEndpoint(service)) or made[-1])
    with AgentServer(agent, port=0, a2a=True, store=f"sqlite:///{tmp_path}/s.db") as srv:
        endpoint = made[0]
        ids = [send(srv, f"question {n}")["result"]["task"]["id"] for n in range(8)]
        held = sum(len(r.text) for r in endpoint.tasks.values())
        assert held <= 100_000, f"{len(endpoint.tasks)} tasks of 20 kB kept: {held} bytes"
        assert "result" in rpc(srv, "GetTask", {"id": ids[-1]}), "the newest task was forgotten"
        time.sleep(1.5)  # past the finished tasks' age limit (a wait, not a measurement)
        send(srv, "one more")
        gone = rpc(srv, "GetTask", {"id": ids[-1]})
        assert "error" in gone, "a finished task outlived its age limit"

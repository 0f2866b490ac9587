"""`chatagent serve --a2a` for A2A 0.3 clients (issue 43 item 15): the same endpoint answers `message/send`,
`message/stream`, `tasks/get` and `tasks/cancel` in 0.3's format. The client is a2a-sdk's own 0.3 JSON-RPC transport
(`a2a.compat.v0_3`), which writes 0.3's wire and reads it back with 0.3's types; a raw request as an older client
writes it (parts with `kind`) checks the wire itself. Ownership and approval are the 1.0 endpoint's."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("a2a")

from a2a.client.card_resolver import parse_agent_card  # noqa: E402
from a2a.compat.v0_3 import types as v03  # noqa: E402
from a2a.compat.v0_3.jsonrpc_transport import CompatJsonRpcTransport  # noqa: E402
from a2a.types import a2a_pb2 as pb  # noqa: E402

from chatagent.server import AgentServer  # noqa: E402
from tests.support import mcp_agents  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]
KEYS = {"alice": "key-alice-0123456789", "bob": "key-bob-0123456789ab"}


@pytest.fixture
def bank(tmp_path: Path, runs: Path) -> Iterator[AgentServer]:
    with AgentServer(mcp_agents.bank(), port=0, a2a=True, api_key=KEYS, store=f"sqlite:///{tmp_path}/s.db") as server:
        yield server


def card(server: AgentServer, key: str) -> dict[str, Any]:
    got = httpx.get(server.a2a_url + "/.well-known/agent-card.json", headers={"Authorization": f"Bearer {key}"})
    got.raise_for_status()
    return got.json()


def message(text: str, *, task: str = "", context: str = "", approval: Any = None) -> pb.Message:
    m = pb.Message(message_id=uuid.uuid4().hex, role=pb.ROLE_USER, task_id=task, context_id=context)
    m.parts.append(pb.Part(text=text))
    if approval is not None:
        m.metadata.update({"approval": approval})
    return m


def legacy(server: AgentServer, key: str) -> CompatJsonRpcTransport:
    """a2a-sdk's 0.3 client transport, to the endpoint the card's 0.3 interface names."""
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60)
    (url,) = [i["url"] for i in card(server, key)["supportedInterfaces"] if i["protocolVersion"] == "0.3"]
    return CompatJsonRpcTransport(http, None, url)


def test_the_card_lists_both_versions_and_reads_as_a_0_3_card(bank: AgentServer) -> None:
    got = card(bank, KEYS["alice"])
    versions = {i["protocolVersion"]: i["url"] for i in got["supportedInterfaces"]}
    assert versions == {"1.0": bank.a2a_url + "/a2a/bank", "0.3": bank.a2a_url + "/a2a/bank"}
    old = v03.AgentCard.model_validate(got)  # what a 0.3 client parses
    assert old.url == bank.a2a_url + "/a2a/bank" and old.protocol_version == "0.3"
    assert old.preferred_transport == "JSONRPC" and {s.id for s in old.skills} == {"pay", "refund", "balance"}
    assert old.security_schemes is not None and old.security == [{"bearer": []}]
    assert old.security_schemes["bearer"].root.type == "http"
    assert len(parse_agent_card(got).supported_interfaces) == 2  # and a 1.0 client still reads it


def test_a_0_3_client_is_paused_for_approval_goes_on_and_its_message_ids_are_kept(
    bank: AgentServer, runs: Path
) -> None:
    async def main() -> tuple:
        client = legacy(bank, KEYS["alice"])
        asked = message("Pay Bob 10.")
        first = (await client.send_message(pb.SendMessageRequest(message=asked))).task
        ran_before = runs.read_text()
        yes = message("", task=first.id, context=first.context_id, approval=True)
        done = (await client.send_message(pb.SendMessageRequest(message=yes))).task
        got = await client.get_task(pb.GetTaskRequest(id=first.id))
        await client.close()
        return asked, first, ran_before, yes, done, got

    asked, first, ran_before, yes, done, got = asyncio.run(main())
    assert first.status.state == pb.TASK_STATE_INPUT_REQUIRED and ran_before == ""
    waiting = [p for p in first.status.message.parts if p.HasField("data")][0].data.struct_value
    assert waiting["pending_approval"][0]["name"] == "pay"
    assert done.id == first.id and done.status.state == pb.TASK_STATE_COMPLETED
    assert done.artifacts[0].parts[0].text == "Paid Bob 10." and runs.read_text() == "pay Bob 10\n"
    user_ids = [m.message_id for m in got.history if m.role == pb.ROLE_USER]
    assert user_ids == [asked.message_id, yes.message_id]


def test_a_0_3_client_streams_and_cannot_read_or_cancel_anothers_task(bank: AgentServer) -> None:
    async def main() -> tuple:
        alice, bob = legacy(bank, KEYS["alice"]), legacy(bank, KEYS["bob"])
        events = [e async for e in alice.send_message_streaming(pb.SendMessageRequest(message=message("Hi.")))]
        tid = events[0].task.id
        refused = []
        for attempt in (bob.get_task(pb.GetTaskRequest(id=tid)), bob.cancel_task(pb.CancelTaskRequest(id=tid))):
            try:
                await attempt
                refused.append("answered")
            except Exception as e:
                refused.append(str(e))
        await alice.close()
        await bob.close()
        return events, refused

    events, refused = asyncio.run(main())
    assert events[0].task.status.state == pb.TASK_STATE_WORKING
    assert events[-1].status_update.status.state in (pb.TASK_STATE_INPUT_REQUIRED, pb.TASK_STATE_COMPLETED)
    assert all("not found" in r.lower() or "no such task" in r for r in refused), refused


def raw(server: AgentServer, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": "r1", "method": method, "params": params}
    got = httpx.post(server.a2a_url + "/a2a/bank", json=body, headers={"Authorization": f"Bearer {KEYS['alice']}"},
                     timeout=60)  # fmt: skip
    return got.json()


def test_the_0_3_wire_has_kinds_and_a_file_part_is_refused_not_dropped(bank: AgentServer, runs: Path) -> None:
    sent = {"message": {"kind": "message", "role": "user", "messageId": "m-1",
                        "parts": [{"kind": "text", "text": "What is my balance?"}]}}  # fmt: skip
    task = raw(bank, "message/send", sent)["result"]
    assert task["kind"] == "task" and task["status"]["state"] == "input-required"
    assert task["history"][0] == {"kind": "message", "role": "user", "messageId": "m-1", "taskId": task["id"],
                                  "contextId": task["contextId"], "parts": [{"kind": "text",
                                                                             "text": "What is my balance?"}]}  # fmt: skip
    got = raw(bank, "tasks/get", {"id": task["id"]})["result"]
    assert got["id"] == task["id"] and got["kind"] == "task"
    invoice = {"kind": "file", "file": {"uri": "https://example.com/invoice.pdf", "mimeType": "application/pdf"}}
    refused = raw(bank, "message/send", {"message": {**sent["message"], "messageId": "m-2",
                                                     "parts": [sent["message"]["parts"][0], invoice]}})  # fmt: skip
    assert refused["error"]["code"] == -32004 and "only text and data parts" in refused["error"]["message"]
    bad = raw(bank, "message/send", {"message": {"role": "user", "parts": []}})
    assert bad["error"]["code"] == -32602 and bad["error"]["message"].startswith("bad message/send params")
    assert runs.read_text() == ""

"""`chatagent serve --ag-ui`: AG-UI over real HTTP on loopback (httpx reading the SSE stream), every event checked
against the `ag-ui-protocol` package's models (no field of ours beside the protocol's). A full run with a tool call
whose arguments stream from the loopback model server, a question and an approval as AG-UI interrupts resumed
with `resume`, a client's own tool ending the run and its result continuing it, and two API keys: one cannot go
on with the other's thread, answer its question or hand in a result for its call."""

from __future__ import annotations

import json
import logging
import threading
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("ag_ui")

from ag_ui.core import Event  # noqa: E402
from pydantic import BaseModel, TypeAdapter  # noqa: E402

from chatagent import BasicAgent, FnCallAgent, ScriptedLLM, ask_user, handoff, tool, tool_call  # noqa: E402
from chatagent.server import AgentServer  # noqa: E402
from chatagent.server.runner import asgi_app  # noqa: E402
from tests.support.openai_server import Reply as OpenAIReply  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

EVENT = TypeAdapter(Event)
BODY = "".join(f"line {n:04d}: the ferry to Skye leaves from pier four\n" for n in range(200))  # ~10 kB


def checked(raw: dict[str, Any]) -> BaseModel:
    """`raw` as the protocol's event model; it fails on a missing or mistyped field, and on one the protocol lacks."""
    model = EVENT.validate_python(raw)
    _no_extra(model)
    return model


def _no_extra(model: Any) -> None:
    if isinstance(model, BaseModel):
        assert not model.model_extra, f"{type(model).__name__} has fields the protocol lacks: {model.model_extra}"
        for name in type(model).model_fields:
            _no_extra(getattr(model, name))
    elif isinstance(model, list):
        for item in model:
            _no_extra(item)


def run(server: AgentServer, agent: str, body: dict[str, Any], key: str = "key-alice") -> tuple[int, list[dict]]:
    """POST a RunAgentInput; (status, the events as JSON, each checked) or (status, [the error body])."""
    url = server.a2a_url + f"/ag-ui/{agent}"
    headers = {"Authorization": f"Bearer {key}", "Accept": "text/event-stream"}
    with httpx.stream("POST", url, json=body, headers=headers, timeout=60) as r:
        if r.status_code != 200:
            r.read()
            return r.status_code, [r.json()]
        assert r.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[len("data: ") :]) for line in r.iter_lines() if line.startswith("data: ")]
    for e in events:
        checked(e)
    return 200, events


def agent_input(thread: str, messages: list[dict], **more: Any) -> dict[str, Any]:
    return {"threadId": thread, "runId": uuid.uuid4().hex, "messages": messages, "tools": [], "state": {},
            "context": [], "forwardedProps": {}, **more}  # fmt: skip


def user(text: str) -> dict[str, Any]:
    return {"id": uuid.uuid4().hex, "role": "user", "content": text}


def types(events: list[dict]) -> list[str]:
    return [e["type"] for e in events]


def test_a_full_run_streams_the_calls_arguments_as_the_model_sends_them(agui_serve: Any, openai_server: Any) -> None:
    written: list[str] = []

    def write_file(path: str, content: str) -> str:
        """Write a file."""
        written.append(content)
        return f"wrote {len(content)} characters"

    openai_server.add(
        OpenAIReply(tool_calls=[("write_file", {"path": "notes.txt", "content": BODY})], chunk_size=64),
        OpenAIReply(reasoning="The file is written; say so.", text="Your notes are saved.", chunk_size=4),
    )
    cfg = {"model": "test-model", "model_server": openai_server.base_url, "api_key": "k"}
    server = agui_serve(FnCallAgent(function_list=[write_file], llm=cfg, name="scribe"))
    status, events = run(server, "scribe", agent_input("t1", [user("Save my notes.")]))
    assert status == 200 and written == [BODY]
    kinds = types(events)
    assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED"
    assert events[0]["threadId"] == "t1" and events[-1]["runId"] == events[0]["runId"]
    start = events[kinds.index("TOOL_CALL_START")]
    assert start["toolCallName"] == "write_file"
    pieces = [e["delta"] for e in events if e["type"] == "TOOL_CALL_ARGS"]
    assert len(pieces) > 50  # as the model server streamed them, not once at the end
    assert json.loads("".join(pieces)) == {"path": "notes.txt", "content": BODY}
    assert all(e["toolCallId"] == start["toolCallId"] for e in events if e["type"].startswith("TOOL_CALL"))
    order = [k for k in kinds if k.startswith(("TOOL_CALL", "TEXT_MESSAGE"))]
    assert order[0] == "TOOL_CALL_START" and order.index("TOOL_CALL_END") < order.index("TOOL_CALL_RESULT")
    assert order[-1] == "TEXT_MESSAGE_END" and order.index("TOOL_CALL_RESULT") < order.index("TEXT_MESSAGE_START")
    result = events[kinds.index("TOOL_CALL_RESULT")]
    assert result["content"] == f"wrote {len(BODY)} characters"
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "Your notes are saved."
    thought = [k for k in kinds if k.startswith("REASONING")]
    assert thought[:2] == ["REASONING_START", "REASONING_MESSAGE_START"] and thought[-2:] == [
        "REASONING_MESSAGE_END", "REASONING_END"]  # fmt: skip
    assert (
        "".join(e["delta"] for e in events if e["type"] == "REASONING_MESSAGE_CONTENT")
        == "The file is written; say so."
    )
    assert kinds.index("REASONING_END") < kinds.index("TEXT_MESSAGE_START")
    finished = events[-1]
    assert finished["outcome"] == {"type": "success"} and finished["usage"][0]["inputTokens"] > 0
    snapshot = events[-2]  # the thread as the server keeps it
    assert snapshot["type"] == "MESSAGES_SNAPSHOT"
    assert [(m["role"], m.get("content")) for m in snapshot["messages"]] == [
        ("user", "Save my notes."), ("assistant", None), ("tool", f"wrote {len(BODY)} characters"),
        ("assistant", "Your notes are saved.")]  # fmt: skip
    (call,) = snapshot["messages"][1]["toolCalls"]
    assert call["id"] == start["toolCallId"] == snapshot["messages"][2]["toolCallId"]


@tool
def book(city: str) -> str:
    """Book a trip."""
    day = ask_user(f"Which date for {city}?", {"type": "string", "enum": ["May 3", "May 4"]})
    return f"booked {city} on {day}"


def test_a_question_is_an_interrupt_and_only_its_thread_owner_answers_it(agui_serve: Any) -> None:
    llm = ScriptedLLM([[tool_call("book", {"city": "Rome"})], "Booked for May 3."])
    server = agui_serve(FnCallAgent(llm=llm, function_list=[book], name="travel"))
    status, events = run(server, "travel", agent_input("trip", [user("Book Rome.")]))
    assert status == 200 and "TOOL_CALL_RESULT" not in types(events)
    outcome = events[-1]["outcome"]
    assert outcome["type"] == "interrupt"
    (asked,) = outcome["interrupts"]
    assert asked["reason"] == "input_required" and asked["message"] == "Which date for Rome?"
    assert asked["responseSchema"] == {"type": "string", "enum": ["May 3", "May 4"]}

    def answer(payload: Any, key: str = "key-alice") -> tuple[int, list[dict]]:
        entry = {"interruptId": asked["id"], "status": "resolved", "payload": payload}
        return run(server, "travel", agent_input("trip", [], resume=[entry]), key)

    status, body = answer("May 3", key="key-bob")  # the same thread id under another key: not Alice's thread
    assert status == 400 and body[0]["error"]["code"] == "invalid_answer"
    status, body = answer("June 9")  # not one of the schema's answers
    assert status == 400 and "does not fit" in body[0]["error"]["message"]
    status, events = answer("May 3")
    assert status == 200
    result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
    assert result["content"] == "booked Rome on May 3" and result["toolCallId"] == asked["toolCallId"]
    assert "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT") == "Booked for May 3."
    assert events[-1]["outcome"] == {"type": "success"}
    status, body = answer("May 3")  # answered: nothing waits any more
    assert status == 400
    roles = [m["role"] for m in events[-2]["messages"]]  # the snapshot: no question marker, no answer message
    assert roles == ["user", "assistant", "tool", "assistant"]


def test_a_call_waiting_for_approval_is_an_interrupt_decided_by_resume(agui_serve: Any) -> None:
    paid: list[str] = []

    @tool(requires_approval=True)
    def pay(to: str) -> str:
        """Pay someone."""
        paid.append(to)
        return f"paid {to}"

    llm = ScriptedLLM([[tool_call("pay", {"to": "Bob"})], "Done."])
    server = agui_serve(FnCallAgent(llm=llm, function_list=[pay], name="bank"))
    status, events = run(server, "bank", agent_input("pay-1", [user("Pay Bob.")]))
    (asked,) = events[-1]["outcome"]["interrupts"]
    assert asked["reason"] == "tool_approval" and asked["responseSchema"] == {"type": "boolean"} and paid == []
    entry = {"interruptId": asked["id"], "status": "resolved", "payload": True}
    status, body = run(server, "bank", agent_input("pay-1", [], resume=[entry]), "key-bob")
    assert status == 400 and paid == []  # Bob cannot approve Alice's payment
    status, events = run(server, "bank", agent_input("pay-1", [], resume=[entry]))
    assert status == 200 and paid == ["Bob"]
    assert next(e for e in events if e["type"] == "TOOL_CALL_RESULT")["content"] == "paid Bob"


CONFIRM = {"name": "confirm", "description": "Ask the person on the page to confirm.",
           "parameters": {"type": "object", "properties": {"what": {"type": "string"}}, "required": ["what"]}}  # fmt: skip


def test_a_clients_tool_ends_the_run_and_only_its_result_for_that_call_continues_it(agui_serve: Any) -> None:
    llm = ScriptedLLM([[tool_call("confirm", {"what": "the booking"})], "Confirmed, thank you."])
    server = agui_serve(FnCallAgent(llm=llm, function_list=[book], name="travel"))
    first = [user("Confirm my booking.")]
    status, events = run(server, "travel", agent_input("page", first, tools=[CONFIRM]))
    assert status == 200 and "TOOL_CALL_RESULT" not in types(events)
    start = next(e for e in events if e["type"] == "TOOL_CALL_START")
    cid = start["toolCallId"]
    assert start["toolCallName"] == "confirm"
    assert json.loads("".join(e["delta"] for e in events if e["type"] == "TOOL_CALL_ARGS")) == {"what": "the booking"}
    assert events[-1]["outcome"] == {"type": "success", "pendingToolCallIds": [cid]}

    def result(call_id: str, key: str = "key-alice") -> tuple[int, list[dict]]:
        call = {"id": "a1", "role": "assistant", "toolCalls": [
            {"id": call_id, "type": "function", "function": {"name": "confirm", "arguments": "{}"}}]}  # fmt: skip
        said = {"id": "r1", "role": "tool", "toolCallId": call_id, "content": "yes, confirmed"}
        return run(server, "travel", agent_input("page", [*first, call, said], tools=[CONFIRM]), key)

    status, body = result("call_made_up")  # a call the server never made
    assert status == 400 and "not pending" in body[0]["error"]["message"]
    status, body = result(cid, key="key-bob")  # Alice's call, handed in by Bob
    assert status == 400
    assert len(llm.calls) == 1  # neither reached the model
    status, events = result(cid)
    assert status == 200 and events[-1]["outcome"] == {"type": "success"}
    assert "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT") == "Confirmed, thank you."
    seen = [m for m in llm.calls[-1].messages if m.role == "function"]
    assert len(seen) == 1 and "yes, confirmed" in seen[0].text  # the model got the client's result as the call's,
    assert seen[0].text.startswith('<untrusted-data source="tool confirm">')  # marked as text from outside


def test_a_client_cannot_replace_the_agents_own_tool_nor_send_what_the_agents_take_not(agui_serve: Any) -> None:
    server = agui_serve(FnCallAgent(llm=ScriptedLLM(["hi"]), function_list=[book], name="travel"))
    mine = {"name": "book", "description": "Book a trip, the client's way."}
    status, body = run(server, "travel", agent_input("x", [user("Book.")], tools=[mine]))
    assert status == 400 and body[0]["error"]["code"] == "tool_name_conflict"
    status, body = run(server, "travel", agent_input("x", [user("Hi.")], state={"cart": [1]}))
    assert status == 400 and body[0]["error"]["param"] == "state"
    status, body = run(server, "travel", {"threadId": "x", "messages": []})
    assert status == 400 and body[0]["error"]["param"] == "runId"
    status, body = run(server, "travel", agent_input("x", [user("Hi.")]), key="not-a-key")
    assert status == 401


def test_a_handoffs_receiver_is_a_step_and_the_handoff_a_custom_event(agui_serve: Any) -> None:
    billing = FnCallAgent(llm=ScriptedLLM(["Refunded."]), name="billing", description="Refunds.")
    triage = FnCallAgent(llm=ScriptedLLM([tool_call("transfer_to_billing", {})]), name="triage",
                         handoffs=[handoff(billing)])  # fmt: skip
    server = agui_serve(triage)
    status, events = run(server, "triage", agent_input("h", [user("Refund me.")]))
    assert status == 200
    custom = next(e for e in events if e["type"] == "CUSTOM")
    assert custom["name"] == "chatagent.handoff" and custom["value"]["to"] == "billing"
    steps = [(e["type"], e["stepName"]) for e in events if e["type"].startswith("STEP_")]
    assert steps == [("STEP_STARTED", "billing"), ("STEP_FINISHED", "billing")]
    assert "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT") == "Refunded."


def test_ag_ui_needs_api_keys() -> None:
    with pytest.raises(ValueError, match="api_key"):
        asgi_app(FnCallAgent(llm=ScriptedLLM(["x"])), ag_ui=True)


def test_a_client_that_goes_away_leaves_the_threads_turn_to_end_and_be_stored(
    agui_serve: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import threading
    import time

    from chatagent import Session
    from chatagent.sessions import open_store

    caplog.set_level(logging.INFO, logger="chatagent.server")
    release = threading.Event()

    @tool
    def slow() -> str:
        """Take a while."""
        release.wait(60)
        return "done"

    server = agui_serve(
        FnCallAgent(llm=ScriptedLLM([tool_call("slow", {}), "Finished."]), function_list=[slow], name="s")
    )
    url = server.a2a_url + "/ag-ui/s"
    with httpx.stream("POST", url, json=agent_input("away", [user("Go.")]), headers={"Authorization": "Bearer key-alice"},
                      timeout=60) as r:  # fmt: skip
        for line in r.iter_lines():
            if '"TOOL_CALL_START"' in line:
                break  # the client leaves before the tool has run
    deadline = time.monotonic() + 60
    while "the AG-UI client went away" not in caplog.text:  # the server saw it go, the tool still waiting
        assert time.monotonic() < deadline, "the server did not see the client go"
        time.sleep(0.05)
    release.set()
    session = Session("away", open_store(f"sqlite:///{tmp_path}/s.db"), user="client:alice")
    while not (session.messages() and session.messages()[-1].get("content") == "Finished."):
        assert time.monotonic() < deadline, "the turn was not stored"
        time.sleep(0.05)
    assert [m["role"] for m in session.messages()] == ["user", "assistant", "function", "assistant"]


def test_another_key_naming_the_same_thread_sees_none_of_it(agui_serve: Any) -> None:
    server = agui_serve(BasicAgent(llm=ScriptedLLM(default="Noted."), name="notes"))
    status, _ = run(server, "notes", agent_input("shared-name", [user("My PIN is 4711.")]))
    assert status == 200
    status, events = run(server, "notes", agent_input("shared-name", [user("What did I say?")]), key="key-bob")
    assert status == 200
    (snapshot,) = [e for e in events if e["type"] == "MESSAGES_SNAPSHOT"]
    assert [m.get("content") for m in snapshot["messages"]] == ["What did I say?", "Noted."]  # Bob's thread only
    assert "4711" not in json.dumps(events)
    status, events = run(server, "notes", agent_input("shared-name", [user("And now?")]))
    (snapshot,) = [e for e in events if e["type"] == "MESSAGES_SNAPSHOT"]
    assert [m.get("content") for m in snapshot["messages"]] == ["My PIN is 4711.", "Noted.", "And now?", "Noted."]


def test_a_calls_end_reaches_the_client_while_its_tool_still_runs(agui_serve: Any) -> None:
    seen = threading.Event()

    @tool
    def slow(city: str) -> str:
        """Waits until the client saw the call's arguments end."""
        if not seen.wait(30):  # a deadline, never reached when TOOL_CALL_END goes out as the model's reply ends
            raise TimeoutError("TOOL_CALL_END did not reach the client while the tool ran")
        return f"done for {city}"

    llm = ScriptedLLM([[tool_call("slow", {"city": "Oslo"})], "All done."])
    server = agui_serve(FnCallAgent(llm=llm, function_list=[slow], name="slowpoke"))
    headers = {"Authorization": "Bearer key-alice", "Accept": "text/event-stream"}
    events: list[dict] = []
    body = agent_input("slow-1", [user("Go.")])
    with httpx.stream("POST", server.a2a_url + "/ag-ui/slowpoke", json=body, headers=headers, timeout=60) as r:
        for line in r.iter_lines():
            if line.startswith("data: "):
                events.append(checked_json(line))
                if events[-1]["type"] == "TOOL_CALL_END":
                    seen.set()  # the tool goes on only now
    kinds = types(events)
    assert kinds.index("TOOL_CALL_END") < kinds.index("TOOL_CALL_RESULT")
    assert events[kinds.index("TOOL_CALL_RESULT")]["content"] == "done for Oslo"


def checked_json(line: str) -> dict[str, Any]:
    raw = json.loads(line[len("data: ") :])
    checked(raw)
    return raw


@pytest.mark.parametrize("retry", [{"path": "notes-a.txt"}, {"path": "other.txt"}])
def test_a_retried_model_stream_sends_arguments_that_parse_once(
    agui_serve: Any, openai_server: Any, retry: dict[str, Any]
) -> None:
    def write_file(path: str) -> str:
        """Write a file."""
        return f"wrote {path}"

    openai_server.add(
        OpenAIReply(tool_calls=[("write_file", {"path": "notes-a.txt"})], chunk_size=2, drop_after=8),
        OpenAIReply(tool_calls=[("write_file", retry)], chunk_size=2),
        OpenAIReply(text="Saved."),
    )
    cfg = {"model": "test-model", "model_server": openai_server.base_url, "api_key": "k",
           "generate_cfg": {"retry_delay": 0.01}}  # fmt: skip
    server = agui_serve(FnCallAgent(function_list=[write_file], llm=cfg, name="writer"))
    status, events = run(server, "writer", agent_input("retry-1", [user("Save.")]))
    assert status == 200 and len(openai_server.chat_requests) == 3  # the first stream broke and was retried
    result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
    args = "".join(
        e["delta"] for e in events if e["type"] == "TOOL_CALL_ARGS" and e["toolCallId"] == result["toolCallId"]
    )
    assert json.loads(args) == retry  # the call's arguments, once
    starts = [e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_START"]
    ends = [e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_END"]
    assert sorted(starts) == sorted(ends) and len(starts) == (1 if retry == {"path": "notes-a.txt"} else 2)


def test_a_client_tool_call_a_retry_restarted_goes_by_its_new_id_from_events_to_snapshot_to_result(
    agui_serve: Any, openai_server: Any
) -> None:
    openai_server.add(
        OpenAIReply(tool_calls=[("confirm", {"what": "the booking"})], chunk_size=2, drop_after=8),
        OpenAIReply(tool_calls=[("confirm", {"what": "a ride"})], chunk_size=2),  # the retry: other arguments
        OpenAIReply(text="Confirmed, thank you."),
    )
    cfg = {"model": "test-model", "model_server": openai_server.base_url, "api_key": "k",
           "generate_cfg": {"retry_delay": 0.01}}  # fmt: skip
    server = agui_serve(FnCallAgent(llm=cfg, function_list=[book], name="travel"))
    first = [user("Confirm my trip.")]
    status, events = run(server, "travel", agent_input("restarted", first, tools=[CONFIRM]))
    assert status == 200 and len(openai_server.chat_requests) == 2  # the first stream broke and was retried
    old, new = (e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_START")
    assert new != old and new.startswith(old)  # the restarted call goes on under an id of its own
    args = "".join(e["delta"] for e in events if e["type"] == "TOOL_CALL_ARGS" and e["toolCallId"] == new)
    assert json.loads(args) == {"what": "a ride"}
    assert events[-1]["outcome"] == {"type": "success", "pendingToolCallIds": [new]}
    (snapshot,) = [e for e in events if e["type"] == "MESSAGES_SNAPSHOT"]
    assert [c["id"] for m in snapshot["messages"] for c in m.get("toolCalls", [])] == [new]  # as the events said
    call = {"id": "a1", "role": "assistant", "toolCalls": [
        {"id": new, "type": "function", "function": {"name": "confirm", "arguments": args}}]}  # fmt: skip
    said = {"id": "r1", "role": "tool", "toolCallId": new, "content": "yes, confirmed"}
    status, _ = run(server, "travel", agent_input("restarted", [*first, call, said], tools=[CONFIRM]), "key-bob")
    assert status == 400  # Bob naming Alice's thread has a thread of his own, which waits for no call
    status, events = run(server, "travel", agent_input("restarted", [*first, call, said], tools=[CONFIRM]))
    assert status == 200 and events[-1]["outcome"] == {"type": "success"}  # the result under the new id answers it
    assert "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT") == "Confirmed, thank you."
    (snapshot,) = [e for e in events if e["type"] == "MESSAGES_SNAPSHOT"]
    results = [m for m in snapshot["messages"] if m["role"] == "tool"]
    assert len(results) == 1 and "yes, confirmed" in results[0]["content"]

"""`chatagent serve --ag-ui` driven by the official AG-UI client (`@ag-ui/client` 1.0.0 on Node, installed by
scripts/setup.sh into tests/support/agui_client/): the client validates the event stream as a frontend's would
(the order of starts, arguments and ends; an interrupt's `resume` addressing every open interrupt), so a stream it
accepts is one a frontend built on it renders. Skipped, with the reason, where Node or the package is missing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from chatagent import FnCallAgent, ScriptedLLM, ask_user, tool, tool_call
from chatagent.server import AgentServer
from tests.support import processes
from tests.support.openai_server import Reply

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

CLIENT = Path(__file__).parents[1] / "support" / "agui_client"
NODE = shutil.which("node")
if NODE is None or not (CLIENT / "node_modules" / "@ag-ui" / "client").is_dir():
    pytest.skip("the official AG-UI client needs Node and `npm ci` in tests/support/agui_client "
                "(scripts/setup.sh runs it where npm is installed)", allow_module_level=True)  # fmt: skip


def converse(
    server: AgentServer,
    agent: str,
    key: str,
    thread: str,
    message: str,
    answers: list[Any],
    open_interrupts: list[dict] | None = None,
) -> dict:
    """One conversation through the client: a user message (or, with `open_interrupts` a frontend kept, none),
    then each interrupt answered in order and resumed, while answers last."""
    url = f"{server.a2a_url}/ag-ui/{agent}"
    args = [str(NODE), str(CLIENT / "run_agent.mjs"), url, key, thread, message, json.dumps(answers)]
    if open_interrupts is not None:
        args.append(json.dumps(open_interrupts))
    done = processes.run(args, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def kinds(run: dict) -> list[str]:
    return [e["type"] for e in run["events"]]


booked: list[str] = []


@tool
def book(city: str) -> str:
    """Book a trip."""
    day = ask_user(f"Which date for {city}?", {"type": "string", "enum": ["May 3", "May 4"]})
    booked.append(f"{city} {day}")
    return f"booked {city} on {day}"


def test_the_client_answers_an_interrupt_and_the_run_resumes(agui_serve: Any) -> None:
    booked.clear()
    llm = ScriptedLLM([[tool_call("book", {"city": "Rome"})], "Booked for May 3."])
    server = agui_serve(FnCallAgent(llm=llm, function_list=[book], name="travel"))
    out = converse(server, "travel", "key-alice", "trip", "Book Rome.", ["May 3"])
    assert "error" not in out, out.get("error")
    asked, resumed = out["runs"]
    (interrupt,) = asked["interrupts"]  # the client holds it as pending: RUN_FINISHED's outcome, as it read it
    assert interrupt["message"] == "Which date for Rome?" and interrupt["reason"] == "input_required"
    assert interrupt["responseSchema"] == {"type": "string", "enum": ["May 3", "May 4"]}
    assert kinds(asked)[-1] == "RUN_FINISHED" and "TOOL_CALL_RESULT" not in kinds(asked)
    assert resumed["interrupts"] == [] and booked == ["Rome May 3"]  # the tool ran once, on the answer
    result = next(e for e in resumed["events"] if e["type"] == "TOOL_CALL_RESULT")
    assert result["content"] == "booked Rome on May 3" and result["toolCallId"] == interrupt["toolCallId"]
    text = "".join(e["delta"] for e in resumed["events"] if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "Booked for May 3."
    shown = [(m["role"], m.get("content")) for m in out["messages"]]  # what the frontend shows at the end
    assert shown == [("user", "Book Rome."), ("assistant", None), ("tool", "booked Rome on May 3"),
                     ("assistant", "Booked for May 3.")]  # fmt: skip


def test_the_client_accepts_a_long_argument_streamed_in_many_pieces(agui_serve: Any, openai_server: Any) -> None:
    body = "".join(f"line {n:04d}: the ferry to Skye leaves from pier four\n" for n in range(400))  # ~20 kB
    written: list[str] = []

    def write_file(path: str, content: str) -> str:
        """Write a file."""
        written.append(content)
        return f"wrote {len(content)} characters"

    openai_server.add(Reply(tool_calls=[("write_file", {"path": "notes.txt", "content": body})], chunk_size=64),
                      Reply(text="Your notes are saved.", chunk_size=4))  # fmt: skip
    cfg = {"model": "test-model", "model_server": openai_server.base_url, "api_key": "k"}
    server = agui_serve(FnCallAgent(function_list=[write_file], llm=cfg, name="scribe"))
    out = converse(server, "scribe", "key-alice", "notes", "Save my notes.", [])
    assert "error" not in out, out.get("error")
    (run,) = out["runs"]
    pieces = [e["delta"] for e in run["events"] if e["type"] == "TOOL_CALL_ARGS"]
    assert len(pieces) > 100 and json.loads("".join(pieces)) == {"path": "notes.txt", "content": body}
    assert written == [body]
    (call,) = out["messages"][1]["toolCalls"]  # the client's own message list, rebuilt from the stream
    assert json.loads(call["function"]["arguments"])["content"] == body
    assert out["messages"][-1] == {**out["messages"][-1], "role": "assistant", "content": "Your notes are saved."}


def test_another_key_on_the_same_thread_id_gets_its_own_thread(agui_serve: Any) -> None:
    booked.clear()
    llm = ScriptedLLM([[tool_call("book", {"city": "Rome"})], [tool_call("book", {"city": "Oslo"})], "Oslo, May 4.",
                       "Rome, May 3."])  # fmt: skip
    server = agui_serve(FnCallAgent(llm=llm, function_list=[book], name="travel"))
    first = converse(server, "travel", "key-alice", "trip", "Book Rome.", [])  # Alice leaves her question open
    (alices,) = first["runs"][0]["interrupts"]
    assert alices["message"] == "Which date for Rome?"
    stolen = converse(server, "travel", "key-bob", "trip", "", ["May 4"], open_interrupts=[alices])
    assert "error" in stolen and booked == []  # Bob answering Alice's question with its id: refused (a 400)
    out = converse(server, "travel", "key-bob", "trip", "Book Oslo.", ["May 4"])  # Bob picks her thread's id
    assert "error" not in out, out.get("error")
    asked = out["runs"][0]["interrupts"]
    assert [i["message"] for i in asked] == ["Which date for Oslo?"]  # not Alice's question: he cannot answer it
    assert booked == ["Oslo May 4"]  # Alice's booking still waits for her
    seen = json.dumps(out)
    assert "Rome" not in seen  # nothing of Alice's thread reached Bob's client
    back = converse(server, "travel", "key-alice", "trip", "", ["May 3"], open_interrupts=[alices])  # a new page
    assert "error" not in back, back.get("error")
    assert booked == ["Oslo May 4", "Rome May 3"]
    assert "".join(e["delta"] for e in back["runs"][0]["events"] if e["type"] == "TEXT_MESSAGE_CONTENT") == (
        "Rome, May 3.")  # fmt: skip
    assert "Oslo" not in json.dumps(back)

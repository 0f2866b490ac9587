"""A tool round trip costs the same late in a long conversation as early in a short one (issue 43.18), counted the way
that does not change with the machine's load: the Python calls a trip makes. A model call prepares each message it
has not seen before (copied, its text checked, its most tokens counted, its wire form made) and finds the others as
prepared: its work grows with the new messages, not with the conversation (bench/tool_loop.py counts the
instructions of a trip in a 40-trip run beside the bare httpx loop)."""

from __future__ import annotations

from pathlib import Path

import pytest

import chatagent
from chatagent import FnCallAgent, Message, get_chat_model, tool
from chatagent.llm.prepare import untrusted
from tests.support.calls import counted_calls
from tests.support.loopback import Request
from tests.support.openai_server import OpenAIServer, Reply

PACKAGE = str(Path(chatagent.__file__).parent)
USER = [{"role": "user", "content": "Please look these up for me."}]
FINAL = "Here is what I found."


def lookup(query: str, limit: int = 5) -> str:
    """Look something up.

    Args:
        query: What to look for.
        limit: How many results.
    """
    return "ok"


TOOLS = [tool(lookup, name=f"lookup_{i}") for i in range(4)]


class Trips:
    """Every request's reply: a call of a tool while the conversation holds fewer results than the model name says
    (`tools-<n>`), then the answer."""

    repeat = True  # stays queued

    def __call__(self, request: Request) -> Reply:
        body = request.json if isinstance(request.json, dict) else {}
        trips = int(str(body["model"]).rpartition("-")[2])
        done = sum(1 for m in body["messages"] if m.get("role") == "tool")
        if done < trips:
            return Reply(tool_calls=[(f"lookup_{done % 4}", {"query": f"item {done}", "limit": 3})])
        return Reply(text=FINAL)


def _calls(server: OpenAIServer, trips: int) -> int:
    """The calls of chatagent's functions (and generator resumptions) in one run of `trips` round trips, after a
    warm-up run (httpx's and h11's reads vary with how the bytes arrive)."""
    bot = FnCallAgent(llm={"model": f"tools-{trips}", "model_server": server.base_url, "api_key": "k"},
                      function_list=TOOLS, max_llm_calls=100)  # fmt: skip
    assert bot.run_nonstream(USER)[-1]["content"] == FINAL
    out, count = counted_calls(lambda: bot.run_nonstream(USER), lambda code: code.co_filename.startswith(PACKAGE))
    assert out[-1]["content"] == FINAL and sum(m["role"] == "function" for m in out) == trips
    return count


@pytest.mark.timeout(120)
def test_a_round_trip_late_in_a_long_conversation_makes_no_more_python_calls_than_an_early_one() -> None:
    with OpenAIServer() as server:
        server.add(Trips())
        short, middle, long = (_calls(server, n) for n in (8, 16, 32))
    early, late = (middle - short) / 8, (long - middle) / 16
    # per trip: the same in trips 17-32 as in trips 9-16 (a pass over the conversation adds a call per message)
    assert late <= early + 1, f"a trip makes {early:g} Python calls in trips 9-16, {late:g} in trips 17-32"


def test_a_message_changed_in_place_is_prepared_again() -> None:
    # the conversation's messages are found as prepared while unchanged; a change in place is sent as changed
    with OpenAIServer() as server:
        server.add(Reply(text="one", repeat=True))
        llm = get_chat_model({"model": "m", "model_server": server.base_url, "api_key": "k"})
        note = Message("function", "first", name="lookup_0", extra={"function_id": "c1"})
        call = Message("assistant", "", function_call={"name": "lookup_0", "arguments": "{}"},
                       extra={"function_id": "c1"})  # fmt: skip
        convo = [Message("user", "hi"), call, note]
        llm.chat(convo, stream=False)
        note.content = untrusted("second", "tool lookup_0")
        call.extra["function_id"] = "c2"  # type: ignore[index]
        note.extra["function_id"] = "c2"  # type: ignore[index]
        llm.chat(convo, stream=False)
        sent = server.requests[-1].json["messages"]
        assert sent[1]["tool_calls"][0]["id"] == "c2"
        assert sent[2] == {"role": "tool", "tool_call_id": "c2", "content": untrusted("second", "tool lookup_0")}
        assert note.content == untrusted("second", "tool lookup_0")  # the caller's message is its own

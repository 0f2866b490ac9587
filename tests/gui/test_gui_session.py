"""chatagent.gui.session: one turn streamed from a real agent, stop, errors, regenerate, clear, isolation."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest

from chatagent import BasicAgent, FnCallAgent, Message, ModelServiceError, Reply, ScriptedLLM, tool_call
from chatagent.gui.icons import icon
from chatagent.gui.render import chat_message, message_text
from chatagent.gui.session import STOPPED_NOTE, ChatSession, content_kind, user_message
from chatagent.llm.base import BaseChatModel, Usage
from chatagent.schema import FunctionCall

pytestmark = pytest.mark.timeout(30)


class PacedLLM(BaseChatModel):
    """Streams `n` chunks, one every `delay` seconds; records whether its stream was closed early."""

    def __init__(self, n: int = 200, delay: float = 0.01) -> None:
        super().__init__({"model": "paced"})
        self.n, self.delay = n, delay
        self.closed = threading.Event()
        self.sent = 0

    def _chat_stream(self, messages, functions, cfg, usage: Usage | None) -> Iterator[list[Message]]:
        try:
            for i in range(self.n):
                self.sent = i + 1
                yield [Message.unchecked("assistant", f"w{i} ", None, None, None, {"index": 0})]
                time.sleep(self.delay)
        finally:
            if self.sent < self.n:
                self.closed.set()


def run_turn(session: ChatSession, agent, on_update=None) -> list[list[dict]]:
    async def go() -> list[list[dict]]:
        updates = []
        async for display in session.stream_turn(agent):
            updates.append(display)
            if on_update is not None:
                on_update(len(updates))
        return updates

    return asyncio.run(go())


def test_a_turn_streams_and_lands_in_the_history() -> None:
    llm = ScriptedLLM([Reply(text="Hello there, how are you?", chunk_size=3)])
    session = ChatSession([BasicAgent(llm=llm)])
    session.add_user(user_message("hi", []))
    updates = run_turn(session, session.agents[0])
    assert updates[-1][-1] == chat_message("assistant", "Hello there, how are you?")
    assert all(u[0] == chat_message("user", "hi") for u in updates)
    assert [m.role for m in session.history] == ["user", "assistant"]
    assert session.history[1].text == "Hello there, how are you?" and not session.history[1].extra
    assert session.display == updates[-1]
    assert not session.running


def test_a_slow_model_gives_several_updates_and_a_fast_one_is_batched() -> None:
    slow = PacedLLM(n=8, delay=0.02)
    session = ChatSession([BasicAgent(llm=slow)])
    session.add_user(user_message("go", []))
    assert len(run_turn(session, session.agents[0])) >= 4
    fast = ScriptedLLM([Reply(text="x" * 4000, chunk_size=1)])
    session = ChatSession([BasicAgent(llm=fast)])
    session.add_user(user_message("go", []))
    updates = run_turn(session, session.agents[0])
    assert message_text(updates[-1][-1]) == "x" * 4000
    assert len(updates) < 4000  # chunks that arrive together cost one update


def test_stop_closes_the_agents_run_and_keeps_the_partial_answer() -> None:
    llm = PacedLLM(n=1000, delay=0.005)
    session = ChatSession([BasicAgent(llm=llm)])
    session.add_user(user_message("go", []))

    def stop_after(n: int) -> None:
        if n == 3:
            session.request_stop()

    updates = run_turn(session, session.agents[0], stop_after)
    assert llm.closed.wait(5), "the model's stream was not closed"
    assert llm.sent < 1000
    assert updates[-1][-1] == STOPPED_NOTE
    partial = session.history[-1].text
    assert partial.startswith("w0 w1 ") and session.display[-1] == STOPPED_NOTE


def test_stop_drops_a_call_that_has_no_result() -> None:
    calls = [
        Message("assistant", "", function_call=FunctionCall("a", "{}"), extra={"function_id": "1"}),
        Message("function", "ok", name="a", extra={"function_id": "1"}),
        Message("assistant", "", function_call=FunctionCall("b", "{}"), extra={"function_id": "2"}),
    ]
    from chatagent.schema import drop_unanswered_calls

    assert [m.function_call.name if m.function_call else m.role for m in drop_unanswered_calls(calls)] == [
        "a",
        "function",
    ]
    assert drop_unanswered_calls([Message("assistant", "", function_call=FunctionCall("c", "{}"))]) == []


def test_a_turn_abandoned_during_a_tool_call_leaves_a_valid_history() -> None:
    release = threading.Event()

    def slow() -> str:
        """Take a while."""
        release.wait(10)
        return "late"

    llm = ScriptedLLM([tool_call("slow", {}), "never reached"])
    session = ChatSession([FnCallAgent(function_list=[slow], llm=llm)])
    session.add_user(user_message("go", []))

    async def abandon() -> None:  # the browser goes away: Gradio closes the handler mid-turn
        turn = session.stream_turn(session.agents[0])
        async for display in turn:
            if any(d.get("metadata", {}).get("title") == f"{icon('tool')} slow" for d in display):
                break
        await turn.aclose()

    try:
        asyncio.run(abandon())
    finally:
        release.set()
    assert [m.role for m in session.history] == ["user"]  # the call without its result is not kept
    assert not session.running


def test_errors_show_as_a_readable_message_and_the_chat_goes_on() -> None:
    llm = ScriptedLLM([ModelServiceError(401, "bad key <x>"), "recovered"])
    session = ChatSession([BasicAgent(llm=llm)])
    session.add_user(user_message("hi", []))
    updates = run_turn(session, session.agents[0])
    assert message_text(updates[-1][-1]) == f"{icon('error')} **Error.** The model service failed (401): bad key &lt;x>"
    session.add_user(user_message("again", []))
    assert run_turn(session, session.agents[0])[-1][-1] == chat_message("assistant", "recovered")


def test_tool_calls_and_results_render_collapsed() -> None:
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    llm = ScriptedLLM([tool_call("add", {"a": 2, "b": 3}), "It is 5."])
    session = ChatSession([FnCallAgent(function_list=[add], llm=llm)])
    session.add_user(user_message("2+3?", []))
    final = run_turn(session, session.agents[0])[-1]
    titles = [d.get("metadata", {}).get("title") for d in final[1:]]
    assert titles == [f"{icon('tool')} add", f"{icon('result')} Result of add", None]
    assert message_text(final[2]) == "```\n5\n```" and message_text(final[3]) == "It is 5."


def test_regenerate_and_clear() -> None:
    llm = ScriptedLLM(["first", "second"])
    session = ChatSession([BasicAgent(llm=llm)])
    session.add_user(user_message("q", []))
    run_turn(session, session.agents[0])
    assert session.pop_response()
    assert [m.text for m in session.history] == ["q"]
    run_turn(session, session.agents[0])
    assert [m.text for m in session.history] == ["q", "second"]
    assert llm.calls[1].messages[-1].text == "q"
    session.clear()
    assert session.history == [] and session.display == [] and not session.pop_response()


def test_clear_during_a_turn_discards_it() -> None:
    llm = PacedLLM(n=1000, delay=0.005)
    session = ChatSession([BasicAgent(llm=llm)])
    session.add_user(user_message("go", []))
    run_turn(session, session.agents[0], lambda n: session.clear() if n == 2 else None)
    assert llm.closed.wait(5)
    assert session.history == [] and session.display == []


def test_sessions_sharing_an_agent_stay_isolated() -> None:
    llm = ScriptedLLM(default=lambda msgs, fns: f"echo {msgs[-1].text}")
    agent = BasicAgent(llm=llm)
    a, b = ChatSession([agent]), ChatSession([agent])

    async def both() -> None:
        async def one(s: ChatSession, text: str) -> None:
            s.add_user(user_message(text, []))
            async for _ in s.stream_turn(agent):
                pass

        await asyncio.gather(one(a, "apple"), one(b, "banana"))
        await asyncio.gather(one(a, "cherry"), one(b, "damson"))

    asyncio.run(both())
    assert [m.text for m in a.history] == ["apple", "echo apple", "cherry", "echo cherry"]
    assert [m.text for m in b.history] == ["banana", "echo banana", "damson", "echo damson"]


def test_uploaded_files_become_content_items_by_kind() -> None:
    msg = user_message("read these", ["/u/report.pdf", "/u/photo.png", "/u/notes.txt"])
    assert [i.model_dump() for i in msg.content] == [
        {"text": "read these"},
        {"file": "/u/report.pdf"},
        {"image": "/u/photo.png"},
        {"file": "/u/notes.txt"},
    ]
    assert content_kind("x.mp3") == "audio" and user_message("plain", []).content == "plain"

"""Runs bound to a Session: the stored conversation is prepended, the turn saved whole, stopped turns marked, failed
ones not saved, concurrent runs refused. Every test runs on SQLite and on PostgreSQL (see conftest.py)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from chatagent import (
    BasicAgent,
    FnCallAgent,
    ModelServiceError,
    ScriptedLLM,
    Session,
    SessionBusyError,
    SessionConflictError,
    tool_call,
)
from chatagent.llm.base import BaseChatModel
from chatagent.llm.scripted import Reply
from chatagent.schema import Message


def seen(messages, functions) -> Reply:
    """The model's answer: how many messages it was given and the last one's text, in two chunks."""
    return Reply(chunks=[f"seen {len(messages)}", f": {messages[-1].text}"])


def counter(name: str | None = "counter") -> BasicAgent:
    return BasicAgent(llm=ScriptedLLM(default=seen), name=name)


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def test_a_run_continues_the_stored_conversation_and_saves_its_turn(store_url: str) -> None:
    bot = counter()
    s = Session("chat-1", store_url)
    assert s.messages() == [] and s.title == "" and s.info() is None
    first = [user("What is the capital of France, and why is it that one?")]
    out = list(bot.run(first, session=s))[-1]
    assert out == [{"role": "assistant", "content": f"seen 1: {first[0]['content']}", "name": "counter"}]
    assert first == [user("What is the capital of France, and why is it that one?")]  # the caller's list unchanged
    out = bot.run_nonstream([user("And of Italy?")], session=s)
    assert out[-1]["content"] == "seen 3: And of Italy?"  # the model was given the stored turn too
    again = Session("chat-1", store_url)  # another object, same conversation
    assert [m["content"] for m in again.messages()] == [
        first[0]["content"],
        f"seen 1: {first[0]['content']}",
        "And of Italy?",
        "seen 3: And of Italy?",
    ]
    assert again.title == "What is the capital of France, and why is it that one?"
    [info] = Session.list(store_url)
    assert (info.id, info.messages, info.title) == ("chat-1", 4, again.title)
    assert Session.list(store_url, user="someone-else") == []


def test_titles_come_from_the_first_question_and_can_be_renamed(store_url: str) -> None:
    s = Session("t", store_url)
    counter().run_nonstream([user("word " * 40)], session=s)
    assert s.title.endswith("…") and len(s.title) <= 61 and s.title.startswith("word word")
    s.title = "  My   trip "
    counter().run_nonstream([user("more")], session=s)
    assert s.title == "My trip"  # a rename sticks
    s.clear()
    assert s.messages() == [] and s.title == ""


def test_users_are_kept_apart(store_url: str) -> None:
    bot = counter()
    alice, bob = Session("same-id", store_url, user="alice"), Session("same-id", store_url, user="bob")
    bot.run_nonstream([user("alice's secret")], session=alice)
    bot.run_nonstream([user("bob's question")], session=bob)
    assert [m["content"] for m in alice.messages()][0] == "alice's secret"
    assert bot.llm.calls[-1].messages[-1].text == "bob's question" and len(bot.llm.calls[-1].messages) == 1
    assert [i.user for i in Session.list(store_url, user="alice")] == ["alice"]
    assert sorted(i.user for i in Session.list(store_url, user=None)) == ["alice", "bob"]


def test_pop_undoes_the_last_turn_clear_empties_delete_removes(store_url: str) -> None:
    bot = counter()
    s = Session("p", store_url)
    for text in ("one", "two", "three"):
        bot.run_nonstream([user(text)], session=s)
    popped = s.pop()
    assert popped == [user("three"), {"role": "assistant", "content": "seen 5: three", "name": "counter"}]
    assert [m["content"] for m in s.messages()][-1] == "seen 3: two"
    assert s.info().messages == 4
    bot.run_nonstream([user("three again")], session=s)
    assert bot.llm.calls[-1].messages[-1].text == "three again" and len(bot.llm.calls[-1].messages) == 5
    s.clear()
    assert s.messages() == [] and s.pop() == [] and s.info().messages == 0
    assert s.delete() is True and s.info() is None and s.delete() is False
    assert Session.list(store_url) == []


def test_a_system_message_is_the_conversations_and_the_agents_is_not_stored(store_url: str) -> None:
    bot = BasicAgent(llm=ScriptedLLM(default=seen), system_message="You are terse.")
    s = Session("sys", store_url)
    bot.run_nonstream([{"role": "system", "content": "Speak French."}, user("hi")], session=s)
    bot.run_nonstream([user("again")], session=s)
    sent = bot.llm.calls[-1].messages
    assert sent[0].role == "system" and sent[0].text == "You are terse.\n\nSpeak French."
    assert [m.text for m in sent[1:]] == ["hi", "seen 2: hi", "again"]
    bot.run_nonstream([{"role": "system", "content": "Speak Italian."}, user("ciao")], session=s)
    stored = s.messages()
    assert stored[0] == {"role": "system", "content": "Speak Italian."}
    assert sum(m["role"] == "system" for m in stored) == 1 and len(stored) == 7


def test_a_stopped_run_saves_its_partial_answer_marked_interrupted(store_url: str) -> None:
    bot = counter()
    s = Session("stop", store_url)
    bot.run_nonstream([user("first")], session=s)
    run = bot.run([user("second")], session=s, delta_stream=True)
    assert next(run)[0]["content"] == "seen 3"
    run.close()
    stored = s.messages()
    assert stored[2:] == [
        user("second"),
        {"role": "assistant", "content": "seen 3", "name": "counter", "extra": {"interrupted": True}},
    ]
    assert bot.run_nonstream([user("third")], session=s)[-1]["content"] == "seen 5: third"  # the lock was released


def test_a_stop_before_a_tool_result_drops_the_unanswered_call(store_url: str) -> None:
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    bot = FnCallAgent(function_list=[add], llm=ScriptedLLM([tool_call("add", {"a": 2, "b": 3}), "5."]))
    s = Session("tools", store_url)
    run = bot.run([user("2+3?")], session=s)
    for rsp in run:
        if rsp[-1].get("function_call"):
            break
    run.close()
    assert s.messages() == [{"role": "user", "content": "2+3?", "extra": {"interrupted": True}}]


class FailingMidAnswer(BaseChatModel):
    """Streams the start of an answer, then fails (as a server that breaks off would)."""

    def __init__(self) -> None:
        super().__init__({"model": "failing"})

    def _chat_stream(self, messages, functions, cfg, usage):
        yield [Message.unchecked("assistant", "half an ans", None, None, None, {"index": 0})]
        raise ModelServiceError(400, "refused", partial=True)


def test_a_failed_run_leaves_the_conversation_as_it_was(store_url: str) -> None:
    s = Session("fail", store_url)
    counter().run_nonstream([user("one")], session=s)
    before = s.messages()
    with pytest.raises(ModelServiceError):
        BasicAgent(llm=ScriptedLLM([ModelServiceError(400, "refused")])).run_nonstream([user("two")], session=s)
    run = BasicAgent(llm=FailingMidAnswer()).run([user("two")], session=s)
    assert next(run)[-1]["content"] == "half an ans"
    with pytest.raises(ModelServiceError):
        next(run)
    assert s.messages() == before
    assert counter().run_nonstream([user("two")], session=s)[-1]["content"] == "seen 3: two"  # the lock is free


def test_a_second_run_on_a_busy_session_is_refused_and_the_first_is_saved(store_url: str) -> None:
    bot = counter()
    run = bot.run([user("first")], session=Session("busy", store_url), delta_stream=True)
    next(run)
    with pytest.raises(SessionBusyError, match="busy.*run in progress"):
        bot.run_nonstream([user("second")], session=Session("busy", store_url))
    list(run)
    assert [m["content"] for m in Session("busy", store_url).messages()] == ["first", "seen 1: first"]
    assert bot.run_nonstream([user("second")], session=Session("busy", store_url))[-1]["content"] == "seen 3: second"


def test_threads_running_one_session_never_interleave(store_url: str) -> None:
    bot = counter()
    results: list[str] = []
    start = threading.Barrier(8)

    def worker(i: int) -> None:
        start.wait(10)
        try:
            bot.run_nonstream([user(f"q{i}")], session=Session("race", store_url))
            results.append("saved")
        except SessionBusyError:
            results.append("busy")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    stored = Session("race", store_url).messages()
    assert len(stored) == 2 * results.count("saved") and results.count("saved") >= 1
    for k in range(0, len(stored), 2):  # each saved turn is a question and the answer to the whole history
        assert stored[k + 1]["content"] == f"seen {k + 1}: {stored[k]['content']}"


def test_a_turn_is_not_saved_over_a_change_made_while_it_ran(store_url: str) -> None:
    bot = counter()
    s = Session("conflict", store_url)
    bot.run_nonstream([user("one")], session=s)
    run = bot.run([user("two")], session=s, delta_stream=True)
    next(run)
    Session("conflict", store_url).clear()  # elsewhere, while the run goes on
    with pytest.raises(SessionConflictError, match="changed by another writer"):
        list(run)
    assert s.messages() == []


def test_arun_and_arun_nonstream_keep_the_store_off_the_event_loop(store_url: str) -> None:
    bot = counter()
    s = Session("async", store_url)
    store_threads: list[int] = []
    load = s.store.load

    def recording_load(*args):
        store_threads.append(threading.get_ident())
        return load(*args)

    s.store.load = recording_load  # type: ignore[method-assign]

    async def main() -> tuple[int, list]:
        rsp: list = []
        async for rsp in bot.arun([user("one")], session=s):  # noqa: B007  (the last yield is kept)
            pass
        out = await bot.arun_nonstream([user("two")], session=s)
        run = bot.arun([user("three")], session=s, delta_stream=True)
        await run.__anext__()
        await run.aclose()
        return threading.get_ident(), [rsp, out]

    try:
        loop_thread, (first, second) = asyncio.run(main())
    finally:
        del s.store.load
    assert first[-1]["content"] == "seen 1: one" and second[-1]["content"] == "seen 3: two"
    assert len(store_threads) == 3 and loop_thread not in store_threads
    assert s.messages()[-1] == {
        "role": "assistant",
        "content": "seen 5",
        "name": "counter",
        "extra": {"interrupted": True},
    }


class SlowModel(BaseChatModel):
    """Streams 'partial' then a dot every 10 ms for a long time (a blocking stream: arun drives it in a thread)."""

    def __init__(self) -> None:
        super().__init__({"model": "slow"})

    def _chat_stream(self, messages, functions, cfg, usage):
        yield [Message.unchecked("assistant", "partial", None, None, None, {"index": 0})]
        for _ in range(10_000):
            time.sleep(0.01)
            yield [Message.unchecked("assistant", ".", None, None, None, {"index": 0})]


def test_a_cancelled_arun_task_counts_as_stopped(store_url: str) -> None:
    bot = BasicAgent(llm=SlowModel(), name="slow")
    s = Session("cancel", store_url)

    async def consume(flag: asyncio.Event) -> None:
        async for _ in bot.arun([user("go")], session=s, delta_stream=True):
            flag.set()

    async def main() -> None:
        flag = asyncio.Event()
        task = asyncio.create_task(consume(flag))
        await asyncio.wait_for(flag.wait(), 30)
        task.cancel()  # lands where the task waits: inside the run, for the model's next words
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    stored = s.messages()
    assert stored[0] == user("go") and stored[-1]["content"].startswith("partial")
    assert stored[-1]["extra"] == {"interrupted": True} and len(stored) == 2


def test_structured_output_stores_only_the_valid_answer(store_url: str) -> None:
    from pydantic import BaseModel

    class City(BaseModel):
        name: str

    bot = BasicAgent(llm=ScriptedLLM(["not json", '{"name": "Paris"}', '{"name": "Rome"}']))
    s = Session("structured", store_url)
    assert bot.run_nonstream([user("capital of France?")], session=s, response_format=City) == City(name="Paris")
    mark = {"name": "City", "attempts": 2, "path": "prompt", "valid": True}  # the rejected first answer was replaced
    parsed = {"name": "Paris"}  # the validated object, as the last yield carried it
    answer = {"role": "assistant", "content": '{"name": "Paris"}', "extra": {"parsed": parsed, "response_format": mark}}
    assert s.messages() == [user("capital of France?"), answer]
    bot.run_nonstream([user("of Italy?")], session=s, response_format=City)
    assert [m.text for m in bot.llm.calls[-1].messages[1:]] == ["capital of France?", '{"name": "Paris"}', "of Italy?"]


def test_bad_arguments_are_refused() -> None:
    bot = counter()
    with pytest.raises(TypeError, match="session must be a chatagent.Session"):
        bot.run_nonstream([user("x")], session="chat-1")
    with pytest.raises(ValueError, match="session_id must be 1 to 256 printable"):
        Session("")
    with pytest.raises(ValueError, match="user must be"):
        Session("x", user="a\nb")
    with pytest.raises(TypeError, match="session_id must be a string"):
        Session(42)  # type: ignore[arg-type]
    assert len(Session().id) == 32  # a new random id

"""Durable turns: a turn checkpointed as it goes survives kill -9 and is resumed from its last checkpoint, its
completed tool calls not run again (a tool that counts its executions in a file sees each call once), on SQLite
and on PostgreSQL alike (see conftest.py). The model is the loopback OpenAI-compatible server, over real HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chatagent import FnCallAgent, Session, SessionPendingTurnError
from chatagent.run.context import current_run
from tests.support.durable import ledger_lines
from tests.support.openai_server import OpenAIServer, Reply


def test_kill_9_mid_answer_then_resume_runs_no_tool_twice(
    store_url: str, openai_server: OpenAIServer, tmp_path: Path, children
) -> None:
    ledger = tmp_path / "ledger"
    openai_server.add(
        Reply(tool_calls=[("record", {"n": 1})]),
        Reply(tool_calls=[("record", {"n": 2})]),
        Reply(text="Recorded both numbers, and now", chunk_size=8, stall_after=3, stall=60),  # killed in here
    )
    args = (store_url, "durable", openai_server.base_url, str(ledger), "0")
    first = children(*args, "run", "Record 1 and 2.")
    first.wait_for("text")
    first.kill()  # SIGKILL: nothing of the process's cleanup runs
    session = Session("durable", store_url)
    pending = session.pending_turn
    assert pending is not None and pending.state == "running"
    assert pending.messages == [{"role": "user", "content": "Record 1 and 2."}]
    assert [m["role"] for m in pending.response] == ["assistant", "function", "assistant", "function"]
    assert session.messages() == []  # the turn is not stored until it ends
    with pytest.raises(SessionPendingTurnError, match="resume"):  # a new run neither loses nor repeats it
        FnCallAgent(llm=OpenAIServerLLM(openai_server)).run_nonstream([{"role": "user", "content": "hi"}],
                                                                      session=session)  # fmt: skip

    openai_server.add("Recorded 1 and 2.")
    resumed = children(*args, "resume")
    done = resumed.wait_for("done")["done"]
    resumed.finish()
    assert [line.split()[1] for line in ledger_lines(ledger)] == ["1", "2"]  # each call ran once
    assert len(ledger_lines(ledger, ".attempts")) == 2
    asked = openai_server.chat_requests[-1].json["messages"]  # the model is asked from the checkpoint on
    assert [m["role"] for m in asked] == ["user", "assistant", "tool", "assistant", "tool"]
    assert [m["role"] for m in done] == ["assistant", "function", "assistant", "function", "assistant"]
    assert done[-1]["content"] == "Recorded 1 and 2."  # the whole turn, as if uninterrupted
    stored = session.messages()
    assert [m["role"] for m in stored] == ["user", "assistant", "function", "assistant", "function", "assistant"]
    assert session.pending_turn is None


def test_kill_9_inside_a_tool_then_resume_runs_it_again_with_the_same_key(
    store_url: str, openai_server: OpenAIServer, tmp_path: Path, children
) -> None:
    ledger = tmp_path / "ledger"
    openai_server.add(Reply(tool_calls=[("record", {"n": 1})]), Reply(tool_calls=[("record", {"n": 2})]))
    args = (store_url, "in-tool", openai_server.base_url, str(ledger))
    first = children(*args, "2", "run", "Record 1 and 2.")
    first.wait_for("in_tool")  # record(2) made its effect, then the process dies before its result is stored
    first.kill()
    openai_server.add("Done.")
    resumed = children(*args, "0", "resume")
    assert resumed.wait_for("done")["done"][-1]["content"] == "Done."
    attempts = ledger_lines(ledger, ".attempts")
    assert [line.split()[1] for line in attempts] == ["1", "2", "2"]  # record(2) ran again on resume...
    assert attempts[1].split()[0] == attempts[2].split()[0]  # ...with the same idempotency key,
    assert [line.split()[1] for line in ledger_lines(ledger)] == ["1", "2"]  # so its effect happened once


def OpenAIServerLLM(server: OpenAIServer) -> dict:  # noqa: N802 (reads as the config it is)
    return {"model": "m", "model_server": server.base_url, "api_key": "k"}


# ---- in one process: pauses, failures, what a new run does ------------------------------------------------------


def _bot(script: list, *tools, approval: bool = False) -> FnCallAgent:
    from chatagent import ScriptedLLM, tool

    def add(a: int, b: int) -> int:
        """Add two integers."""
        ADDED.append((a, b, current_run().idempotency_key))
        return a + b

    made = [tool(requires_approval=True)(add) if approval else add, *tools]
    return FnCallAgent(function_list=made, llm=ScriptedLLM(script), name="adder")


ADDED: list[tuple] = []


@pytest.fixture(autouse=True)
def _fresh_ledger():
    ADDED.clear()


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def test_a_pause_for_approval_is_a_pending_turn_that_the_decision_continues(store_url: str) -> None:
    from chatagent import approval_message, tool_call

    s = Session("paused", store_url)
    bot = _bot([tool_call("add", {"a": 2, "b": 3}), "It is 5."], approval=True)
    paused = bot.run_nonstream([user("2+3?")], session=s)
    assert paused[-1]["extra"]["pending_approval"][0]["name"] == "add"
    pending = s.pending_turn
    assert pending is not None and pending.state == "paused" and pending.waiting[0]["name"] == "add"
    assert s.messages() == [] and ADDED == []
    # a new process would do the same: the decision is the next run's only message (as the web UI and CLI send it)
    after = _bot(["It is 5."], approval=True).run_nonstream(
        [approval_message(True)], session=Session("paused", store_url)
    )
    assert [m["role"] for m in after] == ["function", "assistant"] and after[-1]["content"] == "It is 5."
    assert [a[:2] for a in ADDED] == [(2, 3)]
    stored = s.messages()  # one turn, the decision in it where it was taken
    assert [m["role"] for m in stored] == ["user", "assistant", "user", "function", "assistant"]
    assert stored[2]["extra"] == {"approval": True}
    assert s.pending_turn is None


def test_resume_with_a_decision_shows_the_whole_turn_and_a_new_question_stores_the_pause_as_it_is(
    store_url: str,
) -> None:
    from chatagent import tool_call

    s = Session("decide", store_url)
    _bot([tool_call("add", {"a": 1, "b": 1})], approval=True).run_nonstream([user("1+1?")], session=s)
    with pytest.raises(Exception, match="waits for a decision"):
        list(_bot([], approval=True).resume(session=s))
    resumed = list(_bot(["Not added."], approval=True).resume(session=s, approval=False, reason="no"))[-1]
    # the call and the decision again, then the rest
    assert [m["role"] for m in resumed] == ["assistant", "user", "function", "assistant"]
    assert "denied" in resumed[2]["content"] and ADDED == []
    # a turn paused, then a new question instead of a decision: the paused turn is stored as it stood
    _bot([tool_call("add", {"a": 4, "b": 4})], approval=True).run_nonstream([user("4+4?")], session=s)
    _bot(["Hello."], approval=True).run_nonstream([user("never mind")], session=s)
    roles = [m["role"] for m in s.messages()]
    assert roles[-4:] == ["user", "assistant", "user", "assistant"] and s.pending_turn is None
    assert s.messages()[-3]["extra"]["pending_approval"]  # as a paused turn was always stored


def test_a_run_that_fails_after_a_tool_stays_pending_until_resumed_or_discarded(store_url: str) -> None:
    from chatagent import ModelServiceError, tool_call

    s = Session("failed", store_url)
    bot = _bot([tool_call("add", {"a": 2, "b": 2}), ModelServiceError(500, "the model is down")])
    with pytest.raises(ModelServiceError):
        bot.run_nonstream([user("2+2?")], session=s)
    pending = s.pending_turn
    assert pending is not None and pending.state == "failed" and "the model is down" in (pending.error or "")
    with pytest.raises(SessionPendingTurnError, match="failed .*the model is down.* agent.resume"):
        _bot(["hi"]).run_nonstream([user("hello")], session=s)
    answer = _bot(["It is 4."]).resume(session=s)
    assert [m["role"] for m in list(answer)[-1]] == ["assistant", "function", "assistant"]
    assert len(ADDED) == 1 and s.pending_turn is None
    # discarding instead
    with pytest.raises(ModelServiceError):
        _bot([tool_call("add", {"a": 1, "b": 2}), ModelServiceError(500, "down")]).run_nonstream([user("1+2?")],
                                                                                               session=s)  # fmt: skip
    dropped = s.discard_pending()
    assert dropped is not None and dropped.messages == [user("1+2?")]
    assert _bot(["Hi."]).run_nonstream([user("hello")], session=s)[-1]["content"] == "Hi."
    assert [m["content"] for m in s.messages() if m["role"] == "user"] == ["2+2?", "hello"]
    with pytest.raises(Exception, match="no turn to resume"):
        list(_bot([]).resume(session=s))


def test_a_retry_of_a_resumed_turn_does_not_run_its_unanswered_calls_again(store_url: str) -> None:
    """Regression: a resumed turn ran its unanswered calls again on each attempt of its answer (an `after_run`
    retry): the tool ran twice and its result stood twice in the conversation."""
    from chatagent import Plugin, ScriptedLLM, tool, tool_call
    from chatagent.run.plugin import Retry
    from chatagent.tools.tool import ToolServiceError

    s = Session("retried", store_url)

    def down(a: int, b: int) -> int:
        """Add two integers."""
        raise ToolServiceError("the adder is down")  # the run cannot go on: the call stays unanswered

    failing = FnCallAgent(llm=ScriptedLLM([tool_call("down", {"a": 1, "b": 2})]), function_list=[down])
    with pytest.raises(ToolServiceError):
        failing.run_nonstream([user("1+2?")], session=s)

    class RetryOnce(Plugin):
        def __init__(self) -> None:
            self.asked = 0

        def after_run(self, agent, response):  # noqa: ANN001, ANN201
            self.asked += 1
            if self.asked == 1:
                raise Retry("Say it in words.")

    @tool(name="down")
    def back_up(a: int, b: int) -> int:
        """Add two integers."""
        ADDED.append((a, b))
        return a + b

    llm = ScriptedLLM(["It is 3.", "It is three."])
    out = list(FnCallAgent(llm=llm, function_list=[back_up], plugins=[RetryOnce()]).resume(session=s))[-1]
    assert len(ADDED) == 1
    assert [m["role"] for m in out] == ["assistant", "function", "assistant"] and out[-1]["content"] == "It is three."
    assert [m.role for m in llm.calls[1].messages] == ["user", "assistant", "function", "assistant", "user"]


def test_aresume_continues_on_the_event_loop(store_url: str) -> None:
    import asyncio

    from chatagent import ModelServiceError, tool_call

    s = Session("async", store_url)
    with pytest.raises(ModelServiceError):
        _bot([tool_call("add", {"a": 3, "b": 4}), ModelServiceError(500, "down")]).run_nonstream([user("3+4?")],
                                                                                               session=s)  # fmt: skip

    async def main() -> list:
        seen: list = []
        async for rsp in _bot(["It is 7."]).aresume(session=s):
            seen = rsp
        return seen

    assert asyncio.run(main())[-1]["content"] == "It is 7."
    assert len(ADDED) == 1 and s.pending_turn is None and len(s.messages()) == 4


def test_idempotency_keys_are_per_call_and_none_outside_a_tool(store_url: str) -> None:
    from chatagent import tool_call

    s = Session("keys", store_url)
    _bot([[tool_call("add", {"a": 1, "b": 1}), tool_call("add", {"a": 2, "b": 2})], "Done."]).run_nonstream(
        [user("sums")], session=s
    )
    keys = [a[2] for a in ADDED]
    assert len(set(keys)) == 2 and all(k and ":" in k for k in keys)
    assert current_run().idempotency_key is None and current_run().call_id is None


def test_a_pause_for_a_persons_message_is_the_same_pending_turn(store_url: str) -> None:
    from chatagent import BasicAgent, GroupChat, ScriptedLLM
    from chatagent.agents.user import UserAgent, pending_input

    def chat() -> GroupChat:
        alice = BasicAgent(llm=ScriptedLLM(["Tabs. What do you think, @Me?", "Glad you agree."]), name="Alice")
        return GroupChat([alice, UserAgent(name="Me")], selection="round_robin", max_rounds=3)

    s = Session("person", store_url)
    first = chat().run_nonstream([user("Tabs or spaces?")], session=s)
    assert pending_input(first) == "Me"
    pending = s.pending_turn
    assert pending is not None and pending.kind == "input" and pending.waiting == [{"name": "Me"}]
    assert s.messages() == []
    # another process, another chat object: the person's message, as the next run's, continues the turn
    second = chat().run_nonstream([{"role": "user", "name": "Me", "content": "Tabs it is."}], session=s)
    assert pending_input(second) == "Me"  # (round robin: the person's turn again)
    pending = s.pending_turn
    assert pending is not None and pending.kind == "input" and s.messages() == []
    assert [(m["role"], m.get("name")) for m in pending.response] == [
        ("assistant", "Alice"), ("assistant", "Me"), ("user", "Me"), ("assistant", "Alice"), ("assistant", "Me"),
    ]  # fmt: skip
    assert pending.response[2]["content"] == "Tabs it is."  # the person's message, where it came, in the turn


def test_text_an_output_check_holds_is_neither_checkpointed_nor_shown_by_resume(store_url: str) -> None:
    """A reply's text held by an output check (here it carries a password) is not in the pending turn's checkpoint,
    so a resumed turn, which shows the restored part first, cannot show it unchecked."""
    from chatagent import ModelServiceError, Reply, ScriptedLLM, tool_call
    from chatagent.plugins.guardrails import OutputGuardrail

    secret = "hunter2"

    def no_secret(text: str) -> str | None:
        return "a password" if secret in text else None

    def guarded(script: list) -> FnCallAgent:
        calls_add = _bot([]).function_map["add"]
        guard = OutputGuardrail(no_secret, message="I can't share that.")
        return FnCallAgent(function_list=[calls_add], llm=ScriptedLLM(script, chunk_size=3), plugins=[guard])

    s = Session("held", store_url)
    first = [Reply(f"The password is {secret}; adding.", [tool_call("add", {"a": 2, "b": 2})]),
             ModelServiceError(500, "the model is down")]  # fmt: skip
    seen: list = []
    with pytest.raises(ModelServiceError):
        for rsp in guarded(first).run([user("2+2?")], session=s):
            seen.append(rsp)
    pending = s.pending_turn
    assert pending is not None and pending.state == "failed" and len(ADDED) == 1  # the call ran and is kept
    assert secret not in json.dumps(pending.response) and secret not in json.dumps(seen)
    resumed = list(guarded(["It is 4."]).resume(session=s))
    assert secret not in json.dumps(resumed)
    assert resumed[-1][-1]["content"] == "It is 4." and len(ADDED) == 1  # not run again
    assert secret not in json.dumps(s.messages()) and s.pending_turn is None


def test_clearing_the_session_while_its_run_goes_on_stops_the_run_at_its_next_checkpoint(store_url: str) -> None:
    from chatagent import ScriptedLLM, SessionConflictError, tool_call

    calls: list[int] = []

    def wipe() -> str:
        """Wipe the conversation."""
        calls.append(1)
        if len(calls) == 2:  # the turn is pending, its checkpoints written: another writer clears the session
            Session("wiped", store_url).clear()
        return "wiped"

    llm = ScriptedLLM([tool_call("wipe", {}), tool_call("wipe", {}), "Done."])
    s = Session("wiped", store_url)
    with pytest.raises(SessionConflictError, match="changed by another writer"):
        FnCallAgent(function_list=[wipe], llm=llm).run_nonstream([user("Wipe it twice.")], session=s)
    assert len(calls) == 2 and len(llm.calls) == 2  # the run stopped there: the model was not asked again
    assert s.pending_turn is None and s.messages() == []

"""A session's checkpoint history (`Session.history()`), forks from any checkpoint and replays from them, on SQLite and
PostgreSQL: the original conversation is never changed, the steps before a fork point are not run again, and a
principal reaches only its own conversations' history."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatagent import FnCallAgent, ScriptedLLM, Session, answer_message, pending_questions, tool, tool_call
from chatagent.sessions import SessionError, SessionPendingTurnError, close_stores
from chatagent.sessions import store as store_module
from tests.sessions.test_session_stores import _set_schema_version_raw
from tests.tools.test_ask_nested import booker


def stepper(ran: list, replies: list) -> FnCallAgent:
    @tool
    def step(n: int) -> str:
        """Do step n."""
        ran.append(n)
        return f"did {n}"

    return FnCallAgent(llm=ScriptedLLM(list(replies)), function_list=[step])


FOUR = [[tool_call("step", {"n": k})] for k in range(4)] + ["Done four steps."]
ASK = [{"role": "user", "content": "Do four steps."}]


def test_a_ten_step_turn_is_listed_and_forked_from_its_third_checkpoint(store_url: str) -> None:
    ran: list = []
    s = Session("steps", store_url)
    stepper(ran, FOUR).run_nonstream(ASK, session=s)
    checkpoints = s.history()
    assert [(c.kind, c.messages) for c in checkpoints] == [("input", 1)] + [
        (kind, n) for n in range(2, 11) for kind in ["model" if n % 2 == 0 else "tools"]
    ]
    assert [c.id for c in checkpoints[:3]] == ["1.1", "1.2", "1.3"] and {c.turn for c in checkpoints} == {1}
    times = [c.at for c in checkpoints]
    assert all(t is not None for t in times) and times == sorted(times)  # type: ignore[type-var]
    before = s.messages()

    branch = s.fork(checkpoints[2].id)  # after the first step's result: the turn goes on from there on the branch
    assert branch.id != s.id and branch.messages() == [] and branch.pending_turn is not None
    assert [m["content"] for m in branch.pending_turn.response] == ["", "did 0"]
    other_ran: list = []
    other = stepper(other_ran, [[tool_call("step", {"n": 7})], "Done after seven."])  # another agent: a replay
    out = list(other.resume(session=Session(branch.id, store_url)))[-1]
    assert [m["content"] for m in out] == ["", "did 0", "", "did 7", "Done after seven."]
    assert other_ran == [7] and len(other.llm.calls) == 2  # step 0 was not run again
    assert other.llm.calls[0].messages[-1].role == "function"  # the model was asked from the checkpoint
    assert [m["content"] for m in Session(branch.id, store_url).messages()][-1] == "Done after seven."
    assert s.messages() == before and s.history() == checkpoints  # the original is unchanged
    assert len(Session(branch.id, store_url).history()) == 6


def test_a_replay_from_a_turns_end_with_a_changed_question_and_from_inside_a_turn(store_url: str) -> None:
    ran: list = []
    s = Session("two", store_url)
    bot = stepper(ran, [[tool_call("step", {"n": 1})], "One.", "Fine, thanks."])
    bot.run_nonstream([{"role": "user", "content": "Do one step."}], session=s)
    bot.run_nonstream([{"role": "user", "content": "How are you?"}], session=s)
    end_of_first = next(c for c in s.history() if c.turn == 1 and c.kind == "model" and c.messages == 4)
    branch, run = s.replay(end_of_first.id, stepper(ran, ["Blue."]), [{"role": "user", "content": "Favourite colour?"}])
    assert list(run)[-1][-1]["content"] == "Blue."
    assert [m["content"] for m in branch.messages()] == ["Do one step.", "", "did 1", "One.", "Favourite colour?",
                                                         "Blue."]  # fmt: skip
    assert [m["content"] for m in s.messages()][-2:] == ["How are you?", "Fine, thanks."]
    inside = next(c for c in s.history() if c.turn == 1 and c.kind == "model")  # the call, before its result
    again, run = s.replay(inside.id, stepper(ran, ["One, again."]))
    assert [m["content"] for m in list(run)[-1]] == ["", "did 1", "One, again."] and ran == [1, 1]
    with pytest.raises(SessionPendingTurnError):  # a cut turn is resumed, not talked over
        bot.run_nonstream([{"role": "user", "content": "x"}], session=s.fork(inside.id))


def test_forks_are_refused_clearly_and_another_user_sees_no_history(store_url: str) -> None:
    s = Session("mine", store_url, user="alice")
    stepper([], FOUR).run_nonstream(ASK, session=s)
    with pytest.raises(ValueError, match="no checkpoint"):
        s.fork("9.99")
    s.fork("1.2", "taken")
    with pytest.raises(SessionError, match="exists already"):
        s.fork("1.2", "taken")
    bob = Session("mine", store_url, user="bob")
    assert bob.history() == []
    with pytest.raises(ValueError, match="no checkpoint"):
        bob.fork("1.2")
    assert Session.list(store_url, user="bob") == []


def test_turns_stored_before_the_history_was_kept_are_listed_without_times(store_url: str) -> None:
    s = Session("old", store_url)
    stepper([], FOUR).run_nonstream(ASK, session=s)
    close_stores()
    _set_schema_version_raw(store_url, 2, "ALTER TABLE chatagent_turns DROP COLUMN times")
    s = Session("old", store_url)  # migrated: the column is back, empty
    assert s.store._read("SELECT value FROM chatagent_meta") == [(str(store_module.SCHEMA_VERSION),)]
    found = s.history()
    assert len(found) == 10 and {c.at for c in found} == {None} and found[2].kind == "tools"
    assert len(s.fork(found[-1].id).messages()) == 10


def test_a_fork_keeps_the_attached_files_when_the_original_is_deleted(store_url: str, tmp_path) -> None:
    doc = tmp_path / "notes.txt"
    doc.write_text("the notes\n" * 50)
    s = Session("files", store_url)
    s.append([{"role": "user", "content": [{"text": "read this"}, {"file": str(doc)}]}])
    s.append([{"role": "user", "content": "and then?"}])
    branch = s.fork(s.history()[0].id)
    assert [m["content"][0] for m in branch.messages()] == [{"text": "read this"}]
    assert s.delete()
    copy = Path(Session(branch.id, store_url).messages()[0]["content"][1]["file"])
    assert copy.read_text() == "the notes\n" * 50


def test_a_fork_at_a_nested_runs_question_waits_for_the_answer_as_the_turn_did(store_url: str) -> None:
    ran: list = []
    outer = [[tool_call("booker", {"task": "book Lisbon"})], "All booked."]
    inner = [[tool_call("book", {"city": "Lisbon"})], "Booked it."]
    s = Session("nested", store_url)
    bot = FnCallAgent(llm=ScriptedLLM(list(outer)), function_list=[booker(ran, inner)])
    (q,) = pending_questions(bot.run_nonstream(ASK, session=s)) or []
    out = bot.run_nonstream([answer_message({q["id"]: "May 3"})], session=s)
    assert out[-1]["content"] == "All booked."
    kinds = [c.kind for c in s.history()]
    assert kinds == ["input", "model", "tools", "pause", "input", "tools", "model"]
    branch = s.fork(s.history()[3].id)  # at the nested pause: the branch waits for the answer
    assert branch.pending_turn is not None and branch.pending_turn.kind == "question"
    again = FnCallAgent(llm=ScriptedLLM(outer[1:]), function_list=[booker(ran, inner[1:])])
    out = again.run_nonstream([answer_message({q["id"]: "June 9"})], session=branch)
    assert "booked Lisbon on June 9" in [m["content"] for m in out] and out[-1]["content"] == "All booked."
    assert "booked Lisbon on May 3" in [m["content"] for m in s.messages()]  # the original is unchanged

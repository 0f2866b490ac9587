"""The journal of a running turn on SQLite (chatagent/sessions/journal.py), through real processes killed with
SIGKILL: a torn last record is ignored and cut by the next writer, a journal left by a crash between a turn's commit
and the journal's removal is ignored and replaced, a long turn survives kills at several points, a discard from
another process stops the run at its next checkpoint, and the files are private. The model is the loopback
OpenAI-compatible server; the tool counts its executions in a file."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from chatagent import Session
from chatagent.sessions import journal
from chatagent.sessions.sqlite import SQLiteStore
from chatagent.sessions.store_urls import open_store
from tests.support.durable import Child, ledger_lines
from tests.support.openai_server import OpenAIServer, Reply

ROLES_2 = ["assistant", "function", "assistant", "function"]


@pytest.fixture
def url(tmp_path: Path) -> str:
    return "sqlite:///" + str(tmp_path / "sessions.db")


def journal_of(url: str, session_id: str) -> Path:
    store = open_store(url)
    assert isinstance(store, SQLiteStore)
    return store.journal_path("local", session_id)


def roles(messages: list[dict]) -> list[str]:
    return [m["role"] for m in messages]


def numbers(ledger: Path, suffix: str = "") -> list[str]:
    return [line.split()[1] for line in ledger_lines(ledger, suffix)]


def waiting_in_record_2(
    url: str, session_id: str, server: OpenAIServer, tmp_path: Path, children: Callable[..., Child]
) -> tuple[Child, Path, Path]:
    """A child whose run records 1 and 2 and waits inside record(2) until the gate file exists (the model's last
    answer: "Done."); the child, its ledger, the gate."""
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    server.add(Reply(tool_calls=[("record", {"n": 1})]), Reply(tool_calls=[("record", {"n": 2})]), "Done.")
    child = children(url, session_id, server.base_url, str(ledger), f"2@{gate}", "run", "Record 1 and 2.")
    child.wait_for("in_tool")
    return child, ledger, gate


def test_a_torn_last_record_is_ignored_and_the_resumed_writer_cuts_it(
    url: str, openai_server: OpenAIServer, tmp_path: Path, children
) -> None:
    ledger = tmp_path / "ledger"
    openai_server.add(
        Reply(tool_calls=[("record", {"n": 1})]),
        Reply(tool_calls=[("record", {"n": 2})]),
        Reply(text="Recorded both, and now", chunk_size=8, stall_after=2, stall=60),  # killed in here
    )
    args = (url, "torn", openai_server.base_url, str(ledger))
    first = children(*args, "0", "run", "Record 1 and 2.")
    first.wait_for("text")
    first.kill()
    path = journal_of(url, "torn")
    contents = journal.read(path)
    assert len(contents.records) == 3 and not contents.torn  # the first checkpoint is a transaction, then records
    with open(path, "r+b") as f:  # what a process killed in the middle of copying a record leaves
        f.seek(contents.end)
        f.write(_record(3, "NEVER SHOWN")[:30])
    assert journal.read(path).torn
    session = Session("torn", url)
    pending = session.pending_turn
    assert pending is not None and roles(pending.response) == ROLES_2
    assert "NEVER" not in orjson.dumps(pending.response).decode()

    openai_server.add(Reply(tool_calls=[("record", {"n": 3})]))
    second = children(*args, "3", "resume")  # killed inside record(3): its reply was written after the cut
    second.wait_for("in_tool")
    second.kill()
    contents = journal.read(path)
    assert not contents.torn  # the torn part is gone: the records written since follow the valid ones
    assert contents.records[-1][2][-1]["function_call"]["arguments"] == '{"n": 3}'
    assert roles(session.pending_turn.response) == [*ROLES_2, "assistant"]  # type: ignore[union-attr]

    openai_server.add("Recorded 1, 2 and 3.")
    third = children(*args, "0", "resume")
    assert third.wait_for("done")["done"][-1]["content"] == "Recorded 1, 2 and 3."
    third.finish()
    assert numbers(ledger) == ["1", "2", "3"] and numbers(ledger, ".attempts") == ["1", "2", "3", "3"]
    assert session.pending_turn is None and not path.exists()
    assert roles(session.messages()) == ["user", *ROLES_2, "assistant", "function", "assistant"]


def test_a_journal_left_between_a_commit_and_its_removal_is_ignored_and_replaced(
    url: str, openai_server: OpenAIServer, tmp_path: Path, children
) -> None:
    first, ledger, gate = waiting_in_record_2(url, "stale", openai_server, tmp_path, children)
    args = (url, "stale", openai_server.base_url, str(ledger))
    path = journal_of(url, "stale")
    left = path.read_bytes()  # the journal as a crash right after the turn's commit would leave it
    gate.touch()
    first.wait_for("done")
    first.finish()
    assert not path.exists()
    path.write_bytes(left)
    session = Session("stale", url)
    assert session.pending_turn is None  # its records belong to a turn that is stored
    assert roles(session.messages()) == ["user", *ROLES_2, "assistant"]

    openai_server.add(
        Reply(tool_calls=[("record", {"n": 3})]), Reply(text="Recorded, and", chunk_size=4, stall_after=2, stall=60)
    )
    second = children(*args, "0", "run", "Record 3.")
    second.wait_for("text")
    second.kill()
    pending = session.pending_turn
    assert pending is not None and roles(pending.response) == ["assistant", "function"]
    assert journal.read(path).key == pending.key  # the new turn started the file anew
    openai_server.add("Recorded 3.")
    third = children(*args, "0", "resume")
    assert third.wait_for("done")["done"][-1]["content"] == "Recorded 3."
    third.finish()
    assert numbers(ledger) == ["1", "2", "3"] and numbers(ledger, ".attempts") == ["1", "2", "3"]


def test_a_long_turn_killed_at_several_points_runs_each_effect_once(
    url: str, openai_server: OpenAIServer, tmp_path: Path, children
) -> None:
    ledger = tmp_path / "ledger"
    openai_server.add(*[Reply(tool_calls=[("record", {"n": n})]) for n in range(1, 7)], "All six recorded.")
    args = (url, "long", openai_server.base_url, str(ledger))
    session = Session("long", url)
    for k, (hang, mode) in enumerate([("2", "run"), ("4", "resume"), ("6", "resume")]):
        child = children(*args, hang, mode, *(["Record 1 to 6."] if mode == "run" else []))
        assert child.wait_for("in_tool")["in_tool"] == int(hang)
        child.kill()  # SIGKILL inside record(hang), after its effect, before its result is checkpointed
        pending = session.pending_turn
        assert pending is not None and len(pending.response) == 4 * k + 3
    last = children(*args, "0", "resume")
    done = last.wait_for("done")["done"]
    last.finish()
    assert len(done) == 13 and done[-1]["content"] == "All six recorded."
    assert numbers(ledger) == ["1", "2", "3", "4", "5", "6"]  # each effect once
    assert numbers(ledger, ".attempts") == ["1", "2", "2", "3", "4", "4", "5", "6", "6"]  # the killed ones again
    assert len({line.split()[0] for line in ledger_lines(ledger)}) == 6
    assert len(session.messages()) == 14 and session.pending_turn is None


def test_a_discard_from_another_process_stops_the_run_at_its_next_checkpoint(
    url: str, openai_server: OpenAIServer, tmp_path: Path, children
) -> None:
    child, _, gate = waiting_in_record_2(url, "discarded", openai_server, tmp_path, children)
    path = journal_of(url, "discarded")
    assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700
    asked = len(openai_server.chat_requests)
    dropped = Session("discarded", url).discard_pending()  # this process, while the child's run goes on
    assert dropped is not None and roles(dropped.response) == ["assistant", "function", "assistant"]
    assert not path.exists()
    gate.touch()  # record(2) returns; its result's checkpoint finds the turn gone
    assert "changed by another writer" in child.wait_for("error")["error"]
    child.finish()
    assert len(openai_server.chat_requests) == asked  # the run stopped there: the model was not asked again
    session = Session("discarded", url)
    assert session.pending_turn is None and session.messages() == []


# ---- the file format, on files written as a crash would leave them ---------------------------------------------


def _record(step: int, text: str) -> bytes:
    body = orjson.dumps([step, step, [{"role": "function", "name": "f", "content": text}]])
    return struct.pack("<II", len(body), zlib.crc32(body)) + body


def test_reading_stops_at_a_damaged_record_and_a_writer_cuts_or_starts_anew(tmp_path: Path) -> None:
    path = tmp_path / "j.journal"
    writer = journal.Writer(path, "k")
    assert writer.append(0, 0, [{"role": "function", "content": "zero"}]) and writer.append(1, 1, [])
    writer.close()
    assert path.stat().st_mode & 0o777 == 0o600
    contents = journal.read(path)
    assert contents.key == "k" and [r[0] for r in contents.records] == [0, 1] and not contents.torn
    damaged = bytearray(_record(2, "two"))
    damaged[-3] ^= 0xFF  # a byte that is not what was written: its CRC does not match
    with open(path, "r+b") as f:
        f.seek(contents.end)
        f.write(bytes(damaged) + _record(3, "three"))
    damaged_read = journal.read(path)
    assert [r[0] for r in damaged_read.records] == [0, 1] and damaged_read.torn  # nothing after it is data
    with open(path, "r+b") as f:
        f.seek(contents.end)
        f.write(struct.pack("<II", 1 << 30, 0) + b"{")  # a length past the end of the file
    assert [r[0] for r in journal.read(path).records] == [0, 1]

    writer = journal.Writer(path, "k")  # the same turn: cut after its last valid record, then written on
    assert writer.append(2, 2, [{"role": "assistant", "content": "two"}])
    contents = journal.read(path)
    assert [r[0] for r in contents.records] == [0, 1, 2] and not contents.torn
    writer.close()
    assert list(journal.after(contents.records, 0)) == contents.records[1:]

    other = journal.Writer(path, "another turn")  # a journal of another turn is started anew
    assert other.append(0, 0, []) and journal.read(path).key == "another turn"
    assert len(journal.read(path).records) == 1
    journal.discard(path, "k")  # not its turn: left alone
    assert path.exists() and other.append(1, 0, [])
    journal.discard(path, "another turn")  # the writer sees it at its next record
    assert not path.exists() and not other.append(2, 0, [])
    other.close()


def test_a_journal_grows_past_its_first_allocation(tmp_path: Path) -> None:
    path = tmp_path / "j.journal"
    writer = journal.Writer(path, "k")
    big = "x" * 50_000
    for step in range(5):  # 250 kB: the file's space doubles twice
        assert writer.append(step, step, [{"role": "function", "content": big}])
    writer.close()
    contents = journal.read(path)
    assert [r[0] for r in contents.records] == [0, 1, 2, 3, 4] and contents.records[4][2][0]["content"] == big

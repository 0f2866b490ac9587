"""Durable turns: a turn checkpointed as it goes survives kill -9 and is resumed from its last checkpoint, its
completed tool calls not run again (a tool that counts its executions in a file sees each call once), on SQLite
and on PostgreSQL alike (see conftest.py). The model is the loopback OpenAI-compatible server, over real HTTP."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from chatagent import FnCallAgent, Session, SessionPendingTurnError
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.postgres import default_signals

CHILD = Path(__file__).resolve().parents[1] / "support" / "durable_child.py"
DEADLINE = 60.0


class Child:
    """tests/support/durable_child.py in a process of its own; `wait_for(key)` reads its JSON lines until one has
    `key`."""

    def __init__(self, *args: str) -> None:
        self.p = subprocess.Popen(
            [sys.executable, str(CHILD), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"}, preexec_fn=default_signals,
        )  # fmt: skip
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.p.stdout:  # type: ignore[union-attr]
            self.lines.put(line)
        self.lines.put("")

    def wait_for(self, key: str) -> dict:
        while True:
            try:
                line = self.lines.get(timeout=DEADLINE)
            except queue.Empty:
                raise AssertionError(f"no {key!r} from the child within {DEADLINE} s") from None
            if not line:
                raise AssertionError(f"the child ended: {self.p.stderr.read()[-3000:]}")  # type: ignore[union-attr]
            obj = json.loads(line)
            if key in obj:
                return obj
            assert "error" not in obj, obj

    def kill(self) -> None:
        self.p.kill()
        self.p.wait(DEADLINE)

    def finish(self) -> None:
        if self.p.poll() is None:
            self.p.wait(DEADLINE)


@pytest.fixture
def children():
    made: list[Child] = []

    def make(*args: str) -> Child:
        made.append(Child(*args))
        return made[-1]

    yield make
    for c in made:
        if c.p.poll() is None:
            c.kill()


def ledger_lines(ledger: Path, suffix: str = "") -> list[str]:
    path = Path(str(ledger) + suffix)
    return path.read_text().splitlines() if path.exists() else []


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

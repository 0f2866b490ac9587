"""Flows across processes, on SQLite and on a real PostgreSQL: a flow killed with SIGKILL mid-way resumes in a new
process from its last completed method (completed methods do not run again), and a flow that asked a person is
resumed with the feedback in another process."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from chatagent.sessions.flow_states import FlowStates
from tests.support import processes

CHILD = Path(__file__).resolve().parents[1] / "support" / "flow_child.py"


def _child(store_url: str, log: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return processes.run([sys.executable, str(CHILD), store_url, str(log), *args], capture_output=True, text=True,
                          timeout=120)  # fmt: skip


def _ran(log: Path) -> list[str]:
    return log.read_text().split()


@pytest.mark.timeout(300)
def test_kill_9_then_resume_runs_on_from_the_last_completed_method(store_url: str, tmp_path: Path) -> None:
    log = tmp_path / "ran.log"
    killed = _child(store_url, log, "kickoff", "bill-1", "kill")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert _ran(log) == ["fetch", "add", "size"]  # killed inside `size`
    flow_class, status, record = FlowStates(store_url).load("bill-1") or ("", "", {})
    assert status == "running" and record["completed"] == ["fetch", "add"]
    assert record["state"]["total"] == 12

    done = _child(store_url, log, "resume", "bill-1")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == "billed 12, approved by auto"
    assert _ran(log) == ["fetch", "add", "size", "size", "approve"]  # fetch and add did not run again
    assert FlowStates(store_url).load("bill-1")[1] == "done"


@pytest.mark.timeout(300)
def test_a_flow_asks_a_person_and_another_process_resumes_it_with_the_feedback(store_url: str, tmp_path) -> None:
    log = tmp_path / "ran.log"
    paused = _child(store_url, log, "kickoff", "bill-2", "ask")
    assert paused.returncode == 0, paused.stderr
    assert json.loads(paused.stdout.splitlines()[-1]) == {"paused": "Approve a bill of 12?", "flow_id": "bill-2"}
    assert FlowStates(store_url).load("bill-2")[1] == "paused"
    done = _child(store_url, log, "resume", "bill-2", "Alice")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == "billed 12, approved by Alice"
    assert _ran(log) == ["fetch", "add", "size", "approve", "approve"]  # only the asking method ran again

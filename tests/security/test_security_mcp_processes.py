"""MCP stdio servers never outlive their agent: not a mute one, not a detached grandchild. Issue 19 item 10."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from chatagent.tools.base import make_tools  # noqa: E402
from tests.support.processes import alive  # noqa: E402

SERVER = str(Path(__file__).resolve().parents[1] / "support" / "mcp_servers" / "stubborn_server.py")


def _pids(pidfile: Path) -> list[int]:
    try:
        return [int(x) for x in pidfile.read_text().split()]
    except FileNotFoundError:
        return []


def _wait_dead(pids: list[int], wait: float = 15.0) -> list[int]:
    deadline = time.monotonic() + wait
    while any(map(alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@pytest.mark.timeout(90)
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_a_server_that_never_answers_ends_with_the_agent(tmp_path: Path, how: signal.Signals) -> None:
    pidfile = tmp_path / "pids"
    cfg = {"command": sys.executable, "args": [SERVER, str(pidfile), "mute"], "connect_timeout": 60}
    script = textwrap.dedent(
        f"""
        from chatagent.tools.base import make_tools
        make_tools([{{"mcpServers": {{"mute": {cfg!r}}}}}])
        """
    )
    agent = subprocess.Popen(
        [sys.executable, "-c", script],
        preexec_fn=lambda: [signal.signal(s, signal.SIG_DFL) for s in (signal.SIGINT, signal.SIGTERM)],
    )
    try:
        deadline = time.monotonic() + 30
        while not _pids(pidfile) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _pids(pidfile), "the server did not start"
        agent.send_signal(how)
        agent.wait(10)
        left = _wait_dead(_pids(pidfile))
    finally:
        _kill(_pids(pidfile))
        if agent.poll() is None:
            agent.kill()
    assert not left, "the MCP server is still running after its agent ended"


@pytest.mark.timeout(90)
def test_close_ends_a_detached_grandchild_of_a_server_that_ignores_sigterm(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    cfg = {"command": sys.executable, "args": [SERVER, str(pidfile), "detach"], "timeout": 5}
    tools = make_tools([{"mcpServers": {"stubborn": cfg}}])
    try:
        assert tools["stubborn-add"].call({"a": 2, "b": 3}) == "5"
        pids = _pids(pidfile)
        assert len(pids) == 2 and all(map(alive, pids))
        tools["stubborn-add"].close()
        left = _wait_dead(pids, wait=5.0)
    finally:
        _kill(_pids(pidfile))
    assert not left, "a process the MCP server started survived close()"

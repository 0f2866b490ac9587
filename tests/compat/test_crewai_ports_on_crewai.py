"""The same CrewAI port programs, imports renamed back, run on CrewAI itself against the same loopback model.

This checks the ports: a port that fails on CrewAI does not port CrewAI's behaviour. It needs the CrewAI
virtualenv the benchmarks make (`.venv/bin/python bench/_peers.py crewai`) and is skipped without it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.compat.crewai_ports import PORTS, as_crewai, load
from tests.compat.test_crewai_ports import setup_server
from tests.support import processes

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import _peers  # noqa: E402
from _venv import offline_env  # noqa: E402

CREWAI = _peers.PEERS["crewai"]
pytestmark = pytest.mark.skipif(
    not CREWAI.python().exists(), reason="no CrewAI venv (make it with: .venv/bin/python bench/_peers.py crewai)"
)


@pytest.mark.parametrize("name", PORTS)
def test_crewai_port_runs_on_crewai(name, protocol_server, tmp_path):
    port = load(name)
    skip = getattr(port, "CREWAI", "")
    if skip:
        pytest.skip(skip)
    work = tmp_path / "work"
    work.mkdir()
    script = tmp_path / f"{name}.py"
    script.write_text(as_crewai(Path(port.__file__).read_text()))
    setup_server(protocol_server, port)
    env = offline_env({**CREWAI.env, "CREWAI_STORAGE_DIR": str(tmp_path / "storage"), "HOME": str(tmp_path)})
    done = processes.run(
        [str(CREWAI.python()), str(script), protocol_server.base_url, str(work)],
        cwd=work, env=env, capture_output=True, text=True, timeout=300, input="",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert not protocol_server.rejected, f"sent what a strict server rejects: {protocol_server.rejected[0][1]}"
    assert protocol_server.pending == 0, f"{protocol_server.pending} scripted model decisions were never asked for"

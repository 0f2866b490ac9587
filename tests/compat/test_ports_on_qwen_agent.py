"""The same port programs, imports renamed back, run on Qwen-Agent 0.0.34 against the same loopback model.

This checks the ports themselves: a port that fails on Qwen-Agent does not port Qwen-Agent's behaviour. It
needs the Qwen-Agent virtualenv that the benchmarks make (`.venv/bin/python bench/_qwen_agent.py`) and is
skipped without it. A port may say why it cannot run there (`QWEN_AGENT = 'skip: ...'`, e.g. Qwen-Agent's
code interpreter needs Docker).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.compat.ports import PORTS, as_qwen_agent, load
from tests.compat.test_ports import setup_server
from tests.support import processes

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import _qwen_agent  # noqa: E402

pytestmark = pytest.mark.skipif(
    not _qwen_agent.python().exists(), reason="no Qwen-Agent venv (make it with: .venv/bin/python bench/_qwen_agent.py)"
)


@pytest.mark.parametrize("name", PORTS)
def test_port_runs_on_qwen_agent(name, protocol_server, resources, tmp_path):
    port = load(name)
    skip = getattr(port, "QWEN_AGENT", "")
    if skip:
        pytest.skip(skip)
    script = tmp_path / f"{name}.py"
    script.write_text(as_qwen_agent(Path(port.__file__).read_text()))
    setup_server(protocol_server, port, resources)
    env = _qwen_agent.offline_env({"QWEN_AGENT_DEFAULT_WORKSPACE": str(tmp_path / "workspace")})
    done = processes.run(
        [str(_qwen_agent.python()), str(script), protocol_server.base_url, str(resources)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert not protocol_server.rejected, f"sent what a strict server rejects: {protocol_server.rejected[0][1]}"
    assert protocol_server.pending == 0, f"{protocol_server.pending} scripted model decisions were never asked for"

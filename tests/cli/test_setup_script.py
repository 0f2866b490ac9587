"""scripts/setup.sh (what `make run` and `make test` run first) as a real process: it says what the first run
installs and how long it takes, shows its steps instead of pip's output, and on a failure shows pip's last lines."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import default_signals

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_first_run_says_what_it_installs_and_shows_steps_not_pip_output(tmp_path: Path) -> None:
    """Issue 43.16: `make run` printed 194 lines of pip's warnings and no word of what it installs or how long
    it takes. Offline (no package index: the install of chatagent fails, as it does without a network) the script
    has said what it will install, shown its steps, kept pip's output in a log and shown that log's end."""
    venv = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    # nothing is fetched (no index, no pip.conf and its find-links): no network, the same failure everywhere
    env.update(PIP_NO_INDEX="1", PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1")
    out = subprocess.run(["bash", "scripts/setup.sh", sys.executable, str(venv)], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=240, **default_signals())  # fmt: skip
    assert out.returncode == 1, (out.stdout, out.stderr)
    lines = out.stdout.splitlines()
    assert lines[0].startswith(f"setup: the first run makes the virtualenv {venv} with chatagent, every extra")
    assert "1.7 GB" in out.stdout and "minutes" in out.stdout, out.stdout
    assert [line.split(" (")[0] for line in lines if line.startswith("setup [")] == [
        "setup [1/4] the virtualenv",
        "setup [2/4] chatagent and every extra",
    ], out.stdout
    log = venv / "setup.log"
    assert "setup: pip failed: pip install -e .[rag," in out.stderr and f"the end of {log}:" in out.stderr
    pip_said = log.read_text()
    assert pip_said.strip() and pip_said.strip().splitlines()[-1] in out.stderr  # the log's end is shown
    assert len(out.stdout.splitlines()) + len(out.stderr.splitlines()) < 40, (out.stdout, out.stderr)

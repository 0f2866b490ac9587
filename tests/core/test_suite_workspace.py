"""The test suite works in a temporary workspace of its own, never in the user's ~/.cache/chatagent."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from chatagent.utils.workspace import workspace_root
from tests.support import processes


def test_the_suite_and_the_processes_it_starts_use_a_temporary_workspace() -> None:
    home_cache = Path.home() / ".cache" / "chatagent"
    here = workspace_root()
    assert here != home_cache and here.is_relative_to(tempfile.gettempdir()), here
    child = processes.run(
        [sys.executable, "-c", "from chatagent.utils.workspace import workspace_root; print(workspace_root())"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert Path(child.stdout.strip()) == here
    assert "CHATAGENT_SESSION_STORE" not in os.environ

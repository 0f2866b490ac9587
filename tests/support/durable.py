"""Processes running tests/support/durable_child.py (a tool-calling agent on a stored session), to be killed with
SIGKILL mid-turn; the `children` fixture of tests/sessions/conftest.py starts them and kills what is left."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

from tests.support.postgres import default_signals

CHILD = Path(__file__).resolve().parent / "durable_child.py"
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


def ledger_lines(ledger: Path, suffix: str = "") -> list[str]:
    path = Path(str(ledger) + suffix)
    return path.read_text().splitlines() if path.exists() else []

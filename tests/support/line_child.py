"""A Python script in a child process that answers in JSON lines, read on a thread so that a test can wait for the
next one with a deadline (tests/support/durable_child.py, tests/support/session_child.py)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from tests.support import processes

DEADLINE = 60.0


class LineChild:
    """`script` with `args` in a process of its own (stdin a pipe when `stdin`); `next_line(what)` is its next JSON
    line, or an AssertionError saying `what` did not come (within DEADLINE, or the child ended: its stderr)."""

    def __init__(self, script: Path, *args: str, stdin: bool = False) -> None:
        self.p = processes.popen(
            [sys.executable, str(script), *args], stdin=subprocess.PIPE if stdin else None, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.p.stdout:  # type: ignore[union-attr]
            self.lines.put(line)
        self.lines.put("")

    def next_line(self, what: str) -> dict[str, Any]:
        try:
            line = self.lines.get(timeout=DEADLINE)
        except queue.Empty:
            raise AssertionError(f"no {what} from the child within {DEADLINE} s") from None
        if not line:
            raise AssertionError(f"the child ended: {self.p.stderr.read()[-3000:]}")  # type: ignore[union-attr]
        return json.loads(line)

    def kill(self) -> None:
        self.p.kill()
        self.p.wait(DEADLINE)

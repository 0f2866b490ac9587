"""Processes running tests/support/durable_child.py (a tool-calling agent on a stored session), to be killed with
SIGKILL mid-turn; the `children` fixture of tests/sessions/conftest.py starts them and kills what is left."""

from __future__ import annotations

from pathlib import Path

from tests.support.line_child import DEADLINE, LineChild

CHILD = Path(__file__).resolve().parent / "durable_child.py"


class Child(LineChild):
    """tests/support/durable_child.py in a process of its own; `wait_for(key)` reads its JSON lines until one has
    `key`."""

    def __init__(self, *args: str) -> None:
        super().__init__(CHILD, *args)

    def wait_for(self, key: str) -> dict:
        while True:
            obj = self.next_line(repr(key))
            if key in obj:
                return obj
            assert "error" not in obj, obj

    def finish(self) -> None:
        if self.p.poll() is None:
            self.p.wait(DEADLINE)


def ledger_lines(ledger: Path, suffix: str = "") -> list[str]:
    path = Path(str(ledger) + suffix)
    return path.read_text().splitlines() if path.exists() else []

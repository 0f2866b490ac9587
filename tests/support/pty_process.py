"""A child process on a pseudo-terminal, as a person runs a command: what it writes to the terminal is read raw
(control sequences included), and lines are typed into it. Every wait has a deadline."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import time
from pathlib import Path


class PtyProcess:
    """`python -m chatagent ARGS` (or `argv`) on a pty; `out` holds every byte it wrote so far."""

    def __init__(self, args: list[str], env: dict[str, str], umask: int | None = None) -> None:
        master, slave = pty.openpty()
        self.master = master
        root = Path(__file__).resolve().parents[2]

        def setup() -> None:
            os.setsid()
            if umask is not None:
                os.umask(umask)

        self.p = subprocess.Popen(
            [sys.executable, "-m", "chatagent", *args], stdin=slave, stdout=slave, stderr=slave, env=env, cwd=root,
            preexec_fn=setup, close_fds=True,
        )  # fmt: skip
        os.close(slave)
        os.set_blocking(master, False)
        self.out = b""

    def _read(self) -> None:
        try:
            while chunk := os.read(self.master, 65536):
                self.out += chunk
        except (BlockingIOError, OSError):
            pass

    def read_until(self, marker: bytes, timeout: float = 60) -> bytes:
        """Everything written so far, once `marker` has appeared after what earlier calls consumed."""
        end = time.monotonic() + timeout
        while marker not in self.out:
            if time.monotonic() > end or (self.p.poll() is not None and not self._peek()):
                raise AssertionError(f"no {marker!r} in the terminal output:\n{self.out.decode(errors='replace')}")
            self._read()
            time.sleep(0.02)
        return self.out

    def _peek(self) -> bool:
        before = len(self.out)
        self._read()
        return len(self.out) > before

    def send(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\r")

    def close(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(10)
        os.close(self.master)

"""A sandbox's processes seen from the host: starting them, waiting for one to end, finding what is left.

Every session's first process is started from one long-lived thread (`spawn`), because bubblewrap's
--die-with-parent and the reaper's parent-death signal fire when the *thread* that started them ends.
"""

from __future__ import annotations

import os
import queue
import select
import subprocess
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    # a start of a process, where its result (or exception) goes, and the event set once it is there
    _Job = tuple[Callable[[], subprocess.Popen[bytes]], list[subprocess.Popen[bytes] | BaseException], threading.Event]


class _Spawner:
    """Starts every sandbox from one long-lived thread.

    bubblewrap's --die-with-parent and the reaper's parent-death signal (PR_SET_PDEATHSIG) fire when the
    *thread* that started them ends, and tools often run in short-lived worker threads.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def popen(self, start: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
        """What `start()` returns, called on the spawner's thread (so the process it starts is that thread's)."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name="chatagent-sandbox-spawner", daemon=True)
                self._thread.start()
        done = threading.Event()
        box: list[subprocess.Popen[bytes] | BaseException] = []
        self._jobs.put((start, box, done))
        done.wait()
        if isinstance(box[0], BaseException):
            raise box[0]
        return box[0]

    def _serve(self) -> None:
        while True:
            start, box, done = self._jobs.get()
            try:
                box.append(start())
            except BaseException as e:  # handed to the caller's thread
                box.append(e)
            done.set()


spawn = _Spawner().popen


def pid_namespace(pid: int) -> str:
    """The pid namespace of process `pid` (its /proc link), or '' if it has ended."""
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return ""


def pid_namespace_members(ns: str) -> list[int]:
    """Every process in the pid namespace `ns`."""
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and pid_namespace(int(p)) == ns]


def exit_code(proc: subprocess.Popen[bytes], wait: float = 2.0) -> int | None:
    """The exit code of a process that is ending, waiting up to `wait` seconds (None if it has not ended).

    Waits on a pidfd where there is one: Popen.wait(timeout) polls with sleeps of up to 50 ms.
    """
    if proc.poll() is not None:
        return proc.returncode
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        fd = -1
    if fd >= 0:
        try:
            select.select([fd], [], [], wait)
        finally:
            os.close(fd)
    try:
        return proc.wait(timeout=0 if fd >= 0 else wait)
    except subprocess.TimeoutExpired:
        return None

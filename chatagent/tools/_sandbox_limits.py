"""Per-session limits of a sandbox (`Limits`): memory and CPU time counted over all of the session's processes.

Where the kernel lets us make a cgroup for the session (root, with cgroup v2 or v1 mounted), the session's
processes are put in it: a memory cgroup limits their memory together (the kernel's OOM killer acts inside the
session only), and the cgroup counts the CPU time of every process that ever ran in it. Where it does not,
the session's processes are found in /proc (by their uid, or by their pid namespace) and their memory (PSS)
and CPU time (their own plus their reaped children's) are summed. A watchdog thread checks the running
sessions every `INTERVAL` seconds and kills a session that is over its CPU time, or over its memory when no
cgroup limits it; the session then restarts and says why.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Protocol

logger = logging.getLogger("chatagent.tools")

INTERVAL = 0.2
_CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass
class Limits:
    """Resource limits of one sandbox session. Sizes in MB; None means no limit."""

    memory_mb: int | None = 1024  # all the session's processes together (each one also gets it as address space)
    cpu_seconds: int | None = 600  # all the session's processes together, from each (re)start
    max_processes: int | None = 64
    max_file_mb: int | None = 256  # one file
    max_disk_mb: int | None = 512  # the work directory and /dev/shm together (bubblewrap: the sizes of their tmpfs)
    max_output_chars: int = 20_000
    keep_processes: bool = False  # let processes a call started run on after it (they end with the session)
    startup_timeout: float = 30.0


def _read(path: str) -> str:
    with open(path, encoding="ascii", errors="replace") as f:
        return f.read()


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as f:
        f.write(text)


def _own_cgroup_dirs() -> dict[str, str]:
    """This process's cgroup directories: 'v2' for the unified hierarchy, 'memory' for the v1 memory one."""
    own: dict[str, str] = {}
    for line in _read("/proc/self/cgroup").splitlines():
        hid, controllers, path = line.split(":", 2)
        if hid == "0" and controllers == "":
            own["v2"] = path
        elif "memory" in controllers.split(","):
            own["memory"] = path
    dirs: dict[str, str] = {}
    for line in _read("/proc/self/mountinfo").splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        root, mount_point, fstype, options = fields[3], fields[4], tail[0], tail[2].split(",")
        key = "v2" if fstype == "cgroup2" else "memory" if fstype == "cgroup" and "memory" in options else None
        if key is None or key in dirs or key not in own:
            continue
        path = own[key]
        if root != "/" and (path == root or path.startswith(root + "/")):
            path = path[len(root) :]
        elif root != "/":
            continue
        dirs[key] = mount_point + path.rstrip("/")
    return dirs


def cgroup_name(uid: int | None) -> str:
    """The name of the cgroups of the session that has `uid` (only root makes cgroups, and then has a uid)."""
    return f"chatagent-sandbox-{uid}"


def remove_stale_cgroups(name: str) -> bool:
    """Remove the (empty) cgroups of that name left by a session whose agent was killed; whether none is left."""
    try:
        parents = _own_cgroup_dirs()
    except OSError:
        return True
    gone = True
    for parent in parents.values():
        try:
            os.rmdir(os.path.join(parent, name))
        except FileNotFoundError:
            pass
        except OSError:  # not empty yet
            gone = False
    return gone


class SessionCgroup:
    """The cgroups of one sandbox session (whichever of v2 and v1-memory the kernel lets us make)."""

    def __init__(self, name: str, memory_bytes: int | None) -> None:
        self.dirs: dict[str, str] = {}
        self.memory_limited = False
        try:
            parents = _own_cgroup_dirs() if os.geteuid() == 0 else {}
        except OSError:
            parents = {}
        for key, parent in parents.items():
            path = os.path.join(parent, name)
            try:
                try:
                    os.mkdir(path)
                except FileExistsError:  # left by a session that ended abruptly (then it is empty)
                    os.rmdir(path)
                    os.mkdir(path)
            except OSError:
                continue
            self.dirs[key] = path
        if memory_bytes is None:
            return
        v2 = self.dirs.get("v2")
        if v2 and os.path.exists(os.path.join(v2, "memory.max")):
            self.memory_limited = self._set(v2, "memory.max", str(memory_bytes))
            self._set(v2, "memory.swap.max", "0")
        elif "memory" in self.dirs:
            v1 = self.dirs["memory"]
            self.memory_limited = self._set(v1, "memory.limit_in_bytes", str(memory_bytes))
            self._set(v1, "memory.memsw.limit_in_bytes", str(memory_bytes))

    @staticmethod
    def _set(directory: str, name: str, value: str) -> bool:
        try:
            _write(os.path.join(directory, name), value)
            return True
        except OSError:
            return False

    @property
    def counts_cpu(self) -> bool:
        return "v2" in self.dirs

    def add(self, pids: list[int]) -> None:
        """Move `pids` into the session's cgroups (while none of them can fork: before any model code runs)."""
        for directory in self.dirs.values():
            for pid in pids:
                try:
                    _write(os.path.join(directory, "cgroup.procs"), str(pid))
                except OSError:  # gone already
                    pass

    def cpu_seconds(self) -> float:
        for line in _read(os.path.join(self.dirs["v2"], "cpu.stat")).splitlines():
            if line.startswith("usage_usec "):
                return int(line.split()[1]) / 1e6
        return 0.0

    def oom_kills(self) -> int:
        """How many processes the kernel killed for the session's memory limit."""
        if not self.memory_limited:
            return 0
        v2 = self.dirs.get("v2")
        if v2 and os.path.exists(os.path.join(v2, "memory.events")):
            directory, name = v2, "memory.events"
        else:
            directory, name = self.dirs["memory"], "memory.oom_control"
        try:
            for line in _read(os.path.join(directory, name)).splitlines():
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
        except OSError:
            pass
        return 0

    def remove(self) -> None:
        """Remove the cgroups (once the session's processes are gone)."""
        for directory in self.dirs.values():
            for _ in range(50):
                try:
                    os.rmdir(directory)
                    break
                except FileNotFoundError:
                    break
                except OSError:  # processes still exiting
                    time.sleep(0.02)
        self.dirs = {}


def sampled_usage(pids: list[int]) -> tuple[int, float]:
    """(memory in bytes, CPU seconds) of `pids`: the sum of their PSS, and of their own and reaped children's
    CPU times (a process's finished children count in its own figures, so nothing is counted twice)."""
    memory, ticks = 0, 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            ticks += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
            memory += _pss(pid)
        except (OSError, ValueError, IndexError):
            continue
    return memory, ticks / _CLK_TCK


def _pss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    with open(f"/proc/{pid}/statm", "rb") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Watched(Protocol):
    """What the watchdog watches: a sandbox session."""

    def check_limits(self) -> None: ...


class Watchdog:
    """One thread that calls every watched session's `check_limits()` every `INTERVAL` seconds."""

    def __init__(self) -> None:
        self._watched: weakref.WeakSet[Watched] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, session: Watched) -> None:
        """Check `session` (an object with `check_limits()`) until `unwatch`."""
        with self._lock:
            self._watched.add(session)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="chatagent-sandbox-limits", daemon=True)
                self._thread.start()
        self._wake.set()

    def unwatch(self, session: Watched) -> None:
        with self._lock:
            self._watched.discard(session)

    def _loop(self) -> None:
        while True:
            with self._lock:
                sessions = list(self._watched)
            if not sessions:
                self._wake.wait(5.0)
                self._wake.clear()
                continue
            for s in sessions:
                try:
                    s.check_limits()
                except Exception:  # a session that went away meanwhile; never let the thread die
                    logger.debug("checking a sandbox's limits failed", exc_info=True)
            time.sleep(INTERVAL)


WATCHDOG = Watchdog()

"""A sandboxed, persistent Python process for the code interpreter.

`Sandbox(work_dir, limits)` starts `_sandbox_kernel.py` in a separate process and runs cells in it
(`run(code, timeout)`); variables persist until `close()`. What isolates it:

- **bubblewrap** (the `bwrap` command, Debian package ``bubblewrap``), when it is installed and can create
  namespaces: own network namespace (no network at all, not even the host's 127.0.0.1), own pid namespace
  (the host's processes are invisible; killing the sandbox kills every process in it), a read-only view of
  only the system and Python directories, and the work directory as the only writable place.
- **otherwise a plain child process** ("process" mode): the kernel still tries to enter a new network
  namespace (which works as root or where unprivileged user namespaces are allowed); the filesystem is
  NOT confined (the code can write wherever the user it runs as can) and the host's processes are visible.

In both modes: a separate process in its own session, no inherited environment variables (API keys stay
out), resource limits set in the child before any model code runs (address space, CPU seconds, processes,
file size, open files), output capped, a wall-clock limit per cell (the kernel interrupts the cell; if it
does not answer in time the whole process tree is killed and the session restarts). When we are root the
sandbox runs as its own unprivileged uid, so the process limit counts only the sandbox's processes.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import queue
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger("chatagent.tools")

_KERNEL_SOURCE: str | None = None
_LIVE: weakref.WeakSet[Sandbox] = weakref.WeakSet()
_UID_BASE = 1_900_000_000  # uids for sandboxes when we are root: far above any real account
_uid_counter = 0
_uid_lock = threading.Lock()
_BWRAP_BROKEN: str | None = None  # why bubblewrap failed here once (then "auto" uses process mode)


class SandboxError(RuntimeError):
    """The sandbox could not be started (a message the user can act on)."""


@dataclass
class Limits:
    """Resource limits of one sandbox. Sizes in MB; None means no limit."""

    memory_mb: int | None = 1024
    cpu_seconds: int | None = 600
    max_processes: int | None = 64
    max_file_mb: int | None = 256
    max_output_chars: int = 20_000
    startup_timeout: float = 30.0


class _Spawner:
    """Starts every sandbox from one long-lived thread.

    bubblewrap's --die-with-parent (PR_SET_PDEATHSIG) fires when the *thread* that started it ends, and tools
    often run in short-lived worker threads: the sandbox would be killed as soon as that thread returned.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def popen(self, argv: list[str], **kwargs: Any) -> subprocess.Popen:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name="chatagent-sandbox-spawner", daemon=True)
                self._thread.start()
        done = threading.Event()
        box: list = []
        self._jobs.put((argv, kwargs, box, done))
        done.wait()
        if isinstance(box[0], BaseException):
            raise box[0]
        return box[0]

    def _serve(self) -> None:
        while True:
            argv, kwargs, box, done = self._jobs.get()
            try:
                box.append(subprocess.Popen(argv, **kwargs))
            except BaseException as e:  # handed to the caller's thread
                box.append(e)
            done.set()


_spawn = _Spawner().popen


def bwrap_path() -> str | None:
    """The bubblewrap executable, or None if it is not installed."""
    return shutil.which("bwrap")


def _kernel_source() -> str:
    global _KERNEL_SOURCE
    if _KERNEL_SOURCE is None:
        _KERNEL_SOURCE = (Path(__file__).with_name("_sandbox_kernel.py")).read_text(encoding="utf-8")
    return _KERNEL_SOURCE


def _next_uid() -> int:
    global _uid_counter
    with _uid_lock:
        _uid_counter += 1
        return _UID_BASE + (os.getpid() % 100_000) * 1000 + _uid_counter % 1000


def _user_process_count(uid: int) -> int:
    """How many processes `uid` has now (RLIMIT_NPROC counts them all, not just the sandbox's)."""
    n = 0
    try:
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    if os.stat(f"/proc/{name}").st_uid == uid:
                        n += 1
                except OSError:
                    pass
    except OSError:
        return 0
    return n


def _world_accessible(path: str, read: bool = True) -> bool:
    """Whether every directory on the way to `path` can be entered (and `path` read) by any user."""
    p = Path(path).resolve()
    for part in reversed(p.parents):
        try:
            if not part.stat().st_mode & 0o001:
                return False
        except OSError:
            return False
    return not read or bool(p.stat().st_mode & 0o004)


def _ro_paths() -> list[str]:
    """The directories the sandbox sees read-only: the system's and this Python's."""
    paths = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc/alternatives"]
    paths += ["/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/fonts"]
    exe = os.path.realpath(sys.executable)
    python_dirs = {sys.base_prefix, sys.prefix, sys.exec_prefix, os.path.dirname(os.path.dirname(exe))}
    python_dirs.update(p for p in sys.path if p and os.path.isdir(p) and "site-packages" in p)
    out: list[str] = []
    for p in paths + sorted(python_dirs):
        if os.path.lexists(p) and not any(p == q or p.startswith(q.rstrip("/") + "/") for q in out):
            out.append(p)
    return out


class Sandbox:
    """One persistent, isolated Python process with its own work directory.

    Args:
        work_dir: the only writable directory (created if missing).
        limits: resource limits.
        mode: 'auto' (bubblewrap when it works, else a plain process), 'bwrap' (required) or 'process'.
        python: the interpreter to run (default: this one, so its installed packages are available).
    """

    def __init__(
        self, work_dir: str | os.PathLike, limits: Limits | None = None, mode: str = "auto", python: str | None = None
    ) -> None:
        if mode not in ("auto", "bwrap", "process"):
            raise ValueError(f"sandbox mode must be 'auto', 'bwrap' or 'process', got {mode!r}")
        self.work_dir = str(Path(work_dir).resolve())
        self.limits = limits or Limits()
        self.requested_mode = mode
        self.python = python or sys.executable
        self.mode = ""
        self.status: dict = {}
        self._proc: subprocess.Popen | None = None
        self._buf = b""
        self._cell = 0
        self._lock = threading.Lock()
        self._uid: int | None = None
        _LIVE.add(self)

    # ---- lifecycle ----------------------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start the kernel (if not running)."""
        global _BWRAP_BROKEN
        if self.alive:
            return
        self.close()
        os.makedirs(self.work_dir, mode=0o700, exist_ok=True)
        want_bwrap = self.requested_mode == "bwrap" or (self.requested_mode == "auto" and _BWRAP_BROKEN is None)
        if want_bwrap and bwrap_path() is None:
            if self.requested_mode == "bwrap":
                raise SandboxError("bubblewrap (bwrap) is not installed: apt-get install bubblewrap")
            want_bwrap = False
        if want_bwrap:
            try:
                self._launch(bwrap=True)
                return
            except SandboxError as e:
                if self.requested_mode == "bwrap":
                    raise
                _BWRAP_BROKEN = str(e)
                logger.warning("bubblewrap cannot create a sandbox here (%s); using a plain child process", e)
        self._launch(bwrap=False)

    def _launch(self, bwrap: bool) -> None:
        root = os.geteuid() == 0
        lim = self.limits
        config: dict[str, Any] = {
            "work_dir": self.work_dir,
            "memory_mb": lim.memory_mb,
            "cpu_seconds": lim.cpu_seconds,
            "max_file_mb": lim.max_file_mb,
            "pid_namespace": bwrap,
            "unshare_net": not bwrap,
        }
        # without bubblewrap another uid must reach the interpreter and the work directory on the real filesystem
        drop = root and (bwrap or (_world_accessible(self.python) and _world_accessible(self.work_dir, read=False)))
        if drop:
            self._uid = self._uid or _next_uid()
            config["uid"] = config["gid"] = self._uid
            os.chown(self.work_dir, self._uid, self._uid)
            os.chmod(self.work_dir, 0o700)
            base = 1  # the kernel itself
        else:
            base = _user_process_count(os.getuid()) + 1
        if lim.max_processes is not None:
            config["nproc"] = base + lim.max_processes
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": self.work_dir,
            "TMPDIR": self.work_dir,
            "LANG": "C.UTF-8",
            "PYTHONIOENCODING": "utf-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "MPLBACKEND": "Agg",
            "MPLCONFIGDIR": os.path.join(self.work_dir, ".matplotlib"),
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
        }
        kernel = [self.python, "-I", "-c", _kernel_source(), json.dumps(config)]
        if bwrap:
            argv = [bwrap_path() or "bwrap", "--die-with-parent", "--new-session"]
            argv += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
            if not root:
                argv += ["--unshare-user"]
            ro = _ro_paths()
            parents = {str(a) for d in [*ro, self.work_dir] for a in Path(d).parents if str(a) != "/"}
            for d in sorted(parents, key=lambda a: a.count("/")):
                argv += ["--perms", "0755", "--dir", d]  # bwrap would create them 0700: unusable after the uid drop
            for p in ro:
                if os.path.islink(p):
                    argv += ["--symlink", os.readlink(p), p]
                else:
                    argv += ["--ro-bind", p, p]
            argv += ["--dev", "/dev", "--proc", "/proc", "--bind", self.work_dir, self.work_dir]
            argv += ["--chdir", self.work_dir, "--remount-ro", "/", "--"]
            argv += kernel
        else:
            argv = kernel
        try:
            self._proc = _spawn(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=self.work_dir,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as e:
            raise SandboxError(f"cannot start the sandbox: {e}") from e
        self._buf = b""
        try:
            ready = self._read_reply(time.monotonic() + lim.startup_timeout)
        except SandboxError:
            err = self._stderr_text()
            self.close()
            raise SandboxError(f"the sandbox did not start: {err or 'no message'}") from None
        if not ready.get("ready"):
            self.close()
            raise SandboxError(f"the sandbox did not start: unexpected first message {ready!r:.200}")
        self.mode = "bwrap" if bwrap else "process"
        self.status = ready
        self._proc.stderr.close()  # type: ignore[union-attr]  # the kernel points its fd 2 at /dev/null

    def _stderr_text(self) -> str:
        proc = self._proc
        if proc is None or proc.stderr is None:
            return ""
        try:
            if proc.poll() is None:
                proc.kill()
            proc.wait(2)
            return proc.stderr.read(2000).decode("utf-8", "replace").strip()
        except (OSError, ValueError, subprocess.TimeoutExpired):
            return ""

    def close(self) -> None:
        """Kill the kernel and every process it started. The work directory is kept."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        # every descendant (processes in the sandbox's pid namespace have host pids too), the process group,
        # and when the sandbox has its own uid every process of that uid
        victims = _descendants(proc.pid) | (_processes_of(self._uid) if self._uid is not None else set())
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            proc.kill()
        except OSError:
            pass
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            logger.warning("sandbox process %d did not exit after SIGKILL", proc.pid)
        _wait_gone(victims - {proc.pid}, 3.0)
        for f in (proc.stdin, proc.stdout, proc.stderr):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass

    # ---- running code -------------------------------------------------------------------------------------

    def run(self, code: str, timeout: float = 30.0) -> dict:
        """Run `code`; the kernel's reply dict (stdout, stderr, result, error, error_kind, figures, dropped).

        `error_kind` is one of None, 'syntax', 'exception', 'timeout', 'memory', 'output', 'crashed'.
        A reply with `restarted=True` means the process was killed and the next call starts afresh.
        """
        with self._lock:
            self.start()
            self._cell += 1
            request = {"code": code, "cell": self._cell, "timeout": timeout, "max_output": self.limits.max_output_chars}
            data = (json.dumps(request, ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass")
            grace = 2.0 + timeout * 0.1
            try:
                assert self._proc is not None and self._proc.stdin is not None
                self._proc.stdin.write(data)
                self._proc.stdin.flush()
                return self._read_reply(time.monotonic() + timeout + grace)
            except (OSError, SandboxError) as e:
                timed_out = isinstance(e, SandboxError) and "no reply" in str(e)
                code_ = None if timed_out or self._proc is None else _exit_code(self._proc)
                self.close()
                if timed_out:
                    error = (
                        f"Timeout: the code did not stop within {timeout:g} seconds and did not answer the interrupt; "
                        "the sandbox was killed and restarted, so all variables are lost."
                    )
                    kind = "timeout"
                else:
                    why = _death_reason(code_)
                    cause = "the sandbox's memory, CPU-time or process limit, or a crash"
                    if why == " (SIGXCPU)":
                        cause = f"it used up the session's CPU time limit of {self.limits.cpu_seconds} s"
                    error = f"The Python process died{why} ({cause}); it was restarted, so all variables are lost."
                    kind = "crashed"
                return {"stdout": "", "stderr": "", "result": None, "error": error, "error_kind": kind, "figures": [],
                        "restarted": True}  # fmt: skip

    def _read_reply(self, deadline: float) -> dict:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        fd = proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SandboxError("no reply in time")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise SandboxError("the process ended")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        try:
            return json.loads(line)
        except ValueError as e:
            raise SandboxError(f"unreadable reply from the sandbox: {e}") from None


def _proc_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) for every process visible in /proc."""
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
                table[int(name)] = (int(fields[1]), fields[0].decode())
            except (OSError, IndexError, ValueError):
                pass
    return table


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in _proc_table().items():
        children.setdefault(ppid, []).append(pid)
    out, todo = set(), [root]
    while todo:
        pid = todo.pop()
        for c in children.get(pid, ()):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def _processes_of(uid: int) -> set[int]:
    out = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid == uid:
                    out.add(int(name))
            except OSError:
                pass
    return out


def _wait_gone(pids: set[int], timeout: float) -> None:
    """Wait until the killed `pids` are gone (or zombies), so none outlives `close()`."""
    deadline = time.monotonic() + timeout
    while pids and time.monotonic() < deadline:
        table = _proc_table()
        pids = {p for p in pids if p in table and table[p][1] != "Z"}
        if pids:
            time.sleep(0.01)


def _exit_code(proc: subprocess.Popen, wait: float = 2.0) -> int | None:
    """The exit code of a process whose output just ended: it may take a moment to be reaped."""
    try:
        return proc.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        return None


def _death_reason(returncode: int | None) -> str:
    """' (SIGNAME)' for a process killed by a signal (bubblewrap reports its child's as 128 + n), else ''."""
    if returncode is None or 0 <= returncode <= 128:
        return ""
    num = -returncode if returncode < 0 else returncode - 128
    try:
        return f" ({signal.Signals(num).name})"
    except ValueError:
        return f" (signal {num})"


def isolation_summary(sandbox: Sandbox) -> str:
    """One plain sentence on what the sandbox's isolation guarantees."""
    if sandbox.mode == "bwrap":
        return (
            "Sandbox: bubblewrap (no network, host processes hidden, only the work directory writable, "
            "no inherited environment, CPU/memory/process/output limits)."
        )
    net = sandbox.status.get("network")
    net_text = f"no network ({net})" if net else "network NOT blocked"
    procs = "process-count limit NOT enforced (runs as root)" if sandbox.status.get("uid") == 0 else "process limit"
    return (
        f"Sandbox: plain child process because bubblewrap is unavailable — {net_text}; the filesystem is NOT "
        "confined to the work directory; host processes are visible; environment cleared; CPU/memory/output "
        f"limits and {procs}."
    )


@atexit.register
def close_all() -> None:
    """Kill every live sandbox (run at interpreter exit)."""
    for sb in list(_LIVE):
        try:
            sb.close()
        except Exception:  # at exit: never let one failure keep the others alive
            logger.debug("closing a sandbox failed", exc_info=True)


__all__ = ["Limits", "Sandbox", "SandboxError", "bwrap_path", "close_all", "isolation_summary"]

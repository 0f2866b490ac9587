"""A sandboxed, persistent Python process for the code interpreter.

`Sandbox()` starts `_sandbox_kernel.py` in an isolated process and runs cells in it (`run(code, timeout)`);
variables persist until `close()`, which also ends every process of the session and removes its files.
Two modes, and no silent fallback between them (`SandboxError` says how to get a working one):

- **bubblewrap** (`'auto'`, the default, or `'bwrap'`): no network (own network namespace), own pid namespace,
  a read-only view of only the system and Python directories, and a private work directory: a tmpfs of
  `max_disk_mb` inside the sandbox (the host never reads or writes the session's files by path). As root the
  code runs as a uid of its own, leased so that no other live session has it; otherwise in a user namespace.
- **process** (`'process'`, an explicit opt-in, root only): a plain child process under a reaper, running as a
  leased uid of its own, in a work directory on the host. The filesystem is not confined (the code reads what
  any user can and writes world-writable directories), host processes are visible (not their memory or
  environment), and the work directory has no size limit.

In both modes: no inherited environment, no new privileges (setuid programs give none), limits set before
any model code runs, memory and CPU time limited per session (`chatagent.tools._sandbox_limits`), every
process a call started ended when it returns (unless `keep_processes`), a wall-clock limit per cell, and a
kernel that nothing the host receives from is trusted (`chatagent.tools._sandbox_protocol`).
"""

from __future__ import annotations

import atexit
import functools
import json
import logging
import os
import queue
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from chatagent.tools import _sandbox_protocol as protocol
from chatagent.tools._reaper import descendants
from chatagent.tools._sandbox_fs import make_dir, open_host_file, remove_tree
from chatagent.tools._sandbox_limits import WATCHDOG, SessionCgroup, cgroup_name, sampled_usage
from chatagent.tools._sandbox_protocol import Channel, ProtocolError, RunReply
from chatagent.tools._sandbox_uids import UidLease, is_sandbox_uid, lease_uid, processes_of_uid, uid_of

if TYPE_CHECKING:
    from collections.abc import Callable

    # a start of a process, where its result (or exception) goes, and the event set once it is there
    _Job = tuple[Callable[[], subprocess.Popen[bytes]], list[subprocess.Popen[bytes] | BaseException], threading.Event]

logger = logging.getLogger("chatagent.tools")

SANDBOX_DIR = "/sandbox"  # the work directory's path inside bubblewrap
SHM_MB = 16  # /dev/shm inside bubblewrap (POSIX semaphores for multiprocessing)
_KERNEL = Path(__file__).with_name("_sandbox_kernel.py")
_REAPER = str(Path(__file__).with_name("_reaper.py"))
_LIVE: weakref.WeakSet[Sandbox] = weakref.WeakSet()
HOW_TO_ISOLATE = (
    "The code interpreter does not run model code without isolation. Install bubblewrap "
    "(Debian/Ubuntu: apt-get install bubblewrap) where it can create namespaces (in a container: allow user "
    "namespaces, or run it with --privileged / a seccomp profile that permits unshare), or opt in to the weaker "
    "process mode with {'sandbox': 'process'} (root only: the code runs as a uid of its own but is not "
    "confined to its directory)."
)


class SandboxError(RuntimeError):
    """The sandbox could not be started (a message the user can act on)."""


@dataclass
class Limits:
    """Resource limits of one sandbox session. Sizes in MB; None means no limit."""

    memory_mb: int | None = 1024  # all the session's processes together (each one also gets it as address space)
    cpu_seconds: int | None = 600  # all the session's processes together, from each (re)start
    max_processes: int | None = 64
    max_file_mb: int | None = 256  # one file
    max_disk_mb: int | None = 512  # the work directory (bubblewrap: the size of its tmpfs)
    max_output_chars: int = 20_000
    keep_processes: bool = False  # let processes a call started run on after it (they end with the session)
    startup_timeout: float = 30.0


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


_spawn = _Spawner().popen


def bwrap_path() -> str | None:
    """The bubblewrap executable, or None if it is not installed."""
    return shutil.which("bwrap")


@functools.cache
def _kernel_source() -> str:
    return _KERNEL.read_text(encoding="utf-8")


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
        work_dir: process mode only: the session's directory on the host, created at the first start (it must
            not exist; its parent must be reachable by other users) and removed by `close()`. Default: a new
            directory under a new temporary directory. bubblewrap keeps the session's files inside the sandbox.
        limits: resource limits (per session).
        mode: 'auto' or 'bwrap' (bubblewrap, required), or 'process' (the explicit opt-in; root only).
        python: the interpreter to run (default: this one, so its installed packages are available).
    """

    def __init__(
        self,
        work_dir: str | os.PathLike[str] | None = None,
        limits: Limits | None = None,
        mode: str = "auto",
        python: str | None = None,
    ) -> None:
        if mode not in ("auto", "bwrap", "process"):
            raise ValueError(f"sandbox mode must be 'auto', 'bwrap' or 'process', got {mode!r}")
        self.limits = limits or Limits()
        self.requested_mode = mode
        self.python = python or sys.executable
        self.mode = ""
        self.status: dict[str, object] = {}
        self._host_dir = str(Path(work_dir).absolute()) if work_dir is not None else None
        self._temp_parent: str | None = None
        self._dir_made = False
        self._proc: subprocess.Popen[bytes] | None = None
        self._channel: Channel | None = None
        self._cgroup: SessionCgroup | None = None
        self._lease: UidLease | None = None
        self._pidns = ""
        self._cell = 0
        self._seq = 0
        self._delivered: set[str] = set()
        self._limit_hit: str | None = None
        self._clean = True  # no process of the session was left when it was last stopped
        self._lock = threading.RLock()
        _LIVE.add(self)

    # ---- lifecycle ----------------------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def uid(self) -> int | None:
        """The session's own uid (as root), or None (a user namespace of the agent's user)."""
        return self._lease.uid if self._lease is not None else None

    @property
    def cgroup_limits_memory(self) -> bool:
        """Whether a cgroup enforces the session's memory limit (else the watchdog checks it every 0.2 s)."""
        return self._cgroup is not None and self._cgroup.memory_limited

    @property
    def work_dir(self) -> str:
        """Where the code runs: inside bubblewrap, or the session's directory on the host (process mode)."""
        return self._host_dir or "" if self.requested_mode == "process" else SANDBOX_DIR

    def start(self) -> None:
        """Start the kernel (if not running). Raises SandboxError when no isolated process can be made."""
        with self._lock:
            if self.alive:
                return
            self.stop()
            if self.requested_mode == "process":
                if os.geteuid() != 0:
                    raise SandboxError(
                        "process mode runs the code as a uid of its own, which needs root; without root only "
                        "bubblewrap isolates it (apt-get install bubblewrap, and 'sandbox': 'auto')"
                    )
                self._launch(bwrap=False)
                return
            if bwrap_path() is None:
                raise SandboxError(f"bubblewrap (bwrap) is not installed. {HOW_TO_ISOLATE}")
            self._launch(bwrap=True)

    def _launch(self, bwrap: bool) -> None:
        root = os.geteuid() == 0
        lim = self.limits
        if root and self._lease is None:
            try:
                self._lease = lease_uid()
            except OSError as e:
                raise SandboxError(f"no uid for the sandbox: {e}") from e
        uid = self.uid
        if not bwrap:
            self._make_host_dir()
        config: dict[str, Any] = {
            "work_dir": SANDBOX_DIR if bwrap else self._host_dir,
            "own_work_dir": bwrap and root,
            "uid": uid,
            "memory_mb": lim.memory_mb,
            "cpu_seconds": lim.cpu_seconds,
            "max_file_mb": lim.max_file_mb,
            "pid_namespace": bwrap,
            "unshare_net": not bwrap,
            "keep_processes": lim.keep_processes,
            "max_figure_bytes": protocol.MAX_FIGURE_BYTES,
            "max_figures": protocol.MAX_FIGURES,
            "max_figures_total": protocol.MAX_FIGURES_TOTAL,
        }
        if lim.max_processes is not None:  # RLIMIT_NPROC counts every process of the (real) uid
            config["nproc"] = 1 + lim.max_processes + (0 if root else len(processes_of_uid(os.getuid())))
        work = config["work_dir"]
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": work,
            "TMPDIR": work,
            "LANG": "C.UTF-8",
            "PYTHONIOENCODING": "utf-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "MPLBACKEND": "Agg",
            "MPLCONFIGDIR": os.path.join(work, ".matplotlib"),
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
        }
        kernel = [self.python, "-I", "-c", _kernel_source(), json.dumps(config)]
        if bwrap:
            argv = self._bwrap_argv(root) + kernel
        else:
            argv = [sys.executable, "-I", "-S", _REAPER, "--parent", str(os.getpid()), "--grace", "0"]
            argv += ["--uid", str(uid), "--", *kernel]
        try:
            self._proc = _spawn(
                lambda: subprocess.Popen(
                    argv,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env=env,
                    cwd="/",
                    start_new_session=True,
                    close_fds=True,
                )
            )
        except OSError as e:
            raise SandboxError(f"cannot start the sandbox: {e}") from e
        proc = self._proc
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None  # all three are pipes
        self._channel = Channel(proc.stdout.fileno(), proc.stdin.fileno(), protocol.reply_cap(lim.max_output_chars))
        try:
            ready = self._channel.reply(None, time.monotonic() + lim.startup_timeout)
        except (ProtocolError, TimeoutError):
            err = self._stderr_text()
            self.stop()
            raise SandboxError(self._startup_failure(bwrap, err)) from None
        if not ready.get("ready"):
            self.stop()
            raise SandboxError(f"the sandbox did not start: unexpected first message {ready!r:.200}")
        self.mode = "bwrap" if bwrap else "process"
        self.status = ready
        self._delivered = set()
        self._limit_hit = None
        proc.stderr.close()  # the kernel points its fd 2 at /dev/null
        # nothing runs in the sandbox until our first request, and only the kernel has the session's uid: what
        # the code starts, it starts from the kernel, so moving the kernel puts the whole session in its cgroups
        tree = descendants(proc.pid)
        self._cgroup = SessionCgroup(cgroup_name(uid), lim.memory_mb * 1024 * 1024 if lim.memory_mb else None)
        if self._cgroup.dirs:
            self._cgroup.add([p for p in tree if uid_of(p) == uid])
        if uid is None and tree:
            self._pidns = _pid_namespace(tree[0])
        if lim.keep_processes:
            WATCHDOG.watch(self)

    def _bwrap_argv(self, root: bool) -> list[str]:
        argv = [bwrap_path() or "bwrap", "--die-with-parent", "--new-session"]
        argv += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        if not root:
            argv += ["--unshare-user"]
        ro = _ro_paths()
        parents = {str(a) for d in ro for a in Path(d).parents if str(a) != "/"}
        for d in sorted(parents, key=lambda a: a.count("/")):
            argv += ["--perms", "0755", "--dir", d]  # bwrap would create them 0700: unusable after the uid drop
        for p in ro:
            if os.path.islink(p):
                argv += ["--symlink", os.readlink(p), p]
            else:
                argv += ["--ro-bind", p, p]
        argv += ["--dev", "/dev", "--perms", "01777", "--size", str(SHM_MB << 20), "--tmpfs", "/dev/shm"]
        argv += ["--remount-ro", "/dev", "--proc", "/proc"]
        if self.limits.max_disk_mb:
            argv += ["--size", str(self.limits.max_disk_mb << 20)]
        argv += ["--perms", "0700", "--tmpfs", SANDBOX_DIR, "--chdir", SANDBOX_DIR, "--remount-ro", "/", "--"]
        return argv

    def _make_host_dir(self) -> None:
        if self._dir_made:
            return
        if self._host_dir is None:
            self._temp_parent = tempfile.mkdtemp(prefix="chatagent-code-")
            os.chmod(self._temp_parent, 0o711)  # the session's uid must reach its directory, and no more
            self._host_dir = os.path.join(self._temp_parent, "session")
        try:
            make_dir(self._host_dir, self.uid)
        except OSError as e:
            raise SandboxError(f"cannot create the sandbox's work directory {self._host_dir}: {e}") from e
        self._dir_made = True
        if self._lease is not None:
            self._lease.record(self._host_dir)

    def _startup_failure(self, bwrap: bool, err: str) -> str:
        err = err or "no message"
        if bwrap:
            return f"bubblewrap cannot create a sandbox here ({err}). {HOW_TO_ISOLATE}"
        return (
            f"the sandbox did not start ({err}). Process mode runs the code as a uid of its own: the interpreter "
            "and the work directory must be reachable by other users (pass 'python': '/usr/bin/python3' and a "
            "'work_dir' under /tmp), or use bubblewrap."
        )

    def _stderr_text(self) -> str:
        proc = self._proc
        if proc is None or proc.stderr is None:
            return ""
        try:
            if proc.poll() is None:
                self._kill(proc)
            _exit_code(proc, 5.0)
            return proc.stderr.read(2000).decode("utf-8", "replace").strip()
        except (OSError, ValueError, subprocess.TimeoutExpired):
            return ""

    def _members(self) -> list[int]:
        """The session's processes: every process of its uid (as root), else of its pid namespace."""
        if self.uid is not None:
            return processes_of_uid(self.uid)
        return _pid_namespace_members(self._pidns) if self._pidns else []

    def _kill(self, proc: subprocess.Popen[bytes]) -> None:
        """Signal every process of the session to die (does not wait)."""
        if self.requested_mode == "process":
            try:
                proc.send_signal(signal.SIGTERM)  # the reaper SIGKILLs every process of the uid, then exits
            except OSError:
                pass
        else:
            try:
                proc.kill()  # bubblewrap's pid namespace ends with it, and every process in it
            except OSError:
                pass

    def stop(self) -> None:
        """End the kernel and every process of the session; the uid and the files are kept for a restart."""
        with self._lock:
            proc, self._proc = self._proc, None
            self._channel = None
            WATCHDOG.unwatch(self)
            if proc is None:
                return
            self._kill(proc)
            if _exit_code(proc, 5.0) is None:
                proc.kill()
                if _exit_code(proc, 5.0) is None:
                    logger.warning("sandbox process %d did not exit after SIGKILL", proc.pid)
            self._clean = self._kill_survivors()
            for f in (proc.stdin, proc.stdout, proc.stderr):
                try:
                    if f is not None:
                        f.close()
                except OSError:
                    pass
            if self._cgroup is not None:
                self._cgroup.remove()
                self._cgroup = None

    def _kill_survivors(self, wait: float = 5.0) -> bool:
        """SIGKILL what is left of the session until nothing is; False if something outlived `wait` seconds."""
        deadline = time.monotonic() + wait
        while True:
            left = self._members()
            if not left:
                return True
            if time.monotonic() > deadline:
                logger.warning("sandbox processes %s outlived their session", left[:10])
                return False
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.01)

    def close(self) -> None:
        """End every process of the session and remove its files; the uid goes back for others to use."""
        proc = self._proc
        if proc is not None:
            self._kill(proc)  # a call running in another thread returns at once instead of holding the lock
        with self._lock:
            self.stop()
            clean = self._clean
            if self._dir_made and self._host_dir is not None and clean:
                try:
                    remove_tree(self._host_dir, owner=self.uid)
                    self._dir_made = False
                except OSError as e:
                    logger.warning("could not remove the sandbox's directory %s: %s", self._host_dir, e)
            if self._temp_parent is not None and not self._dir_made:
                try:
                    os.rmdir(self._temp_parent)
                    self._temp_parent, self._host_dir = None, None
                except OSError:
                    pass
            if self._lease is not None and clean and not self._dir_made:
                self._lease.release()  # never while a process or a file of the uid may be left
                self._lease = None

    # ---- running code -------------------------------------------------------------------------------------

    def run(self, code: str, timeout: float = 30.0) -> RunReply:
        """Run `code`; the reply: stdout, stderr, result, error, error_kind, figures (checked PNGs), dropped.

        `error_kind` is one of None, 'syntax', 'exception', 'timeout', 'memory', 'output', 'crashed'.
        A reply with `restarted=True` means the process was killed and the next call starts afresh.
        """
        with self._lock:
            self.start()
            self._cell += 1
            self._seq += 1
            request: dict[str, Any] = {"op": "run", "id": self._seq, "code": code, "cell": self._cell,
                                       "timeout": timeout, "max_output": self.limits.max_output_chars}  # fmt: skip
            deadline = time.monotonic() + timeout + 2.0 + timeout * 0.1
            self._limit_hit = None
            WATCHDOG.watch(self)
            try:
                assert self._channel is not None
                self._channel.request(request, deadline)
                raw = self._channel.reply(self._seq, deadline)
            except (OSError, ProtocolError, TimeoutError) as e:
                return self._after_death(e, timeout)
            finally:
                if not self.limits.keep_processes:
                    WATCHDOG.unwatch(self)
            return protocol.clean_reply(raw, self.limits.max_output_chars)

    def put_file(self, src: str, name: str | None = None) -> str | None:
        """Give the session a copy of the host file `src` (as `name`, default its base name), unless it has a
        file of that name already. None, or a short note saying why the file could not be given."""
        name = name or os.path.basename(src)
        with self._lock:
            if name in self._delivered and self.alive:
                return None
            self.start()
            try:
                fd = open_host_file(src, is_sandbox_uid)
            except OSError as e:
                return f"{name} was not copied into the work directory: {e.strerror}"
            with open(fd, "rb") as f:
                size = os.fstat(fd).st_size
                quota = self.limits.max_disk_mb
                if quota is not None and size > quota << 20:
                    return f"{name} was not copied into the work directory: larger than its {quota} MB"
                return self._send_file(f, name, size)

    def _send_file(self, f: BinaryIO, name: str, size: int) -> str | None:
        assert self._channel is not None
        self._seq += 1
        deadline = time.monotonic() + self.limits.startup_timeout + size / 10e6
        try:
            self._channel.request({"op": "put", "id": self._seq, "name": name, "size": size}, deadline)
            ack = self._channel.reply(self._seq, deadline)
            if not ack.get("ok"):
                if ack.get("exists"):
                    self._delivered.add(name)
                    return None
                return f"{name} was not copied into the work directory: {str(ack.get('error'))[:200]}"
            sent = 0
            while sent < size:
                chunk = f.read(min(1 << 20, size - sent)) or b"\0" * min(1 << 20, size - sent)  # a file that shrank
                self._channel.send(chunk, deadline)
                sent += len(chunk)
            done = self._channel.reply(self._seq, deadline)
        except (OSError, ProtocolError, TimeoutError) as e:
            self.stop()
            return f"{name} was not copied into the work directory (the sandbox restarted: {e})"
        self._delivered.add(name)
        error = done.get("error")
        return f"{name} was only partly copied into the work directory: {str(error)[:200]}" if error else None

    def _after_death(self, e: BaseException, timeout: float) -> RunReply:
        """The reply for a call whose kernel died, hung or broke the protocol; the session restarts."""
        proc = self._proc
        returncode = _exit_code(proc) if proc is not None and isinstance(e, ProtocolError) else None
        oom = self._cgroup.oom_kills() if self._cgroup is not None else 0
        limit_hit = self._limit_hit
        self.stop()
        lost = "all variables are lost" + (", and the files too" if self.mode == "bwrap" else "")
        kind = "crashed"
        if limit_hit:
            error = f"The session went over its {limit_hit}; it was stopped and restarted, so {lost}."
            kind = "memory" if limit_hit.startswith("memory") else "crashed"
        elif isinstance(e, TimeoutError):
            error = (
                f"Timeout: the code did not stop within {timeout:g} seconds and did not answer the interrupt; "
                f"the sandbox was killed and restarted, so {lost}."
            )
            kind = "timeout"
        elif oom:
            error = f"The session ran out of its {self.limits.memory_mb} MB of memory; it was restarted, so {lost}."
            kind = "memory"
        elif isinstance(e, ProtocolError) and "ended" not in str(e):
            error = f"The sandbox broke its protocol ({e}); it was restarted, so {lost}."
        else:
            why = _death_reason(returncode)
            cause = "the sandbox's memory, CPU-time or process limit, or a crash"
            if why == " (SIGXCPU)":
                cause = f"it used up the CPU time limit of {self.limits.cpu_seconds} s"
            error = f"The Python process died{why} ({cause}); it was restarted, so {lost}."
        return {"stdout": "", "stderr": "", "result": None, "error": error, "error_kind": kind, "figures": [],
                "dropped": 0, "restarted": True}  # fmt: skip

    def check_limits(self) -> None:
        """Called by the watchdog: stop the session if it is over its CPU time, or over its memory when no
        cgroup limits that."""
        proc, cgroup, lim = self._proc, self._cgroup, self.limits
        if proc is None or cgroup is None or self._limit_hit:
            return
        needs_sample = not cgroup.counts_cpu or (lim.memory_mb is not None and not cgroup.memory_limited)
        memory, cpu = sampled_usage(self._members()) if needs_sample else (0, 0.0)
        if cgroup.counts_cpu:
            cpu = cgroup.cpu_seconds()
        if lim.cpu_seconds is not None and cpu > lim.cpu_seconds:
            self._limit_hit = f"CPU time limit of {lim.cpu_seconds} s (all its processes together)"
        elif lim.memory_mb is not None and not cgroup.memory_limited and memory > lim.memory_mb << 20:
            self._limit_hit = f"memory limit of {lim.memory_mb} MB (all its processes together)"
        if self._limit_hit:
            self._kill(proc)


def _pid_namespace(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return ""


def _pid_namespace_members(ns: str) -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and _pid_namespace(int(p)) == ns]


def _exit_code(proc: subprocess.Popen[bytes], wait: float = 2.0) -> int | None:
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


def _death_reason(returncode: int | None) -> str:
    """' (SIGNAME)' for a process killed by a signal (bubblewrap and the reaper report 128 + n), else ''."""
    if returncode is None or 0 <= returncode <= 128:
        return ""
    num = -returncode if returncode < 0 else returncode - 128
    try:
        return f" ({signal.Signals(num).name})"
    except ValueError:
        return f" (signal {num})"


def isolation_summary(sandbox: Sandbox) -> str:
    """Plain sentences on what the sandbox's isolation guarantees (and, in process mode, what it does not)."""
    lim = sandbox.limits
    who = f"uid {sandbox.uid} (not root, not the agent's user)" if sandbox.uid is not None else None
    memory = "no memory limit"
    if lim.memory_mb is not None:
        how = "enforced by a cgroup" if sandbox.cgroup_limits_memory else "checked every 0.2 s"
        memory = f"{lim.memory_mb} MB of memory for the session ({how})"
    cpu = f"{lim.cpu_seconds} s of CPU for the session" if lim.cpu_seconds is not None else "no CPU limit"
    procs = f"{lim.max_processes} processes" if lim.max_processes is not None else "no process limit"
    ends = "processes a call starts run on until the session ends" if lim.keep_processes else (
        "processes a call starts end with it")  # fmt: skip
    common = f"{memory}, {cpu}, {procs}; no inherited environment, no new privileges; {ends}."
    if sandbox.mode == "bwrap":
        disk = f"{lim.max_disk_mb} MB" if lim.max_disk_mb else "an unlimited"
        return (
            f"Sandbox: bubblewrap — no network, host processes and files hidden (only the system and Python "
            f"directories, read-only), {disk} private work directory, running as "
            f"{who or 'the agent user inside a user namespace'}; {common}"
        )
    net = sandbox.status.get("network")
    net_text = f"no network ({net})" if net else "network NOT blocked"
    return (
        f"Sandbox: plain process (opted in with sandbox='process'), running as {who} — {net_text}; the filesystem "
        "is NOT confined (the code reads what any user may and writes world-writable directories such as /tmp); "
        f"host processes are visible (not their memory or environment); no disk quota; {common}"
    )


@atexit.register
def close_all() -> None:
    """End every live sandbox and remove its files (run at interpreter exit)."""
    for sb in list(_LIVE):
        try:
            sb.close()
        except Exception:  # at exit: never let one failure keep the others alive
            logger.debug("closing a sandbox failed", exc_info=True)


__all__ = ["Limits", "Sandbox", "SandboxError", "bwrap_path", "close_all", "isolation_summary"]

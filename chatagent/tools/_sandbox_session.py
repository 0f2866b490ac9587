"""A sandbox session: one persistent, isolated kernel process, its lifecycle, and the calls that run code in it.

What isolates the kernel is described in `chatagent.tools.sandbox`; what it is started with, in
`chatagent.tools._sandbox_command`.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import Any, BinaryIO

from chatagent.tools import _sandbox_protocol as protocol
from chatagent.tools._reaper import descendants
from chatagent.tools._sandbox_command import SANDBOX_DIR, bwrap_path, kernel_argv, kernel_config, kernel_env
from chatagent.tools._sandbox_errors import HOW_TO_ISOLATE, SandboxError, death_reply, startup_failure
from chatagent.tools._sandbox_fs import make_dir, open_host_file, remove_tree
from chatagent.tools._sandbox_limits import WATCHDOG, Limits, SessionCgroup, cgroup_name, sampled_usage
from chatagent.tools._sandbox_processes import exit_code, pid_namespace, pid_namespace_members, spawn
from chatagent.tools._sandbox_protocol import Channel, ProtocolError, RunReply
from chatagent.tools._sandbox_uids import UidLease, is_sandbox_uid, lease_uid, processes_of_uid, uid_of

logger = logging.getLogger("chatagent.tools")

_LIVE: weakref.WeakSet[Sandbox] = weakref.WeakSet()


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
        config = kernel_config(lim, SANDBOX_DIR if bwrap else self._host_dir, uid, bwrap, root)
        env = kernel_env(config["work_dir"])
        argv = kernel_argv(self.python, config, bwrap, root, lim.max_disk_mb)
        try:
            self._proc = spawn(
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
            raise SandboxError(startup_failure(bwrap, err)) from None
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
            self._pidns = pid_namespace(tree[0])
        if lim.keep_processes:
            WATCHDOG.watch(self)

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

    def _stderr_text(self) -> str:
        proc = self._proc
        if proc is None or proc.stderr is None:
            return ""
        try:
            if proc.poll() is None:
                self._kill(proc)
            exit_code(proc, 5.0)
            return proc.stderr.read(2000).decode("utf-8", "replace").strip()
        except (OSError, ValueError, subprocess.TimeoutExpired):
            return ""

    def _members(self) -> list[int]:
        """The session's processes: every process of its uid (as root), else of its pid namespace."""
        if self.uid is not None:
            return processes_of_uid(self.uid)
        return pid_namespace_members(self._pidns) if self._pidns else []

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
            if exit_code(proc, 5.0) is None:
                proc.kill()
                if exit_code(proc, 5.0) is None:
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
        returncode = exit_code(proc) if proc is not None and isinstance(e, ProtocolError) else None
        oom = self._cgroup.oom_kills() if self._cgroup is not None else 0
        limit_hit = self._limit_hit
        self.stop()
        files_lost = self.mode == "bwrap"
        return death_reply(e, timeout, self.limits, files_lost, limit_hit, oom, returncode)

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


@atexit.register
def close_all() -> None:
    """End every live sandbox and remove its files (run at interpreter exit)."""
    for sb in list(_LIVE):
        try:
            sb.close()
        except Exception:  # at exit: never let one failure keep the others alive
            logger.debug("closing a sandbox failed", exc_info=True)

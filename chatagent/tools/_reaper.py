"""Run a command so that nothing it starts outlives it (standard library only; run as a program).

    python -I -S _reaper.py --parent PID [--grace SECONDS] [--uid UID] -- command args...

The reaper is a child subreaper: every process the command starts, even one that detaches with setsid() or a
double fork, stays its descendant. When the command exits, when the reaper gets SIGTERM, SIGINT or SIGHUP, or
when its parent (process PID, the thread that started it) dies, it sends SIGTERM to every descendant, waits
up to `--grace` seconds, SIGKILLs whatever is left until nothing is, and exits (with the command's status).
With `--uid`, it also kills every process of that uid (the sandbox's own uid: only its processes have it).
The command gets the reaper's stdin, stdout and stderr; the reaper keeps none of them open.
(`chatagent.tools._sandbox_session` imports `descendants` from here.)
"""

import ctypes
import os
import signal
import sys
import time

PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
_STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}


class _Stop(Exception):
    pass


def _on_signal(signum: int, frame: object) -> None:
    raise _Stop()


def descendants(root: int) -> list[int]:
    """Every live (not zombie) descendant of `root`, from /proc."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] != b"Z":
                children.setdefault(int(fields[1]), []).append(int(name))
    out: list[int] = []
    todo = [root]
    while todo:
        for c in children.get(todo.pop(), ()):
            out.append(c)
            todo.append(c)
    return out


def _kill_uid(uid: int) -> None:
    """SIGKILL every process of `uid`, in one pass: a child that becomes `uid` and calls kill(-1)."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            os.kill(-1, signal.SIGKILL)  # every process this uid may signal (its own), but not the caller
        except OSError:
            pass
        os._exit(0)
    os.waitpid(pid, 0)


def _reap_all() -> bool:
    """Collect the finished children; whether any child is left (we are a subreaper: no child, no descendant)."""
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return True
        except ChildProcessError:
            return False


def _end_all(grace: float, uid: int | None) -> None:
    """SIGTERM the descendants, wait up to `grace` seconds, then SIGKILL until none is left."""
    if grace > 0:
        for pid in descendants(os.getpid()):
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                pass
        deadline = time.monotonic() + grace
        while _reap_all() and time.monotonic() < deadline:
            time.sleep(0.02)
    deadline = time.monotonic() + 30.0  # a process stuck in the kernel (D state) dies when it can; we cannot wait
    while _reap_all() and time.monotonic() < deadline:
        if uid is not None:
            _kill_uid(uid)
        for pid in descendants(os.getpid()):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.002)


def main() -> int:
    args = sys.argv[1:]
    parent, grace, uid = 0, 1.0, None
    while args and args[0] != "--":
        opt, value, args = args[0], args[1], args[2:]
        if opt == "--parent":
            parent = int(value)
        elif opt == "--grace":
            grace = float(value)
        elif opt == "--uid":
            uid = int(value)
        else:
            raise SystemExit(f"_reaper: unknown option {opt}")
    command = args[1:]
    if not command:
        raise SystemExit("_reaper: no command")
    for sig in _STOP_SIGNALS:
        signal.signal(sig, _on_signal)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    status = 1
    try:
        if parent and os.getppid() != parent:  # the parent died before the line above
            raise _Stop()
        signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)  # no _Stop in the child before its exec
        child = os.fork()
        if child == 0:
            for sig in (*_STOP_SIGNALS, signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
            libc.prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0)
            try:
                os.execvp(command[0], command)
            except OSError as e:
                os.write(2, f"cannot run {command[0]}: {e.strerror}\n".encode())
            os._exit(127)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)  # the command's pipes close when it (and what it started) ends, not when we do
        while True:
            pid, wstatus = os.waitpid(-1, 0)
            if pid == child:
                status = os.waitstatus_to_exitcode(wstatus)
                status = 128 - status if status < 0 else status
                break
    except (_Stop, ChildProcessError):
        pass
    for sig in _STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    _end_all(grace, uid)
    return status


if __name__ == "__main__":
    sys.exit(main())

"""Sandbox uids (only when chatagent runs as root): no two live sandbox sessions ever share one, across processes.

A lease is a lock file `<state dir>/<uid>` held with flock(2) for the session's whole life; the kernel drops the
lock when its holder dies, however it dies. A uid is leased only when its lock is free *and* no process of that
uid exists. The lease file records the session's work directory on the host (process mode), so that whoever
next finds the lock free can remove what a killed agent left behind.
"""

from __future__ import annotations

import fcntl
import logging
import os
import secrets
import stat
import threading

from chatagent.tools._sandbox_fs import remove_tree
from chatagent.tools._sandbox_limits import cgroup_name, remove_stale_cgroups

logger = logging.getLogger("chatagent.tools")

UID_BASE = 1_900_000_000  # far above any real account, below 2**31
UID_SPAN = 1_000_000
_STATE_DIRS = ("/run/chatagent-sandbox", "/var/tmp/chatagent-sandbox-root")
_swept = False
_sweep_lock = threading.Lock()


class UidLease:
    """A uid held for one sandbox session until `release()` (or until this process ends)."""

    def __init__(self, uid: int, fd: int, path: str) -> None:
        self.uid, self._fd, self._path = uid, fd, path

    @property
    def fd(self) -> int:
        """The locked lease file (its contents: the recorded work directory); -1 once released."""
        return self._fd

    def record(self, work_dir: str) -> None:
        """Remember the session's host work directory (removed by the next leaser if we die holding it)."""
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, work_dir.encode("utf-8", "surrogateescape"), 0)

    def release(self) -> None:
        """Give the uid back (call only once none of its processes and files are left)."""
        if self._fd < 0:
            return
        try:
            os.unlink(self._path)  # while locked: a waiter that opened the old file sees it is gone
        except OSError:
            pass
        os.close(self._fd)
        self._fd = -1


def is_sandbox_uid(uid: int) -> bool:
    """Whether `uid` is one the sandboxes lease (so a file it owns was made by model code)."""
    return UID_BASE <= uid < UID_BASE + UID_SPAN


def state_dir() -> str:
    """A directory only root can write (created 0700 if missing), for the lease files."""
    for path in _STATE_DIRS:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        except OSError:
            continue
        st = os.lstat(path)
        if stat.S_ISDIR(st.st_mode) and st.st_uid == 0 and not st.st_mode & 0o022:
            return path
        logger.warning("not using %s for sandbox uid leases: not a root-owned, root-only directory", path)
    raise OSError("no directory for sandbox uid leases: /run and /var/tmp are not usable")


def lease_uid() -> UidLease:
    """A uid that no process has and no other session holds. Raises OSError when none is found."""
    directory = state_dir()
    _sweep_once(directory)
    start = secrets.randbelow(UID_SPAN)
    for i in range(200):
        uid = UID_BASE + (start + i) % UID_SPAN
        lease, fresh = _try_lock(directory, uid)
        if lease is None:
            continue
        if not fresh and (uid_has_processes(uid) or not _clean_up(lease)):
            os.close(lease.fd)  # what a killed agent left is still running or there: leave this uid alone
            continue
        return lease
    raise OSError("no free sandbox uid found")


def _try_lock(directory: str, uid: int) -> tuple[UidLease | None, bool]:
    """The lease of `uid` if its lock is free, and whether its lease file is new: a uid with no lease file
    was never leased, or was given back only once nothing of it was left, so it needs no look for processes."""
    path = os.path.join(directory, str(uid))
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd, fresh = os.open(path, flags | os.O_EXCL, 0o600), True
    except FileExistsError:
        fd, fresh = os.open(path, flags, 0o600), False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path, follow_symlinks=False))
        except FileNotFoundError:
            same = False  # released (unlinked) between our open and our lock: try another uid
        if same:
            return UidLease(uid, fd, path), fresh
    except BlockingIOError:
        pass
    os.close(fd)
    return None, False


def _clean_up(lease: UidLease) -> bool:
    """Remove what a dead holder of this uid left: its cgroups, and the work directory it recorded (then forget
    it). Whether nothing is left."""
    clean = remove_stale_cgroups(cgroup_name(lease.uid))
    size = os.fstat(lease.fd).st_size
    if size:
        recorded = os.pread(lease.fd, min(size, 8192), 0).decode("utf-8", "surrogateescape")
        try:
            remove_tree(recorded, owner=lease.uid)
            os.ftruncate(lease.fd, 0)
        except OSError as e:
            logger.warning("could not remove %s, left by a sandbox session that ended abruptly: %s", recorded, e)
            clean = False
    return clean


def _sweep_once(directory: str) -> None:
    """Once per process: clean up after every lease whose holder died, and give those uids back."""
    global _swept
    with _sweep_lock:
        if _swept:
            return
        _swept = True
    for name in os.listdir(directory):
        if not name.isdigit():
            continue
        uid = int(name)
        lease, _ = _try_lock(directory, uid)
        if lease is not None:
            if uid_has_processes(uid) or not _clean_up(lease):
                os.close(lease.fd)  # keep its lease file: a later sweep finishes the job
                continue
            lease.release()


def uid_has_processes(uid: int) -> bool:
    """Whether any process of `uid` exists (as seen in this pid namespace's /proc)."""
    return bool(processes_of_uid(uid, first=True))


def uid_of(pid: int) -> int | None:
    """The real uid of a live process (None if it is gone or a zombie)."""
    uids = _uids(pid)
    return uids[0] if uids else None


def processes_of_uid(uid: int, first: bool = False) -> list[int]:
    """The live (not zombie) pids whose real, effective or saved uid is `uid`."""
    found: list[int] = []
    for name in os.listdir("/proc"):
        if name.isdigit() and uid in (_uids(int(name)) or ())[:3]:
            found.append(int(name))
            if first:
                break
    return found


def _uids(pid: int) -> list[int] | None:
    """A live process's real, effective, saved and filesystem uids, from /proc/<pid>/status (a process that
    changed its uid is not dumpable, and its /proc directory then belongs to root, whatever its uid)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            status = f.read(4096)
    except OSError:
        return None
    start = status.find(b"\nUid:")
    if start < 0 or b"\nState:\tZ" in status:
        return None
    return [int(x) for x in status[start + 5 : status.find(b"\n", start + 5)].split()]

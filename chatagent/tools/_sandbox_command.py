"""What a session's kernel is started with: its configuration, its environment and its command line.

bubblewrap mode runs the kernel inside `bwrap` (own namespaces, a read-only view of only the system and Python
directories, a tmpfs work directory at `SANDBOX_DIR`); process mode runs it under the reaper (`_reaper.py`),
which drops to the session's uid. The kernel gets its configuration as a JSON argument and no inherited
environment.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from chatagent.tools import _sandbox_protocol as protocol
from chatagent.tools._sandbox_limits import Limits
from chatagent.tools._sandbox_uids import processes_of_uid

SANDBOX_DIR = "/sandbox"  # the work directory's path inside bubblewrap
SHM_MB = 16  # /dev/shm inside bubblewrap (POSIX semaphores for multiprocessing), at most; part of max_disk_mb
_KERNEL = Path(__file__).with_name("_sandbox_kernel.py")
_REAPER = str(Path(__file__).with_name("_reaper.py"))


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


def kernel_config(lim: Limits, work_dir: str | None, uid: int | None, bwrap: bool, root: bool) -> dict[str, Any]:
    """The kernel's configuration: its work directory, its uid and the limits it sets before any model code."""
    config: dict[str, Any] = {
        "work_dir": work_dir,
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
    return config


def kernel_env(work: str) -> dict[str, str]:
    """The kernel's whole environment (nothing is inherited)."""
    return {
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


def kernel_argv(python: str, config: dict[str, Any], bwrap: bool, root: bool, max_disk_mb: int | None) -> list[str]:
    """The command line that starts the kernel: inside bubblewrap, or under the reaper as `config['uid']`."""
    kernel = [python, "-I", "-c", _kernel_source(), json.dumps(config)]
    if bwrap:
        return _bwrap_argv(root, max_disk_mb) + kernel
    argv = [sys.executable, "-I", "-S", _REAPER, "--parent", str(os.getpid()), "--grace", "0"]
    argv += ["--uid", str(config["uid"]), "--", *kernel]
    return argv


def shm_and_work_mb(max_disk_mb: int | None) -> tuple[int, int | None]:
    """The sizes (MB) of the sandbox's /dev/shm and work directory: both are memory (tmpfs), so together they hold
    at most `max_disk_mb` (/dev/shm an eighth of it, at most SHM_MB); without a quota, the work directory is
    unbounded and /dev/shm SHM_MB."""
    if not max_disk_mb:
        return SHM_MB, None
    shm = min(SHM_MB, max(1, max_disk_mb // 8))
    return shm, max(1, max_disk_mb - shm)


def _bwrap_argv(root: bool, max_disk_mb: int | None) -> list[str]:
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
    shm, work = shm_and_work_mb(max_disk_mb)
    argv += ["--dev", "/dev", "--perms", "01777", "--size", str(shm << 20), "--tmpfs", "/dev/shm"]
    argv += ["--remount-ro", "/dev", "--proc", "/proc"]
    if work:
        argv += ["--size", str(work << 20)]
    argv += ["--perms", "0700", "--tmpfs", SANDBOX_DIR, "--chdir", SANDBOX_DIR, "--remount-ro", "/", "--"]
    return argv

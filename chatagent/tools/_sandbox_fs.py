"""Host-side file operations on a sandbox's directory, none of which follows a link the sandbox could plant.

The host never opens, copies or changes anything inside a sandbox's work directory by path (input files and
figures cross the kernel's pipe as bytes). It only creates the directory (in a parent the sandbox cannot write)
and removes it once every process of the session is dead; and when it reads a file to give to a sandbox, it
refuses one reached through anything a sandbox uid owns (a link planted in /tmp, a file of a session).
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from collections.abc import Callable


def make_dir(path: str, uid: int | None) -> None:
    """Create `path` (mode 0700; its parent must exist and be ours), owned by `uid` when given.

    Raises FileExistsError if something is there already: a session's directory is always new.
    """
    os.mkdir(path, 0o700)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        if uid is not None:
            os.fchown(fd, uid, uid)
    finally:
        os.close(fd)


def remove_tree(path: str, owner: int | None = None) -> None:
    """Remove a sandbox's directory and everything in it, never following a link out of it.

    Only a real directory (not a link to one) owned by `owner` (or by us: it was never handed over) is removed.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode) or st.st_uid not in {owner, os.geteuid()}:
        raise OSError(f"not removing {path}: not a directory of the sandbox")
    if not shutil.rmtree.avoids_symlink_attacks:  # pragma: no cover - Linux always has the fd-based version
        raise OSError("this platform cannot remove a directory without following links")
    shutil.rmtree(path)


def open_host_file(path: str, untrusted: Callable[[int], bool]) -> int:
    """A read-only fd of the regular file `path`, resolved link by link: any step (directory, link, the file
    itself) owned by a uid for which `untrusted(uid)` holds is refused with PermissionError."""
    parts = [p for p in os.path.abspath(path).split("/") if p]
    current, hops = "/", 0
    while parts:
        name = parts.pop(0)
        if name == ".":
            continue
        if name == "..":
            current = os.path.dirname(current)
            continue
        step = os.path.join(current, name)
        st = os.lstat(step)
        if untrusted(st.st_uid):
            raise PermissionError(errno.EACCES, "it is reached through a file of a sandbox", step)
        if stat.S_ISLNK(st.st_mode):
            hops += 1
            if hops > 40:
                raise OSError(errno.ELOOP, "too many links", path)
            target = os.readlink(step)
            current = "/" if target.startswith("/") else current
            parts[:0] = [p for p in target.split("/") if p]
            continue
        current = step
    fd = os.open(current, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    st = os.fstat(fd)
    if untrusted(st.st_uid) or not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise PermissionError(errno.EACCES, "not a regular file of the host", path)
    os.set_blocking(fd, True)
    return fd

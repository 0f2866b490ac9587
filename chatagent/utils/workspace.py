"""The workspace directory: where parsed documents, indexes and tokenizer caches are kept on disk.

`CHATAGENT_WORKSPACE` names it; the default is `~/.cache/chatagent`. Every file we write there is
named from a content hash (or a fixed name of ours), never from a user's file name or path.

What we keep there is the user's (conversations, documents, answers): the directories we make are 0700 and the
files 0600, whatever the umask (`private_dirs`, `write_atomic`, `private_file`), so other users of the machine
read none of it.

And nothing another user of the machine put there first is used (issue 36): a directory that holds our files must
be this user's and writable by no one else, and each directory above it this user's or root's and, if others may
write in it, sticky (as /tmp is), so that no one can rename it away; a file that exists already must be a regular
file of this user's that no one else may write (one others may read is made 0600). Otherwise `UnsafePathError`
says what is wrong and how to fix it. (On systems without uids, Windows, nothing is checked.)
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from pathlib import Path

from chatagent.errors import ChatAgentError

_SAFE_PART = re.compile(r"[a-z0-9_]+")
_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class UnsafePathError(ChatAgentError, PermissionError):
    """A directory or file that another user of the machine owns or may write, where chatagent keeps its data."""


def _uid() -> int | None:
    return os.geteuid() if hasattr(os, "geteuid") else None


def check_private_dir(path: Path) -> None:
    """UnsafePathError unless the directory `path` is this user's, writable by no one else, and each directory
    above it this user's or root's, writable by others only when sticky."""
    uid = _uid()
    if uid is None:
        return
    real = Path(os.path.realpath(path))
    st = os.stat(real)
    if st.st_uid != uid:
        raise UnsafePathError(f"{real} belongs to another user (uid {st.st_uid}): chatagent keeps its data only in "
                              "a directory of yours that no one else can write; choose another one")  # fmt: skip
    if st.st_mode & _OTHERS_WRITE:
        raise UnsafePathError(f"{real} can be written by other users: chatagent keeps its data only in a directory "
                              f"no one else can write (chmod go-w {real}, or choose another one)")  # fmt: skip
    for parent in real.parents:
        st = os.stat(parent)
        if st.st_uid not in (uid, 0) or (st.st_mode & _OTHERS_WRITE and not st.st_mode & stat.S_ISVTX):
            raise UnsafePathError(f"{parent}, above {real}, belongs to another user or can be written by others "
                                  "without being sticky: another user could replace what is in it; choose a "
                                  "directory of yours")  # fmt: skip


def check_private_file(path: Path, fd: int | None = None) -> None:
    """UnsafePathError unless the file `path` (or open as `fd`) is a regular file of this user's that no one else
    may write; one that others may read is made 0600."""
    uid = _uid()
    if uid is None:
        return
    st = os.fstat(fd) if fd is not None else os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise UnsafePathError(f"{path} is not a regular file")
    if st.st_uid != uid:
        raise UnsafePathError(f"{path} belongs to another user (uid {st.st_uid}): chatagent does not use a file "
                              "someone else made; remove it or choose another place")  # fmt: skip
    if st.st_mode & _OTHERS_WRITE:
        raise UnsafePathError(f"{path} can be written by other users: chmod 600 it, or choose another place")
    if st.st_mode & 0o077:
        if fd is not None:
            os.fchmod(fd, 0o600)
        else:
            os.chmod(path, 0o600)


def workspace_root() -> Path:
    """The workspace directory (not created)."""
    env = os.environ.get("CHATAGENT_WORKSPACE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "chatagent"


def workspace_dir(*parts: str) -> Path:
    """A subdirectory of the workspace, created if missing; each part must be a fixed name of ours."""
    for part in parts:
        if not _SAFE_PART.fullmatch(part):
            raise ValueError(f"invalid workspace directory name: {part!r}")
    path = workspace_root().joinpath(*parts)
    private_dirs(path)
    return path


def read_private(path: Path) -> bytes:
    """The bytes of a file of ours (FileNotFoundError; UnsafePathError for a link, or a file another user made or
    may write)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        check_private_file(path, fd)
        return f.read()


def private_dirs(path: Path) -> Path:
    """`path` as a directory, the missing ones on the way made readable by this user alone (0700, whatever the
    umask); directories that exist already are left as they are, but `path` must be safe (`check_private_dir`)."""
    missing = []
    for p in [path, *path.parents]:
        if p.is_dir():
            break
        missing.append(p)
    for p in reversed(missing):
        try:
            os.mkdir(p, 0o700)
        except FileExistsError:
            continue  # made meanwhile by another thread or process
        os.chmod(p, 0o700)  # (mkdir's mode passes through the umask)
    if not path.is_dir():
        raise NotADirectoryError(f"{path} is not a directory")
    check_private_dir(path)
    return path


def private_file(path: Path) -> None:
    """Create `path` empty, readable by this user alone (0600, whatever the umask), unless it exists: then it must
    be safe (`check_private_file`)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, 0o600)
    except FileExistsError:
        check_private_file(path)
        return
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file and a rename, so that readers never see half a file (0600:
    mkstemp's mode; missing directories 0700)."""
    private_dirs(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise

"""The workspace directory: where parsed documents, indexes and tokenizer caches are kept on disk.

`CHATAGENT_WORKSPACE` names it; the default is `~/.cache/chatagent`. Every file we write there is
named from a content hash (or a fixed name of ours), never from a user's file name or path.

What we keep there is the user's (conversations, documents, answers): the directories we make are 0700 and the
files 0600, whatever the umask (`private_dirs`, `write_atomic`, `private_file`), so other users of the machine
read none of it.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from pathlib import Path

_SAFE_PART = re.compile(r"[a-z0-9_]+")


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


def private_dirs(path: Path) -> Path:
    """`path` as a directory, the missing ones on the way made readable by this user alone (0700, whatever the
    umask); directories that exist already are left as they are."""
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
    return path


def private_file(path: Path) -> None:
    """Create `path` empty, readable by this user alone (0600, whatever the umask), unless it exists."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
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

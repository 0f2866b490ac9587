"""Host-side file operations on a sandbox's directory, none of which follows a link the sandbox could plant.

The host never opens, copies or changes anything inside a sandbox's work directory by path (input files and
figures cross the kernel's pipe as bytes). It only creates the directory (in a parent the sandbox cannot write)
and removes it once every process of the session is dead.
"""

from __future__ import annotations

import os
import shutil
import stat


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

"""The workspace directory: where parsed documents, indexes and tokenizer caches are kept on disk.

`CHATAGENT_WORKSPACE` names it; the default is `~/.cache/chatagent`. Every file we write there is
named from a content hash (or a fixed name of ours), never from a user's file name or path.
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
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file and a rename, so that readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise

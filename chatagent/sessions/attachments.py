"""Files attached to stored messages, kept by content hash, so that a resumed conversation still has them.

When a turn is stored, every image, file, audio or video item naming a local file becomes
`chatagent-blob:<sha256>/<name>` and the file's bytes go into the store, once per content. When a conversation is
read back, such an item names a local copy, `<workspace>/sessions/files/<sha256>/<name>`, written from the store
when missing (another machine, a cleaned cache) and checked against its hash when present. Only the blobs the
session's own turns stored are restored: a reference to any other hash (written into a message by hand) stays a
reference, so that knowing a file's hash never gives its content. `<name>` is the file's own name without its directories, so that
answers still cite it; the RAG cache, keyed by content hash too, finds the file already parsed. URLs and files
larger than the RAG size limit (CHATAGENT_MAX_FILE_MB) are kept as they are, with a warning for the latter.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
from collections.abc import Callable, Collection
from pathlib import Path

from chatagent.utils.workspace import workspace_root, write_atomic

logger = logging.getLogger("chatagent.sessions")

SCHEME = "chatagent-blob:"
KINDS = ("image", "file", "audio", "video")
_SHA = re.compile(r"[0-9a-f]{64}")
_REMOTE = ("http://", "https://", "data:")


def stash(messages: list[dict]) -> tuple[list[dict], dict[str, bytes]]:
    """The messages as stored (local files replaced by references; the caller's dicts are not changed) and the
    files' contents by SHA-256."""
    files: dict[str, bytes] = {}
    out = messages
    for i, m in enumerate(messages):
        content = m.get("content")
        if not isinstance(content, list):
            continue
        items = None
        for j, item in enumerate(content):
            for kind in KINDS:
                value = item.get(kind)
                ref = _stash_one(value, files) if isinstance(value, str) else None
                if ref is not None:
                    items = items or list(content)
                    items[j] = {kind: ref}
        if items is not None:
            out = out if out is not messages else list(messages)
            out[i] = {**m, "content": items}
    return out, files


def _stash_one(value: str, files: dict[str, bytes]) -> str | None:
    if value.lower().startswith(_REMOTE) or value.startswith(SCHEME):  # (a URL's scheme in any case)
        return None
    path = value[len("file://") :] if value.startswith("file://") else value
    from chatagent.rag.parsers import max_file_bytes  # the rag extra, optional

    try:
        size = os.path.getsize(path)
        if size > max_file_bytes():
            logger.warning("%s is larger than the file size limit: the session keeps its path only", path)
            return None
        data = Path(path).read_bytes()
    except OSError as e:
        logger.warning("attachment %s cannot be read (%s): the session keeps its path only", path, e.strerror or e)
        return None
    sha = hashlib.sha256(data).hexdigest()
    files[sha] = data
    return f"{SCHEME}{sha}/{safe_name(path)}"


def references(messages: list[dict]) -> bool:
    """Whether any of the messages refers to a stored file."""
    return any(
        isinstance(item, dict) and any(str(item.get(kind, "")).startswith(SCHEME) for kind in KINDS)
        for m in messages
        if isinstance(m.get("content"), list)
        for item in m["content"]
    )


def restore(messages: list[dict], fetch: Callable[[str], bytes | None], owned: Collection[str]) -> list[dict]:
    """Stored messages (changed in place) with each reference to a blob among `owned` (the session's own) replaced
    by the path of a local copy."""
    for m in messages:
        content = m.get("content")
        if not isinstance(content, list):
            continue
        for item in content:
            for kind in KINDS:
                value = item.get(kind)
                if isinstance(value, str) and value.startswith(SCHEME):
                    item[kind] = local_copy(value, fetch, owned)
    return messages


def local_copy(ref: str, fetch: Callable[[str], bytes | None], owned: Collection[str]) -> str:
    """The local path for a `chatagent-blob:` reference to one of the `owned` blobs: the copy, checked against its
    hash, written from `fetch(sha256)` if missing or changed; the reference itself for any other blob."""
    sha, _, name = ref[len(SCHEME) :].partition("/")
    if not _SHA.fullmatch(sha):
        logger.warning("a stored message has a malformed file reference %r", ref[:100])
        return ref
    if sha not in owned:
        logger.warning("a stored message refers to a file its session did not store: left as a reference")
        return ref
    path = files_dir() / sha / safe_name(name)
    if _intact(path, sha):
        return str(path)
    data = fetch(sha)
    if data is None:
        logger.warning("the file %s (%s) is missing from the session store", name, sha)
        return str(path)

    try:
        write_atomic(path, data)
    except OSError as e:
        logger.warning("cannot write the local copy of %s to %s: %s", name, path, e)
    return str(path)


_checked: dict[Path, tuple[int, int]] = {}  # local copies found intact: (mtime_ns, size) when checked


def _intact(path: Path, sha: str) -> bool:
    """Whether the local copy exists and holds the blob (hashed once per change of the file)."""
    try:
        st = path.stat()
    except OSError:
        return False
    stamp = (st.st_mtime_ns, st.st_size)
    if _checked.get(path) == stamp:
        return True
    try:
        ok = hashlib.sha256(path.read_bytes()).hexdigest() == sha
    except OSError:
        return False
    if ok:
        _checked[path] = stamp
    else:
        logger.warning("the local copy %s does not match its hash: written again from the store", path)
    return ok


def forget(shas: list[str]) -> None:
    """Remove the local copies of files no session refers to any more."""
    for sha in shas:
        if _SHA.fullmatch(sha):
            shutil.rmtree(files_dir() / sha, ignore_errors=True)


def files_dir() -> Path:
    return workspace_root() / "sessions" / "files"


def safe_name(path: str) -> str:
    """A file name that is only a name: no directories, no leading dots, no control characters, not too long."""
    name = os.path.basename(path.replace("\\", "/").rstrip("/"))
    name = "".join(c for c in name if c.isprintable()).lstrip(".").strip()
    return name[-200:] or "file"

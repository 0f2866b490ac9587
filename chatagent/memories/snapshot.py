"""A user's recall index saved to a file, so that a new process's first recall does not read and index every record.

    save(index, path, epoch, user)     # numpy arrays and JSON: no pickle
    load(path, epoch, user, model)     # the index as saved (then brought up to date from the store), or None

The file is kept beside a SQLite store (`memory.db-index/`), or for PostgreSQL in the workspace
(`memory/index/`), 0600 in a 0700 directory like the store: it holds the records' terms and vectors, not their
texts (recall reads the matches from the store). A file of another database (its `epoch`), user, model or
format, or an unreadable one, is not used: the index is built from the store again. A new process loads the file
and applies the store's changes since its version. The file is written again (on a thread of its own, never in a
turn's way) once an index has applied SAVE_AFTER changes since, and at once after records were forgotten, whose
terms and vectors must not outlive them; `forget` removes the user's files in this process's reach.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import threading
import zipfile
from pathlib import Path

import numpy as np

from chatagent.memories.keywords import Keywords
from chatagent.memories.recall import UserIndex
from chatagent.utils.keys import redact
from chatagent.utils.workspace import workspace_root, write_atomic

__all__ = ["SAVE_AFTER", "SAVE_FROM", "load", "remove_user", "save", "save_later", "snapshot_path"]

logger = logging.getLogger("chatagent.memories")

FORMAT = 1
SAVE_FROM = 1000  # records: a smaller index is built from the store in well under a second, and not saved
SAVE_AFTER = 0.05  # of the records: changes applied since the last save that make it worth writing again


def snapshot_path(store_url: str, sqlite_path: Path | None, user: str, model: str | None) -> Path:
    """Where the index of `user` by `model` in the store at `store_url` is saved."""
    name = f"{_digest(user)}-{_digest(model or '')}.npz"
    if sqlite_path is not None:
        return sqlite_path.with_name(sqlite_path.name + "-index") / name
    return workspace_root() / "memory" / "index" / _digest(redact(store_url)) / name


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=12).hexdigest()


def save(index: UserIndex, path: Path, epoch: str, user: str) -> None:
    """Write `index` (its live records, numbered anew) to `path`, atomically."""
    with index.lock:
        n = len(index.ids)
        keep = np.flatnonzero(index.alive[:n])
        meta = {
            "format": FORMAT, "epoch": epoch, "user": user, "model": index.model, "version": index.version,
            "ids": [index.ids[i] for i in keep.tolist()], "scopes": index.scopes, "vocab": index.keywords.names,
        }  # fmt: skip
        arrays = {
            "importance": index.importance[keep], "stamp": index.stamp[keep], "scope": index.scope[keep],
            "key": index.key[keep], "embedded": index.embedded[keep], **index.keywords.arrays(keep),
            "distinct": index.distinct[keep], "distinct_in_scope": index.distinct_in_scope[keep],
            "vectors": (index.vectors[keep] if index.vectors is not None else np.zeros((0, 0))).astype(np.float16),
        }  # fmt: skip
        index.changed = 0
    buffer = io.BytesIO()
    np.savez(buffer, meta=np.frombuffer(json.dumps(meta, ensure_ascii=False).encode("utf-8"), dtype=np.uint8), **arrays)
    write_atomic(path, buffer.getvalue())


def load(path: Path, epoch: str, user: str, model: str | None) -> UserIndex | None:
    """The index saved at `path` for this database, user and model; None if there is none to use."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        logger.warning("ignoring an unreadable memory index %s: %s", path, e)
        return None
    try:
        arrays = np.load(io.BytesIO(data), allow_pickle=False)
        meta = json.loads(arrays["meta"].tobytes().decode("utf-8"))
        if (meta.get("format"), meta.get("epoch"), meta.get("user"), meta.get("model")) != (FORMAT, epoch, user, model):
            return None
        return _index(meta, {name: arrays[name] for name in arrays.files if name != "meta"})
    except (KeyError, TypeError, ValueError, IndexError, zipfile.BadZipFile) as e:
        logger.warning("ignoring a memory index that cannot be read (%s): %s", path, e)
        return None


def _index(meta: dict, arrays: dict[str, np.ndarray]) -> UserIndex:
    ids, n = list(meta["ids"]), len(meta["ids"])
    sized = ("importance", "stamp", "scope", "key", "embedded", "kw_lengths", "distinct", "distinct_in_scope")
    if any(len(arrays[name]) != n for name in sized):
        raise ValueError("inconsistent sizes")
    index = UserIndex(meta["model"])
    index.version = int(meta["version"])
    index.ids, index.position = ids, {rid: i for i, rid in enumerate(ids)}
    index.scopes = list(meta["scopes"])
    index._scope_codes = {scope: i for i, scope in enumerate(index.scopes)}  # pyright: ignore[reportPrivateUsage]
    index.keywords = Keywords.from_arrays(list(meta["vocab"]), arrays)
    index._grow(max(16, n))  # pyright: ignore[reportPrivateUsage]
    index.alive[:n] = True
    index.importance[:n], index.stamp[:n] = arrays["importance"], arrays["stamp"]
    index.scope[:n], index.key[:n] = arrays["scope"], arrays["key"]
    if n and int(index.scope[:n].max()) >= len(index.scopes):
        raise ValueError("a scope outside the scopes")
    vectors = arrays["vectors"]
    if vectors.size:
        if len(vectors) != n:
            raise ValueError("inconsistent sizes")
        index.vectors = np.zeros((len(index.alive), vectors.shape[1]), dtype=np.float32)
        index.vectors[:n] = vectors
        index.embedded[:n] = arrays["embedded"]
    index.distinct[:n], index.distinct_in_scope[:n] = arrays["distinct"], arrays["distinct_in_scope"]
    index._groups = None  # pyright: ignore[reportPrivateUsage]  (made when a change comes)
    index.changed = 0
    return index


_saving: set[Path] = set()
_saving_lock = threading.Lock()


def save_later(index: UserIndex, path: Path, epoch: str, user: str) -> None:
    """`save` on a thread of its own (one at a time per file); a failure costs the next process's start, logged."""
    with _saving_lock:
        if path in _saving:
            return
        _saving.add(path)

    def write() -> None:
        try:
            save(index, path, epoch, user)
        except OSError as e:
            logger.warning("could not save the memory index %s: %s", path, e)
        finally:
            with _saving_lock:
                _saving.discard(path)

    threading.Thread(target=write, name="chatagent-memory-index", daemon=True).start()


def remove_user(store_url: str, sqlite_path: Path | None, user: str) -> None:
    """Delete the saved indexes of `user` (every model's) in this process's reach."""
    folder = snapshot_path(store_url, sqlite_path, user, None).parent
    for path in folder.glob(f"{_digest(user)}-*.npz") if folder.is_dir() else ():
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

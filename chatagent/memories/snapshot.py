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

The file is a JSON header (what the index is of, its ids, terms and scopes, where each array lies) and the raw
arrays after it, each at an offset of ALIGN bytes. It is opened as a memory map, copy-on-write: an array is read
where it is used, not parsed, and the vectors (most of the file: float32, as they are searched) are read only for
the records a recall looks at (`chatagent.memories.rows`), the sign bits that find them being saved too.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import mmap
import threading
from pathlib import Path

import numpy as np

from chatagent.memories.keywords import Keywords
from chatagent.memories.recall import UserIndex
from chatagent.memories.rows import Rows
from chatagent.utils.keys import redact
from chatagent.utils.workspace import workspace_root, write_atomic

__all__ = ["SAVE_AFTER", "SAVE_FROM", "load", "remove_user", "save", "save_later", "snapshot_path"]

logger = logging.getLogger("chatagent.memories")

FORMAT = 2  # 1: an .npz file, read whole and parsed
MAGIC = b"chatagent memory index\n"
ALIGN = 64
SAVE_FROM = 1000  # records: a smaller index is built from the store in well under a second, and not saved
SAVE_AFTER = 0.05  # of the records: changes applied since the last save that make it worth writing again


def snapshot_path(store_url: str, sqlite_path: Path | None, user: str, model: str | None) -> Path:
    """Where the index of `user` by `model` in the store at `store_url` is saved."""
    name = f"{_digest(user)}-{_digest(model or '')}.index"
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
        header = {
            "format": FORMAT, "epoch": epoch, "user": user, "model": index.model, "version": index.version,
            "ids": [index.ids[i] for i in keep.tolist()], "scopes": index.scopes, "vocab": index.keywords.names,
        }  # fmt: skip
        arrays = {
            "importance": index.importance[keep], "stamp": index.stamp[keep], "scope": index.scope[keep],
            "key": index.key[keep], "embedded": index.embedded[keep], **index.keywords.arrays(keep),
            "distinct": index.distinct[keep], "distinct_in_scope": index.distinct_in_scope[keep],
        }  # fmt: skip
        if index.vectors is not None:
            arrays["vectors"] = index.vectors.take(keep)  # float32, as they are searched: no copy to make
            codes, centre, coded = index.signs()
            if codes is not None and centre is not None:
                arrays["codes"], arrays["centre"], header["coded"] = codes[keep], centre, coded
        index.changed = 0
    write_atomic(path, _pack(header, arrays))


def _pack(header: dict, arrays: dict[str, np.ndarray]) -> bytes:
    table: dict[str, list] = {}
    parts: list[bytes] = []
    offset = 0
    for name, array in arrays.items():
        data = np.ascontiguousarray(array).tobytes()
        table[name] = [array.dtype.str, list(array.shape), offset]
        parts += [data, bytes(-len(data) % ALIGN)]
        offset += len(data) + len(parts[-1])
    head = json.dumps({**header, "arrays": table}, ensure_ascii=False).encode("utf-8")
    start = len(MAGIC) + 8 + len(head)
    return b"".join([MAGIC, len(head).to_bytes(8, "little"), head, bytes(-start % ALIGN), *parts])


def load(path: Path, epoch: str, user: str, model: str | None) -> UserIndex | None:
    """The index saved at `path` for this database, user and model; None if there is none to use."""
    try:
        with path.open("rb") as f:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)  # the arrays below are views of it
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:  # ValueError: an empty file
        logger.warning("ignoring an unreadable memory index %s: %s", path, e)
        return None
    try:
        header, arrays = _unpack(mapped)
        if (header.get("format"), header.get("epoch"), header.get("user"), header.get("model")) != (
            FORMAT, epoch, user, model,
        ):  # fmt: skip
            return None
        return _index(header, arrays)
    except (KeyError, TypeError, ValueError, IndexError) as e:
        logger.warning("ignoring a memory index that cannot be read (%s): %s", path, e)
        return None


def _unpack(mapped: mmap.mmap) -> tuple[dict, dict[str, np.ndarray]]:
    """The header and the arrays (views of the map) of a file `_pack` wrote."""
    if mapped[: len(MAGIC)] != MAGIC:
        raise ValueError("not a memory index")
    size = int.from_bytes(mapped[len(MAGIC) : len(MAGIC) + 8], "little")
    start = len(MAGIC) + 8 + size
    header = json.loads(mapped[len(MAGIC) + 8 : start].decode("utf-8"))
    start += -start % ALIGN
    arrays: dict[str, np.ndarray] = {}
    for name, (dtype, shape, offset) in dict(header.get("arrays", {})).items():
        kind = np.dtype(dtype)
        if kind.kind not in "biuf":
            raise ValueError(f"an array of {kind}")
        count = int(np.prod(shape, dtype=np.int64))
        arrays[name] = np.frombuffer(mapped, dtype=kind, count=count, offset=start + int(offset)).reshape(shape)
    return header, arrays


def _index(meta: dict, arrays: dict[str, np.ndarray]) -> UserIndex:
    ids, n = list(meta["ids"]), len(meta["ids"])
    sized = ("importance", "stamp", "scope", "key", "embedded", "kw_lengths", "distinct", "distinct_in_scope")
    if any(len(arrays[name]) != n for name in sized):
        raise ValueError("inconsistent sizes")
    index = UserIndex(meta["model"])
    index.version = int(meta["version"])
    index.ids, index.position = ids, dict(zip(ids, range(n), strict=True))
    index.scopes = list(meta["scopes"])
    index._scope_codes = {scope: i for i, scope in enumerate(index.scopes)}  # pyright: ignore[reportPrivateUsage]
    index.keywords = Keywords.from_arrays(list(meta["vocab"]), arrays)
    index._grow(max(16, n + n // 8))  # pyright: ignore[reportPrivateUsage]  (room for the changes to come)
    index.alive[:n] = True
    index.importance[:n], index.stamp[:n] = arrays["importance"], arrays["stamp"]
    index.scope[:n], index.key[:n] = arrays["scope"], arrays["key"]
    if n and int(index.scope[:n].max()) >= len(index.scopes):
        raise ValueError("a scope outside the scopes")
    vectors = arrays.get("vectors")
    if vectors is not None and vectors.size:
        if vectors.shape != (n, vectors.shape[1]):
            raise ValueError("inconsistent sizes")
        if vectors.dtype != np.float32:
            raise ValueError("vectors of another type")
        index.vectors = Rows.of(vectors)  # read where it is used
        index.vectors.grow(len(index.alive))
        index.embedded[:n] = arrays["embedded"]
        codes, centre = arrays.get("codes"), arrays.get("centre")
        if codes is not None and centre is not None:
            if codes.shape[0] != n or centre.shape != (vectors.shape[1],):
                raise ValueError("inconsistent sizes")
            index.set_signs(codes, centre, int(meta["coded"]))
    index.distinct[:n], index.distinct_in_scope[:n] = arrays["distinct"], arrays["distinct_in_scope"]
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
    for path in folder.glob(f"{_digest(user)}-*.*") if folder.is_dir() else ():  # .npz: format 1's
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

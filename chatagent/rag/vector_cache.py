"""Passage vectors on disk, keyed by the embedder's name and the SHA-256 of the text: a text is embedded once.

    cache = VectorCache(workspace_root() / 'rag' / 'vectors.sqlite3')
    found = cache.get_many(embedder.name, texts)      # {i: vector} for the texts embedded before
    cache.put_many(embedder.name, texts, vectors)

One SQLite file beside the parsed documents and indexes (`<workspace>/rag/`), readable by its owner only, shared
by every process: what one process embedded, the next reads. Vectors are stored as float16 (half the space; the
rounding moves a cosine by less than 0.001). A cache that cannot be read or written costs time, not the answer:
failures are logged and the texts are embedded again.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from chatagent.utils.sql import connect_sqlite, private_sqlite_file

__all__ = ["VectorCache", "text_key"]

logger = logging.getLogger(__name__)

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, key BLOB NOT NULL, vec BLOB NOT NULL, "
    "PRIMARY KEY (model, key)) WITHOUT ROWID"
)
_BATCH = 500  # keys per SELECT (SQLite's limit on parameters is 32766 since 3.32; stay well below)


def text_key(text: str) -> bytes:
    """The cache key of a passage: the SHA-256 of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class VectorCache:
    """Vectors by (model name, text hash) in one SQLite file (see the module docstring); thread-safe."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0

    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        private_sqlite_file(self.path)  # readable by its owner only
        conn = connect_sqlite(self.path, timeout=30, wal=True, synchronous="NORMAL")
        conn.execute(_SCHEMA)
        self._conn, self._pid = conn, os.getpid()
        return conn

    def get_many(self, model: str, texts: Sequence[str]) -> dict[int, np.ndarray]:
        """{position in `texts`: float32 vector} for the texts this model embedded before."""
        keys = [text_key(t) for t in texts]
        where: dict[bytes, list[int]] = {}
        for i, k in enumerate(keys):
            where.setdefault(k, []).append(i)
        found: dict[int, np.ndarray] = {}
        unique = list(where)
        try:
            with self._lock:
                conn = self._connect()
                for start in range(0, len(unique), _BATCH):
                    part = unique[start : start + _BATCH]
                    marks = ",".join("?" * len(part))
                    rows = conn.execute(
                        f"SELECT key, vec FROM vectors WHERE model = ? AND key IN ({marks})", [model, *part]
                    ).fetchall()
                    for key, blob in rows:
                        vector = np.frombuffer(blob, dtype=np.float16).astype(np.float32)
                        for i in where[key]:
                            found[i] = vector
        except sqlite3.Error as e:
            logger.warning("could not read the vector cache %s: %s", self.path, e)
        return found

    def put_many(self, model: str, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Keep `vectors[i]` as the vector of `texts[i]` by `model`."""
        rows = [
            (model, text_key(t), np.asarray(v, dtype=np.float16).tobytes()) for t, v in zip(texts, vectors, strict=True)
        ]
        try:
            with self._lock:
                conn = self._connect()
                conn.execute("BEGIN")
                try:
                    conn.executemany("INSERT OR REPLACE INTO vectors (model, key, vec) VALUES (?, ?, ?)", rows)
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
        except sqlite3.Error as e:
            logger.warning("could not write the vector cache %s: %s", self.path, e)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

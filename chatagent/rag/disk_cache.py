"""Parsed files and indexes on disk under `<workspace>/rag/`, in files named by their cache key (a hash) only.

An unreadable file counts as missing and a failed write costs the cache, not the answer: both are logged.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from chatagent.rag.chunking import Chunk
from chatagent.rag.file_index import ParsedFile
from chatagent.rag.parsers import Page
from chatagent.utils.workspace import read_private, write_atomic

if TYPE_CHECKING:
    from chatagent.rag.embedders import Embedder  # numpy: types only
    from chatagent.rag.index import Index  # numpy: when an index is loaded
    from chatagent.rag.vector_cache import VectorCache  # numpy: types only

__all__ = ["CACHE_VERSION", "DiskCache"]

logger = logging.getLogger(__name__)

CACHE_VERSION = "6"  # bump when parsing, chunking or analysis changes what is cached


class DiskCache:
    """Parsed files as `docs/<key>.json` and indexes as `indexes/<key>.npz` under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _doc_path(self, key: str) -> Path:
        return self.root / "docs" / key[:2] / f"{key}.json"

    def load_doc(self, key: str) -> ParsedFile | None:
        """The parsed file saved under `key`, or None."""
        path = self._doc_path(key)
        try:
            raw = orjson.loads(read_private(path))  # (not a file another user left there)
            pages = [Page(n, t) for n, t in raw["pages"]]
            chunks = [Chunk(i, raw["source"], p, lp, t, k) for i, p, lp, k, t in raw["chunks"]]
            return ParsedFile(raw["digest"], raw["source"], pages, chunks, int(raw["tokens"]))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as e:
            logger.warning("ignoring an unreadable cache file %s: %s", path, e)
            return None

    def save_doc(self, key: str, entry: ParsedFile) -> None:
        payload = {
            "digest": entry.digest,
            "source": entry.source,
            "tokens": entry.tokens,
            "pages": [[p.number, p.text] for p in entry.pages],
            "chunks": [[c.id, c.page, c.last_page, c.tokens, c.text] for c in entry.chunks],
        }
        _write_atomic(self._doc_path(key), orjson.dumps(payload))

    def _index_path(self, key: str) -> Path:
        return self.root / "indexes" / key[:2] / f"{key}.npz"

    def load_index(self, key: str, embedder: Embedder | None, vectors: VectorCache | None) -> Index | None:
        """The index saved under `key` (searching by meaning with `embedder`, its vectors kept in `vectors`), or
        None."""
        from chatagent.rag.index import Index  # numpy: when an index is loaded

        path = self._index_path(key)
        try:
            return Index.from_bytes(read_private(path), embedder=embedder, vector_cache=vectors)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            logger.warning("ignoring an unreadable cache file %s: %s", path, e)
            return None

    def save_index(self, key: str, index: Index) -> None:
        _write_atomic(self._index_path(key), index.to_bytes())


def _write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file and a rename, so readers never see half a file."""
    try:
        write_atomic(path, data)
    except OSError as e:  # a read-only or full workspace costs the cache, not the answer
        logger.warning("could not write the cache file %s: %s", path, e)

"""Parsed documents and their indexes, cached by content hash in memory and on disk; retrieval within a budget.

    from chatagent.rag import retrieve
    found = retrieve(['manual.pdf', 'notes.docx'], 'How do I install packages?', max_tokens=3000)
    for chunk in found.chunks:
        print(chunk.source, chunk.pages, chunk.text[:80])
    print(found.errors)        # DocumentErrors of files that could not be read (the rest still answer)

A file is keyed by the SHA-256 of its bytes, not by its path: an edited file is read again, a copy
under another name is not. Parsed documents (as chunks) and the index of each set of files are kept in
memory and under `<workspace>/rag/` (CHATAGENT_WORKSPACE, default ~/.cache/chatagent) in files named by
hashes only. Adding a file to a set parses only that file. Threads asking for the same new file
wait for one parse. Documents opened with a password are cached in memory only.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from chatagent.rag.chunking import DEFAULT_CHUNK_TOKENS, DEFAULT_OVERLAP_TOKENS, chunk_document
from chatagent.rag.disk_cache import CACHE_VERSION, DiskCache
from chatagent.rag.document import ParseJob
from chatagent.rag.file_index import FileIndex, ParsedFile, Retrieved, format_chunks, hash_key
from chatagent.rag.parsers import Document, DocumentError, display_name, max_file_bytes, parse_bytes, read_file
from chatagent.rag.progress import Progress, ProgressCallback, page_reporter, report
from chatagent.rag.urls import FetchedUrls, is_url, read_data_url
from chatagent.utils.tokens import count_tokens
from chatagent.utils.workspace import workspace_root

if TYPE_CHECKING:
    from chatagent.rag.embedders import Embedder  # numpy: types only
    from chatagent.rag.vector_cache import VectorCache  # numpy: types only

__all__ = ["DocStore", "FileIndex", "Progress", "Retrieved", "default_store", "format_chunks", "retrieve"]

logger = logging.getLogger(__name__)


DEFAULT_MAX_TEXT_CHARS = 16_000_000  # of text one file may give to be searched (~30 s of preparing on 2 cores)
INDEX_BATCH = 2000  # pieces indexed between two looks at the deadline
RACY_NS = 2_000_000_000  # a file changed this recently (ns) is hashed again at its next read, whatever its times say


class DocStore:
    """Parses, chunks and indexes files once per content, and retrieves from sets of them (thread-safe).

    The work a file costs is bounded by its size: one may give at most `max_text_chars` characters of text (more is a
    DocumentError 'too_large', a clear message for the model), and a run's `deadline` stops reading, preparing and
    indexing it wherever it is (RunDeadlineExceeded); progress says what it is doing ('prepare', 'indexing')."""

    def __init__(
        self,
        workspace: str | os.PathLike[str] | None = None,
        *,
        chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
        overlap_tokens: int = DEFAULT_OVERLAP_TOKENS,
        max_bytes: int | None = None,
        max_text_chars: int = DEFAULT_MAX_TEXT_CHARS,
        disk_cache: bool = True,
        memory_docs: int = 256,
        memory_indexes: int = 32,
        embedder: Embedder | str | None = "default",
    ) -> None:
        self.root = (Path(workspace).expanduser() if workspace is not None else workspace_root()) / "rag"
        self._embedder = embedder
        self.chunk_tokens = chunk_tokens
        self.overlap_tokens = overlap_tokens
        self.max_bytes = max_bytes
        self.max_text_chars = max_text_chars
        self.disk_cache = disk_cache
        self._docs: OrderedDict[str, ParsedFile] = OrderedDict()
        self._failed: OrderedDict[str, DocumentError] = OrderedDict()
        self._indexes: OrderedDict[str, FileIndex] = OrderedDict()
        self._memory_docs = memory_docs
        self._memory_indexes = memory_indexes
        self._lock = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}
        self._read_as: OrderedDict[str, tuple[tuple[int, ...], str]] = OrderedDict()  # path -> (its stat, digest)
        self._disk = DiskCache(self.root)
        self._vectors: VectorCache | None = None
        self._urls = FetchedUrls()
        self.parses = 0  # files actually parsed by this store (not served from a cache)

    # ------------------------------------------------------------------------------ public API

    @property
    def embedder(self) -> Embedder | None:
        """The embedder of this store's indexes (None: keywords only), resolved on first use."""
        if self._embedder == "default":
            from chatagent.rag.embedders import default_embedder  # numpy, the engine: when an index is built

            self._embedder = default_embedder()
        return self._embedder  # type: ignore[return-value]

    @property
    def vectors(self) -> VectorCache | None:
        """The passages' vectors on disk, `<workspace>/rag/vectors.sqlite3` (None without the disk cache)."""
        if self._vectors is None and self.disk_cache:
            from chatagent.rag.vector_cache import VectorCache  # numpy: when an index is built

            self._vectors = VectorCache(self.root / "vectors.sqlite3")
        return self._vectors

    def retrieve(
        self,
        files: Sequence[str | os.PathLike[str]],
        query: str,
        max_tokens: int = 4000,
        *,
        passwords: dict[str, str] | None = None,
        on_progress: ProgressCallback | None = None,
        deadline: float | None = None,
    ) -> Retrieved:
        """The best chunks of `files` (paths or http(s) URLs) for `query` within `max_tokens`; see Retrieved.

        `deadline` (a time.monotonic() value) stops reading new files with RunDeadlineExceeded once passed."""
        file_index, errors = self.load(files, passwords=passwords, on_progress=on_progress, deadline=deadline)
        self.searching(file_index, on_progress)
        found = file_index.select(query, max_tokens)
        found.errors = errors
        return found

    @staticmethod
    def searching(file_index: FileIndex, on_progress: ProgressCallback | None) -> None:
        """Tell `on_progress` that `file_index` is searched: by keywords alone while its passages are embedded."""
        index = file_index.index
        if not index.dense_ready and index.embedder is not None:  # the answer does not wait: keywords meanwhile
            done, total = index.embedding_progress
            report(on_progress, Progress("embed", "", done, total))
        report(on_progress, Progress("search", "", len(file_index.entries), len(file_index.entries)))

    def load(
        self,
        files: Sequence[str | os.PathLike[str]],
        *,
        passwords: dict[str, str] | None = None,
        on_progress: ProgressCallback | None = None,
        deadline: float | None = None,
    ) -> tuple[FileIndex, list[DocumentError]]:
        """The index of `files` (built once per set of contents) and the errors of files that could not be read.

        Parsing a new file stops with RunDeadlineExceeded once `deadline` (a time.monotonic() value) has passed."""
        entries: list[ParsedFile] = []
        errors: list[DocumentError] = []
        seen: set[str] = set()
        total = len(files)
        for n, file in enumerate(files, 1):
            name = display_name(file)
            started = time.perf_counter()
            try:
                stat = _local_stat(file)
                entry, parsed = self._unchanged(file, stat, name, _password(passwords, file, name)), False
                if entry is None:
                    data, name = self._read(file)
                    entry, parsed = self._entry(data, name, _password(passwords, file, name), deadline, on_progress)
                    self._remember_read(file, stat, entry.digest)
            except DocumentError as e:
                errors.append(e)
                logger.warning("could not read %s: %s", name, e)
                report(on_progress, Progress("failed", name, n, total, time.perf_counter() - started))
                continue
            if entry.digest in seen:
                continue  # the same content twice in one set is indexed once
            seen.add(entry.digest)
            if entry.source != name:  # same content under another name: cite the name the user gave
                entry = entry.renamed(name)
            entries.append(entry)
            seconds = time.perf_counter() - started
            if parsed:
                logger.info("parsed %s: %d pages, %d chunks in %.2f s [%d/%d]", name, len(entry.pages),
                            len(entry.chunks), seconds, n, total)  # fmt: skip
            report(on_progress, Progress("parse" if parsed else "cached", name, n, total, seconds))
        return self._index(entries, on_progress, deadline), errors

    def document(
        self, file: str | os.PathLike[str], password: str | None = None, *, deadline: float | None = None
    ) -> Document:
        """The parsed Document of one file (cached like everything else); raises DocumentError."""
        data, name = self._read(file)
        entry, _ = self._entry(data, name, password, deadline)
        return Document(source=name, kind=Path(name).suffix.lower().lstrip("."), pages=list(entry.pages))

    def clear_memory(self) -> None:
        """Forget the in-memory caches (the disk cache stays)."""
        with self._lock:
            self._docs.clear()
            self._failed.clear()
            self._indexes.clear()
        self._urls.clear()

    # ------------------------------------------------------------------------------ files

    def _read(self, file: str | os.PathLike[str]) -> tuple[bytes, str]:
        text = os.fspath(file)
        if isinstance(text, str) and is_url(text, "http", "https"):
            return self._urls.get(text, max_file_bytes(self.max_bytes))
        if isinstance(text, str) and is_url(text, "data"):  # never a path, whatever its case
            return read_data_url(text, max_file_bytes(self.max_bytes))
        return read_file(file, max_file_bytes(self.max_bytes))

    def _unchanged(
        self, file: str | os.PathLike[str], stat: tuple[int, ...] | None, name: str, password: str | None
    ) -> ParsedFile | None:
        """The parsed entry of a local file unchanged since this store read it (same inode, size and times), from
        memory, without reading and hashing the file again (that took most of a warm question's 4 ms on 677
        pages); None when it changed, was never read, or its entry left memory."""
        if stat is None:
            return None
        with self._lock:
            known = self._read_as.get(str(file))
            if known is None or known[0] != stat:
                return None
            key = self._key(known[1], name, password)
            entry = self._docs.get(key)
            if entry is not None:
                self._docs.move_to_end(key)
            return entry

    def _remember_read(self, file: str | os.PathLike[str], stat: tuple[int, ...] | None, digest: str) -> None:
        """Remember which content `file` had at `stat`, unless it changed too recently for its times to tell: a
        file system keeps times to a tick (up to 2 s on some), so a same-size edit within one would look unchanged."""
        if stat is None or time.time_ns() - max(stat[3], stat[4]) < RACY_NS:
            return
        with self._lock:
            self._read_as[str(file)] = (stat, digest)
            self._read_as.move_to_end(str(file))
            while len(self._read_as) > self._memory_docs:
                self._read_as.popitem(last=False)

    def _key(self, digest: str, name: str, password: str | None) -> str:
        """The cache key of a file's content parsed with this store's settings (and `password`)."""
        kind = Path(name).suffix.lower()
        key = hash_key(CACHE_VERSION, digest, kind, str(self.chunk_tokens), str(self.overlap_tokens))
        return hash_key(key, "password", password) if password else key

    # ------------------------------------------------------------------------------ documents

    def _entry(
        self,
        data: bytes,
        name: str,
        password: str | None,
        deadline: float | None,
        on_progress: ProgressCallback | None = None,
    ) -> tuple[ParsedFile, bool]:
        """The parsed entry for this content: from memory, disk, or parsed now (once, even across threads)."""
        digest = hashlib.sha256(data).hexdigest()
        key = self._key(digest, name, password)  # with a password: served only to callers who give it
        with self._lock:
            entry = self._docs.get(key)
            if entry is not None:
                self._docs.move_to_end(key)
                return entry, False
            failure = self._failed.get(key)
            if failure is not None:
                raise _renamed_error(failure, name)
            lock = self._key_locks.setdefault(key, threading.Lock())
        with lock:
            try:
                return self._entry_locked(key, data, name, password, digest, deadline, on_progress)
            finally:
                self._drop_key_lock(key, lock)

    def _entry_locked(
        self,
        key: str,
        data: bytes,
        name: str,
        password: str | None,
        digest: str,
        deadline: float | None,
        on_progress: ProgressCallback | None,
    ) -> tuple[ParsedFile, bool]:
        """`_entry` for the one thread that holds `key`'s lock."""
        with self._lock:
            entry = self._docs.get(key)
            failure = self._failed.get(key)
        if entry is not None:
            return entry, False
        if failure is not None:
            raise _renamed_error(failure, name)
        entry = self._disk.load_doc(key) if self.disk_cache else None
        parsed = entry is None
        if entry is None:
            try:
                entry = self._parse(data, name, password, digest, deadline, on_progress)
            except DocumentError as e:
                with self._lock:
                    self._failed[key] = e
                    while len(self._failed) > self._memory_docs:
                        self._failed.popitem(last=False)
                raise
            if self.disk_cache and not password:
                self._disk.save_doc(key, entry)
        with self._lock:
            self._docs[key] = entry
            while len(self._docs) > self._memory_docs:
                self._docs.popitem(last=False)
        return entry, parsed

    def _drop_key_lock(self, key: str, lock: threading.Lock) -> None:
        """Forget `key`'s lock once its holder is done, whatever the outcome (a waiter holds its own reference)."""
        with self._lock:
            if self._key_locks.get(key) is lock:
                del self._key_locks[key]

    def _parse(
        self,
        data: bytes,
        name: str,
        password: str | None,
        digest: str,
        deadline: float | None,
        on_progress: ProgressCallback | None = None,
    ) -> ParsedFile:
        with self._lock:
            self.parses += 1
        on_page = page_reporter(on_progress, name)
        doc = parse_bytes(data, name, password, max_bytes=self.max_bytes, deadline=deadline, on_page=on_page)
        size = sum(len(p.text) for p in doc.pages)
        if size > self.max_text_chars:  # cutting, counting and indexing take time in proportion
            raise DocumentError(
                "too_large",
                f"'{name}' gives {size / 1e6:.0f} million characters of text, more than one file may give to be "
                f"searched ({self.max_text_chars / 1e6:.0f} million; raise it with max_text_chars).",
                name,
            )
        prepared = _Preparing(name, size, ParseJob(name, deadline=deadline), on_progress)
        counts = [_count(p.text, prepared) for p in doc.pages]
        chunks = chunk_document(
            doc, self.chunk_tokens, self.overlap_tokens, key=digest, page_tokens=counts, on_text=prepared.chunked
        )
        return ParsedFile(digest, name, doc.pages, chunks, sum(counts))

    # ------------------------------------------------------------------------------ indexes

    def _index(
        self, entries: list[ParsedFile], on_progress: ProgressCallback | None, deadline: float | None = None
    ) -> FileIndex:
        from chatagent.rag.index import Index  # numpy: when an index is built or loaded

        # in the caller's order: a set that fits comes back whole, in that order
        key = hash_key(CACHE_VERSION, "index", *(f"{e.digest}:{e.source}" for e in entries),
                       str(self.chunk_tokens), str(self.overlap_tokens))  # fmt: skip
        with self._lock:
            found = self._indexes.get(key)
            if found is not None:
                self._indexes.move_to_end(key)
                return found
            lock = self._key_locks.setdefault(key, threading.Lock())
        with lock:
            try:
                with self._lock:
                    found = self._indexes.get(key)
                if found is not None:
                    return found
                started = time.perf_counter()
                index = self._disk.load_index(key, self.embedder, self.vectors) if self.disk_cache else None
                if index is None:
                    index = Index(embedder=self.embedder, vector_cache=self.vectors)
                    chunks = [c for e in entries for c in e.chunks]
                    job = ParseJob(", ".join(e.source for e in entries[:3]), deadline=deadline)
                    for at in range(0, len(chunks), INDEX_BATCH):  # the run's deadline stops a long build
                        job.check(f"its indexing ({at} of {len(chunks)} pieces)")
                        if at:
                            report(on_progress, Progress("indexing", "", at, len(chunks)))
                        batch = chunks[at : at + INDEX_BATCH]
                        index.add_texts([c.id for c in batch], [c.text for c in batch])
                    index.scores("")  # build the postings now, not at the first query
                    if self.disk_cache:
                        self._disk.save_index(key, index)
                index.start_embedding()  # vectors from the cache now; the rest on the background thread
                file_index = FileIndex(entries, index)
                seconds = time.perf_counter() - started
                logger.info("indexed %d files, %d chunks in %.2f s", len(entries), len(file_index.chunks), seconds)
                report(on_progress, Progress("index", "", len(entries), len(entries), seconds))
                with self._lock:
                    self._indexes[key] = file_index
                    while len(self._indexes) > self._memory_indexes:
                        self._indexes.popitem(last=False)
                return file_index
            finally:
                self._drop_key_lock(key, lock)


_default_stores: dict[Path, DocStore] = {}
_default_lock = threading.Lock()


class _Preparing:
    """Counting and cutting one file's text: the deadline looked at, and progress told, as it goes (in MB)."""

    __slots__ = ("name", "size", "job", "on_progress", "counted", "shown")

    def __init__(self, name: str, size: int, job: ParseJob, on_progress: ProgressCallback | None) -> None:
        self.name, self.size, self.job, self.on_progress = name, size, job, on_progress
        self.counted = 0  # characters counted (the first half of the work), then cut (the second)
        self.shown = -1

    def step(self, done: int) -> None:
        """`done` characters of 2 * size handled: stop past the deadline, tell the progress at each new MB."""
        mb = done >> 21  # of the two passes, in MB of the text
        if mb != self.shown and self.size >= 1 << 20:
            self.shown = mb
            report(self.on_progress, Progress("prepare", self.name, mb, max(1, self.size >> 20)))
        share = done / (2 * self.size) if self.size else 1.0
        self.job.check(f"preparing it for search ({share:.0%})")

    def chunked(self, chars: int) -> None:
        self.step(self.size + chars)


_COUNT_SLICE = 1 << 20  # characters counted between two looks at the deadline


def _count(text: str, prepared: _Preparing) -> int:
    """The tokens of a page, counted a slice at a time (cut at a space, so that no word is split)."""
    if len(text) <= _COUNT_SLICE:
        prepared.counted += len(text)
        prepared.step(prepared.counted)
        return count_tokens(text)
    total, at = 0, 0
    while at < len(text):
        end = text.find(" ", at + _COUNT_SLICE)
        end = len(text) if end < 0 else end
        total += count_tokens(text[at:end])
        prepared.counted += end - at
        prepared.step(prepared.counted)
        at = end
    return total


def default_store() -> DocStore:
    """The process-wide store for the current workspace directory."""
    root = workspace_root()
    with _default_lock:
        store = _default_stores.get(root)
        if store is None:
            store = _default_stores[root] = DocStore(root)
        return store


def retrieve(
    files: Sequence[str | os.PathLike[str]],
    query: str,
    max_tokens: int = 4000,
    *,
    passwords: dict[str, str] | None = None,
    on_progress: ProgressCallback | None = None,
    store: DocStore | None = None,
    deadline: float | None = None,
) -> Retrieved:
    """The best chunks of `files` for `query` within `max_tokens` (everything, in order, when it all fits)."""
    return (store or default_store()).retrieve(
        files, query, max_tokens, passwords=passwords, on_progress=on_progress, deadline=deadline
    )


def _password(passwords: dict[str, str] | None, file: str | os.PathLike[str], name: str) -> str | None:
    """The password given for `file`, by its path or by its name."""
    return (passwords or {}).get(str(file)) or (passwords or {}).get(name)


def _local_stat(file: str | os.PathLike[str]) -> tuple[int, ...] | None:
    """What tells a local file's content changed (device, inode, size, modification and change times in ns); None
    for a URL or a path that cannot be statted (reading it then says why)."""
    path = os.fspath(file)
    if not isinstance(path, str) or is_url(path, "http", "https") or is_url(path, "data"):
        return None
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _renamed_error(error: DocumentError, name: str) -> DocumentError:
    if not error.source or error.source == name:
        return error
    return DocumentError(error.reason, str(error).replace(f"'{error.source}'", f"'{name}'"), name)

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from chatagent.rag.chunking import (
    DEFAULT_CHUNK_TOKENS,
    DEFAULT_OVERLAP_TOKENS,
    Chunk,
    chunk_document,
    split_sentences,
)
from chatagent.rag.document import PageCallback, ParseJob
from chatagent.rag.parsers import Document, DocumentError, Page, display_name, max_file_bytes, parse_bytes, read_file
from chatagent.rag.workspace import workspace_root, write_atomic
from chatagent.tokens import count_tokens, truncate_tokens

if TYPE_CHECKING:
    from chatagent.rag.index import Index

__all__ = ["DocStore", "FileIndex", "Progress", "Retrieved", "default_store", "format_chunks", "retrieve"]

logger = logging.getLogger(__name__)

CACHE_VERSION = "5"  # bump when parsing, chunking or analysis changes what is cached
URL_TIMEOUT_S = 30.0
URL_CACHE_S = 300.0  # a fetched URL is fetched again after this many seconds
URL_CACHE_BYTES = 32 * 2**20  # fetched contents kept at most, in all (the oldest go first)


@dataclass(frozen=True, slots=True)
class Progress:
    """One step of loading and searching a file set. By `stage`:

    - 'read': a page of `source` was read (`done` pages of `total`; PDFs, as they are parsed);
    - 'parse', 'cached', 'failed': file number `done` of `total` was parsed, found in the cache, or failed;
    - 'index': the set's index is ready (`total` files); 'search': the set is being searched.
    """

    stage: str
    source: str
    done: int
    total: int
    seconds: float = 0.0

    def describe(self) -> str:
        """A short line for a person watching: 'Reading manual.pdf: page 40 of 113'."""
        if self.stage == "read":
            return f"Reading {self.source}: page {self.done} of {self.total}"
        if self.stage == "parse":
            return f"Read {self.source} (file {self.done} of {self.total}, {self.seconds:.1f} s)"
        if self.stage == "cached":
            return f"{self.source}: read before (file {self.done} of {self.total})"
        if self.stage == "failed":
            return f"Could not read {self.source}"
        if self.stage == "index":
            return f"Indexed {self.total} file{'s' if self.total != 1 else ''}"
        if self.stage == "search":
            return "Searching the files"
        return f"{self.stage} {self.source}".strip()


ProgressCallback = Callable[[Progress], Any]


@dataclass(slots=True)
class _Entry:
    """A parsed file: its chunks and pages (under the name it was first parsed with)."""

    digest: str
    source: str
    pages: list[Page]
    chunks: list[Chunk]
    tokens: int  # of all pages


@dataclass(slots=True)
class Retrieved:
    """A retrieval's `chunks`, best first (pages that match nothing in document order), and the files that failed."""

    chunks: list[Chunk]
    errors: list[DocumentError] = field(default_factory=list)
    complete: bool = False  # every file's full text fitted in the budget and is here
    tokens: int = 0  # of `as_text()`, headers included (about)

    def as_text(self) -> str:
        """The chunks formatted for a prompt, each headed by its citation `[file, p. N]`."""
        return format_chunks(self.chunks)


def format_chunks(chunks: Sequence[Chunk]) -> str:
    """Chunks as prompt text: `[file, p. N]` then the text, separated by blank lines."""
    return "\n\n".join(f"[{c.source}, {c.pages}]\n{c.text}" for c in chunks)


class FileIndex:
    """The chunks of a set of files and one BM25 index over them, built once and searched per query."""

    def __init__(self, entries: list[_Entry], index: Index) -> None:
        self.entries = entries
        self.chunks: dict[str, Chunk] = {c.id: c for e in entries for c in e.chunks}
        self.index = index
        # everything, with a `[file, p. N]` header per page
        self.total_tokens = sum(e.tokens + len(e.pages) * _header_tokens(e.source) for e in entries)
        self._pages: list[Chunk] | None = None  # every page as a chunk, made at the first query that fits them all

    def search(self, query: str, top_k: int = 10) -> list[tuple[Chunk, float]]:
        """The best chunks for `query` with their scores, best first."""
        return [(self.chunks[str(i)], s) for i, s in self.index.search(query, top_k=top_k)]

    def select(self, query: str, max_tokens: int) -> Retrieved:
        """Every page when all fit in `max_tokens`, else the best chunks that fit; best first either way."""
        if self.total_tokens <= max_tokens:
            if self._pages is None:  # a benign race: two threads may both make the same list
                self._pages = [_page_chunk(e, p) for e in self.entries for p in e.pages]
            best: dict[tuple[str, int], float] = {}  # a page's score: its best chunk's
            for chunk, score in self.search(query, top_k=len(self.chunks)):
                best.setdefault((chunk.source, chunk.page), score)
            pages = sorted(self._pages, key=lambda c: -best.get((c.source, c.page), 0.0))  # stable: ties in order
            return Retrieved(pages, complete=True, tokens=self.total_tokens)
        chosen: list[Chunk] = []
        used = 0  # tokens of the chosen chunks with their `[file, p. N]` headers
        top_k = min(len(self.chunks), max(64, max_tokens // 50))
        for chunk, _ in self.search(query, top_k=top_k):
            header = _header_tokens(chunk.source)
            room = max_tokens - used - header
            if chunk.tokens <= room:
                chosen.append(chunk)
                used += header + chunk.tokens
            elif room >= 100 or (not chosen and room > 0):  # too big for what is left: its best sentences
                text = _best_part(chunk.text, query, room, self.index.analyze)
                if text and not any(text in c.text for c in chosen):  # overlapping chunks share sentences
                    chosen.append(replace(chunk, text=text, tokens=count_tokens(text)))
                    used += header + chosen[-1].tokens
            if max_tokens - used < 20:
                break
        if not chosen:  # the query matches nothing ("summarise this"): the documents' beginnings
            for entry in self.entries:
                for chunk in entry.chunks[:3]:
                    cost = _header_tokens(chunk.source) + chunk.tokens
                    if used + cost <= max_tokens:
                        chosen.append(chunk)
                        used += cost
        return Retrieved(chosen, tokens=used)


class DocStore:
    """Parses, chunks and indexes files once per content, and retrieves from sets of them (thread-safe)."""

    def __init__(
        self,
        workspace: str | os.PathLike[str] | None = None,
        *,
        chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
        overlap_tokens: int = DEFAULT_OVERLAP_TOKENS,
        max_bytes: int | None = None,
        disk_cache: bool = True,
        memory_docs: int = 256,
        memory_indexes: int = 32,
    ) -> None:
        self.root = (Path(workspace).expanduser() if workspace is not None else workspace_root()) / "rag"
        self.chunk_tokens = chunk_tokens
        self.overlap_tokens = overlap_tokens
        self.max_bytes = max_bytes
        self.disk_cache = disk_cache
        self._docs: OrderedDict[str, _Entry] = OrderedDict()
        self._failed: OrderedDict[str, DocumentError] = OrderedDict()
        self._indexes: OrderedDict[str, FileIndex] = OrderedDict()
        self._memory_docs = memory_docs
        self._memory_indexes = memory_indexes
        self._lock = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}
        # (URL policy, url) -> (when fetched, content, name); oldest first, URL_CACHE_BYTES in all
        self._urls: OrderedDict[tuple, tuple[float, bytes, str]] = OrderedDict()
        self.parses = 0  # files actually parsed by this store (not served from a cache)

    # ------------------------------------------------------------------------------ public API

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
        _report(on_progress, Progress("search", "", len(file_index.entries), len(file_index.entries)))
        found = file_index.select(query, max_tokens)
        found.errors = errors
        return found

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
        entries: list[_Entry] = []
        errors: list[DocumentError] = []
        seen: set[str] = set()
        total = len(files)
        for n, file in enumerate(files, 1):
            name = display_name(file)
            started = time.perf_counter()
            try:
                data, name = self._read(file)
                password = (passwords or {}).get(str(file)) or (passwords or {}).get(name)
                on_page = _page_reporter(on_progress, name)
                entry, parsed = self._entry(data, name, password, deadline, on_page)
            except DocumentError as e:
                errors.append(e)
                logger.warning("could not read %s: %s", name, e)
                _report(on_progress, Progress("failed", name, n, total, time.perf_counter() - started))
                continue
            if entry.digest in seen:
                continue  # the same content twice in one set is indexed once
            seen.add(entry.digest)
            if entry.source != name:  # same content under another name: cite the name the user gave
                entry = _renamed(entry, name)
            entries.append(entry)
            seconds = time.perf_counter() - started
            if parsed:
                logger.info("parsed %s: %d pages, %d chunks in %.2f s [%d/%d]", name, len(entry.pages),
                            len(entry.chunks), seconds, n, total)  # fmt: skip
            _report(on_progress, Progress("parse" if parsed else "cached", name, n, total, seconds))
        return self._index(entries, on_progress), errors

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
        if isinstance(text, str) and text.startswith(("http://", "https://")):
            return self._fetch(text)
        return read_file(file, max_file_bytes(self.max_bytes))

    def _fetch(self, url: str) -> tuple[bytes, str]:
        from chatagent.url_fetch import url_policy

        key = (url_policy(), url)  # what a remote client may not fetch is not served to it from the cache either
        with self._lock:
            cached = self._urls.get(key)
        if cached is not None and time.monotonic() - cached[0] < URL_CACHE_S:
            return cached[1], cached[2]
        data, name = fetch_url(url, max_file_bytes(self.max_bytes))
        now = time.monotonic()
        with self._lock:
            self._urls.pop(key, None)
            while self._urls and now - next(iter(self._urls.values()))[0] >= URL_CACHE_S:
                self._urls.popitem(last=False)  # expired content is not kept in memory
            self._urls[key] = (now, data, name)
            kept = sum(len(c) for _, c, _ in self._urls.values())
            while kept > URL_CACHE_BYTES:  # nor more than the bound (the oldest go first)
                kept -= len(self._urls.popitem(last=False)[1][1])
        return data, name

    # ------------------------------------------------------------------------------ documents

    def _entry(
        self,
        data: bytes,
        name: str,
        password: str | None,
        deadline: float | None,
        on_page: PageCallback | None = None,
    ) -> tuple[_Entry, bool]:
        """The parsed entry for this content: from memory, disk, or parsed now (once, even across threads)."""
        digest = hashlib.sha256(data).hexdigest()
        kind = Path(name).suffix.lower()
        key = _hash(CACHE_VERSION, digest, kind, str(self.chunk_tokens), str(self.overlap_tokens))
        if password:  # text opened with a password is served only to callers who give that password
            key = _hash(key, "password", password)
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
            with self._lock:
                entry = self._docs.get(key)
                failure = self._failed.get(key)
            if entry is not None:
                return entry, False
            if failure is not None:
                raise _renamed_error(failure, name)
            entry = self._load_doc(key) if self.disk_cache else None
            parsed = entry is None
            if entry is None:
                try:
                    entry = self._parse(data, name, password, digest, deadline, on_page)
                except DocumentError as e:
                    with self._lock:
                        self._failed[key] = e
                        while len(self._failed) > self._memory_docs:
                            self._failed.popitem(last=False)
                        self._key_locks.pop(key, None)
                    raise
                if self.disk_cache and not password:
                    self._save_doc(key, entry)
            with self._lock:
                self._docs[key] = entry
                while len(self._docs) > self._memory_docs:
                    self._docs.popitem(last=False)
                self._key_locks.pop(key, None)
            return entry, parsed

    def _parse(
        self,
        data: bytes,
        name: str,
        password: str | None,
        digest: str,
        deadline: float | None,
        on_page: PageCallback | None = None,
    ) -> _Entry:
        with self._lock:
            self.parses += 1
        doc = parse_bytes(data, name, password, max_bytes=self.max_bytes, deadline=deadline, on_page=on_page)
        ParseJob(name, deadline=deadline).check("its chunking")  # a huge text takes seconds to chunk and index
        counts = [count_tokens(p.text) for p in doc.pages]
        chunks = chunk_document(doc, self.chunk_tokens, self.overlap_tokens, key=digest, page_tokens=counts)
        return _Entry(digest, name, doc.pages, chunks, sum(counts))

    def _doc_path(self, key: str) -> Path:
        return self.root / "docs" / key[:2] / f"{key}.json"

    def _load_doc(self, key: str) -> _Entry | None:
        path = self._doc_path(key)
        try:
            raw = orjson.loads(path.read_bytes())
            pages = [Page(n, t) for n, t in raw["pages"]]
            chunks = [Chunk(i, raw["source"], p, lp, t, k) for i, p, lp, k, t in raw["chunks"]]
            return _Entry(raw["digest"], raw["source"], pages, chunks, int(raw["tokens"]))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as e:
            logger.warning("ignoring an unreadable cache file %s: %s", path, e)
            return None

    def _save_doc(self, key: str, entry: _Entry) -> None:
        payload = {
            "digest": entry.digest,
            "source": entry.source,
            "tokens": entry.tokens,
            "pages": [[p.number, p.text] for p in entry.pages],
            "chunks": [[c.id, c.page, c.last_page, c.tokens, c.text] for c in entry.chunks],
        }
        _write_atomic(self._doc_path(key), orjson.dumps(payload))

    # ------------------------------------------------------------------------------ indexes

    def _index(self, entries: list[_Entry], on_progress: ProgressCallback | None) -> FileIndex:
        from chatagent.rag.index import Index

        # in the caller's order: a set that fits comes back whole, in that order
        key = _hash(CACHE_VERSION, "index", *(f"{e.digest}:{e.source}" for e in entries),
                    str(self.chunk_tokens), str(self.overlap_tokens))  # fmt: skip
        with self._lock:
            found = self._indexes.get(key)
            if found is not None:
                self._indexes.move_to_end(key)
                return found
            lock = self._key_locks.setdefault(key, threading.Lock())
        with lock:
            with self._lock:
                found = self._indexes.get(key)
            if found is not None:
                return found
            started = time.perf_counter()
            index = self._load_index(key) if self.disk_cache else None
            if index is None:
                index = Index()
                chunks = [c for e in entries for c in e.chunks]
                index.add_texts([c.id for c in chunks], [c.text for c in chunks])
                index.search("")  # build the postings now, not at the first query
                if self.disk_cache:
                    _write_atomic(self._index_path(key), index.to_bytes())
            file_index = FileIndex(entries, index)
            seconds = time.perf_counter() - started
            logger.info("indexed %d files, %d chunks in %.2f s", len(entries), len(file_index.chunks), seconds)
            _report(on_progress, Progress("index", "", len(entries), len(entries), seconds))
            with self._lock:
                self._indexes[key] = file_index
                while len(self._indexes) > self._memory_indexes:
                    self._indexes.popitem(last=False)
                self._key_locks.pop(key, None)
            return file_index

    def _index_path(self, key: str) -> Path:
        return self.root / "indexes" / key[:2] / f"{key}.npz"

    def _load_index(self, key: str) -> Index | None:
        from chatagent.rag.index import Index

        path = self._index_path(key)
        try:
            return Index.from_bytes(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            logger.warning("ignoring an unreadable cache file %s: %s", path, e)
            return None


_default_stores: dict[Path, DocStore] = {}
_default_lock = threading.Lock()


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


def fetch_url(url: str, max_bytes: int, timeout: float = URL_TIMEOUT_S) -> tuple[bytes, str]:
    """Download `url` (at most `max_bytes` within `timeout` seconds in all) -> (content, a file name for it).
    Under `chatagent.url_fetch.public_urls_only` (a remote client's request) only public hosts are fetched."""
    from chatagent.url_fetch import FetchError, FetchTooLarge, fetch

    shown = url if len(url) <= 120 else url[:117] + "..."
    try:
        data, final_url, content_type = fetch(url, max_bytes, timeout)
    except FetchTooLarge:
        raise _url_too_large(shown, max_bytes) from None
    except FetchError as e:
        raise DocumentError("broken", f"'{shown}' could not be fetched: {e}.", shown) from None
    return data, _url_name(final_url, content_type)


_CONTENT_TYPES = {
    "application/pdf": "pdf",
    "text/html": "html",
    "application/xhtml+xml": "html",
    "text/plain": "txt",
    "text/markdown": "md",
    "text/csv": "csv",
    "text/tab-separated-values": "tsv",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "pptx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
}


def _url_name(url: str, content_type: str) -> str:
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(url)
    base = os.path.basename(unquote(parts.path).rstrip("/")) or parts.hostname or "page"
    by_type = _CONTENT_TYPES.get(content_type.split(";")[0].strip().lower())
    if by_type and Path(base).suffix.lower().lstrip(".") != by_type:
        base = f"{base}.{by_type}"
    return base


def _url_too_large(url: str, limit: int) -> DocumentError:
    return DocumentError("too_large", f"'{url}' is larger than the limit of {limit / 2**20:.1f} MB.", url)


def _renamed(entry: _Entry, name: str) -> _Entry:
    return _Entry(entry.digest, name, entry.pages, [replace(c, source=name) for c in entry.chunks], entry.tokens)


def _renamed_error(error: DocumentError, name: str) -> DocumentError:
    if not error.source or error.source == name:
        return error
    return DocumentError(error.reason, str(error).replace(f"'{error.source}'", f"'{name}'"), name)


def _best_part(text: str, query: str, budget: int, analyze: Callable[[str], list[str]]) -> str:
    """The sentences of `text` sharing most terms with `query`, in their order, within `budget` tokens."""
    wanted = set(analyze(query))
    pieces = split_sentences(text)
    ranked = sorted(range(len(pieces)), key=lambda i: -len(wanted.intersection(analyze(pieces[i]))))
    keep: set[int] = set()
    used = 0
    for i in ranked:
        n = count_tokens(pieces[i]) + 3  # + the " ... " separator
        if used + n <= budget:
            keep.add(i)
            used += n
    if not keep:
        return truncate_tokens(pieces[ranked[0]], max(budget - 3, 1), marker=" ...") if pieces else ""
    return " ... ".join(pieces[i] for i in sorted(keep))


def _header_tokens(source: str) -> int:
    """Tokens of a chunk's `[file, p. N]` header and the blank line before it (a page number of 4 digits)."""
    return count_tokens(source) + 8


def _page_chunk(entry: _Entry, page: Page) -> Chunk:
    chunk_id = _hash(entry.digest, "page", str(page.number))[:16]
    return Chunk(chunk_id, entry.source, page.number, page.number, page.text, count_tokens(page.text))


def _hash(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


def _write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file and a rename, so readers never see half a file."""
    try:
        write_atomic(path, data)
    except OSError as e:  # a read-only or full workspace costs the cache, not the answer
        logger.warning("could not write the cache file %s: %s", path, e)


def _page_reporter(callback: ProgressCallback | None, name: str) -> Callable[[int, int], None] | None:
    """An `on_page` for the parsers that reports each page read as Progress('read', ...)."""
    if callback is None:
        return None
    return lambda done, total: _report(callback, Progress("read", name, done, total))


def _report(callback: ProgressCallback | None, progress: Progress) -> None:
    if callback is not None:
        try:
            callback(progress)
        except Exception:  # a broken progress display must not break retrieval
            logger.exception("progress callback failed")

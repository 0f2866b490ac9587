"""The chunks of a set of parsed files and one BM25 index over them, searched per query within a token budget."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from chatagent.rag.chunking import Chunk
from chatagent.rag.highlight import TermWeights
from chatagent.rag.parsers import DocumentError, Page
from chatagent.rag.snippets import ranked_sentences
from chatagent.utils.tokens import count_tokens, truncate_tokens

if TYPE_CHECKING:
    from chatagent.rag.index import Index

__all__ = ["FileIndex", "ParsedFile", "Retrieved", "format_chunks", "hash_key"]


@dataclass(slots=True)
class ParsedFile:
    """A parsed file: its chunks and pages (under the name it was first parsed with)."""

    digest: str
    source: str
    pages: list[Page]
    chunks: list[Chunk]
    tokens: int  # of all pages

    def renamed(self, name: str) -> ParsedFile:
        """The same content cited under `name`."""
        return ParsedFile(self.digest, name, self.pages, [replace(c, source=name) for c in self.chunks], self.tokens)


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

    def __init__(self, entries: list[ParsedFile], index: Index) -> None:
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
                text = _best_part(chunk.text, query, room, self.index.analyze, self.index.term_weights(query))
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


def _best_part(
    text: str, query: str, budget: int, analyze: Callable[[str], list[str]], weights: TermWeights | None = None
) -> str:
    """The sentences of `text` holding most of `query` (its terms weighted by `weights`), in their order, within
    `budget` tokens."""
    pieces, ranked, _ = ranked_sentences(text, query, analyze, weights)
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


def _page_chunk(entry: ParsedFile, page: Page) -> Chunk:
    chunk_id = hash_key(entry.digest, "page", str(page.number))[:16]
    return Chunk(chunk_id, entry.source, page.number, page.number, page.text, count_tokens(page.text))


def hash_key(*parts: str) -> str:
    """The SHA-256 of `parts` joined by NUL, in hex: cache keys and page ids."""
    return hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest()

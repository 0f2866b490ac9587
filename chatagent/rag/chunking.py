"""Documents -> chunks of about `chunk_tokens` tokens, each with its source, page and a stable id.

A chunk never crosses a page: a fact on page 4 is cited as p. 4. A page that fits is one chunk; a longer
page is cut at paragraph boundaries where it can, at sentence boundaries inside a long paragraph, and at
token boundaries only inside a sentence longer than a chunk. Consecutive chunks of a page share up to
`overlap_tokens` of text (whole sentences or paragraphs when they fit). A chunk's id is derived from its
content and its document's key, so the same file gives the same ids on every run and machine.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chatagent.rag.parsers import Document
from chatagent.utils.tokens import count_tokens, token_starts

__all__ = [
    "DEFAULT_CHUNK_TOKENS",
    "DEFAULT_OVERLAP_TOKENS",
    "Chunk",
    "chunk_document",
    "pages_label",
    "source_label",
    "split_sentences",
]

DEFAULT_CHUNK_TOKENS = 400
DEFAULT_OVERLAP_TOKENS = 40
SNIPPET_CHARS = 300  # of a chunk's text, in the sources shown with an answer

_PARAGRAPHS = re.compile(r"\n\s*\n")
# End of a sentence: ., ! or ? followed by whitespace, or a CJK full stop / mark (no space needed).
_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+(?=\S)|(?<=[。！？；])|\n")


@dataclass(frozen=True, slots=True)
class Chunk:
    """A piece of a document: `text` from page `page` (to `last_page`) of `source`, `tokens` long."""

    id: str
    source: str
    page: int
    last_page: int
    text: str
    tokens: int

    @property
    def pages(self) -> str:
        """'p. 3' or 'pp. 3-4', for citations."""
        return pages_label([self.page, self.last_page])

    def as_source(self, snippet_chars: int = SNIPPET_CHARS) -> dict[str, Any]:
        """What a surface shows of this chunk: `file`, `pages` (1-based ints) and `text` (a short snippet)."""
        text = " ".join(self.text.split())
        if len(text) > snippet_chars:
            cut = text.rfind(" ", 0, snippet_chars)
            text = text[: cut if cut > snippet_chars // 2 else snippet_chars] + " …"
        return {"file": self.source, "pages": list(range(self.page, self.last_page + 1)), "text": text}


def pages_label(pages: list[int]) -> str:
    """'p. 3' for one page, 'pp. 3-4' for a range (from the first and last of `pages`), '' for none."""
    if not pages:
        return ""
    first, last = min(pages), max(pages)
    return f"p. {first}" if first == last else f"pp. {first}-{last}"


def source_label(source: dict[str, Any]) -> str:
    """'manual.pdf, p. 3' for a source dict (`Chunk.as_source`)."""
    pages = pages_label(list(source.get("pages") or []))
    return f"{source.get('file', '?')}, {pages}" if pages else str(source.get("file", "?"))


@dataclass(slots=True)
class _Unit:
    text: str
    tokens: int
    joiner: str  # what separates it from the unit before ("\n\n" between paragraphs, " " in one)

    @property
    def cost(self) -> int:
        """Its tokens in a chunk after another unit: a line break is a token of its own."""
        return self.tokens + ("\n" in self.joiner)


def chunk_document(
    doc: Document,
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
    overlap_tokens: int = DEFAULT_OVERLAP_TOKENS,
    key: str = "",
    page_tokens: list[int] | None = None,
    on_text: Callable[[int], Any] | None = None,
) -> list[Chunk]:
    """Cut `doc` into chunks (see the module docstring).

    `key` (e.g. the file's content hash) seeds the ids; `page_tokens` are the pages' token counts if known;
    `on_text(chars)` is told now and then how many characters are done (it may raise to stop: a deadline).
    """
    if chunk_tokens < 1:
        raise ValueError("chunk_tokens must be at least 1")
    overlap_tokens = max(0, min(overlap_tokens, chunk_tokens // 2))
    key = key or doc.source
    if page_tokens is None:
        page_tokens = [count_tokens(page.text) for page in doc.pages]
    chunks: list[Chunk] = []
    seen: dict[str, int] = {}
    done = 0  # characters
    for page, tokens in zip(doc.pages, page_tokens, strict=True):
        if on_text is not None:
            on_text(done)
        done += len(page.text)
        if not page.text.strip():
            continue
        if tokens <= chunk_tokens:
            chunks.append(_make(key, doc.source, page.number, page.text, tokens, seen))
            continue
        paragraphs = _PARAGRAPHS.split(page.text)
        if len(paragraphs) == 1:
            units = _split_sentences(page.text, chunk_tokens)
        else:
            units = []
            at = done - len(page.text)
            for n, paragraph in enumerate(paragraphs):
                if on_text is not None and n % 256 == 255:
                    on_text(at)
                at += len(paragraph)
                units += _split_paragraph(paragraph.strip(), chunk_tokens)
        chunks.extend(_pack(units, key, doc.source, page.number, chunk_tokens, overlap_tokens, seen))
    return chunks


def _split_paragraph(paragraph: str, limit: int) -> list[_Unit]:
    if not paragraph:
        return []
    tokens = count_tokens(paragraph)
    if tokens <= limit:
        return [_Unit(paragraph, tokens, "\n\n")]
    return _split_sentences(paragraph, limit)


def split_sentences(text: str) -> list[str]:
    """The sentences (and lines) of `text`, stripped, empty ones left out; CJK sentences need no space after them."""
    return [s for s, _ in _sentences(text)]


def _sentences(text: str) -> list[tuple[str, str]]:
    """The sentences of `text`, each with what separated it from the one before: a line break, a space or nothing
    (after a CJK full stop), so that a chunk keeps the text's lines (a PDF's code examples, lists)."""
    out: list[tuple[str, str]] = []
    start, gap = 0, ""
    for end, next_start in [(m.start(), m.end()) for m in _SENTENCE_END.finditer(text)] + [(len(text), len(text))]:
        raw = text[start:end]
        piece = raw.strip()
        if piece:
            space = gap + raw[: len(raw) - len(raw.lstrip())]
            out.append((piece, "\n" if "\n" in space else " " if space else ""))
            gap = ""
        gap += text[end:next_start]
        start = next_start
    return out


def _split_sentences(paragraph: str, limit: int) -> list[_Unit]:
    units: list[_Unit] = []
    for i, (sentence, sep) in enumerate(_sentences(paragraph)):
        joiner = "\n\n" if i == 0 else sep or ""
        n = count_tokens(sentence)
        if n <= limit:
            units.append(_Unit(sentence, n, joiner))
        else:
            for piece in _split_tokens(sentence, limit):
                units.append(_Unit(piece, count_tokens(piece), joiner))
                joiner = " "
    return units


def _split_tokens(text: str, limit: int) -> list[str]:
    """Cut `text` into pieces of at most `limit` tokens, at a space where one is near the cut, else at a token."""
    starts = token_starts(text)
    pieces: list[str] = []
    begin = 0  # index in `starts` of the first token of the current piece
    while len(starts) - begin > limit:
        cut = starts[begin + limit]
        space = text.rfind(" ", starts[begin] + 1, cut + 1)
        if space > starts[begin]:
            cut = space
        pieces.append(text[starts[begin] : cut].strip())
        begin = bisect.bisect_left(starts, cut)
    pieces.append(text[starts[begin] :].strip() if begin < len(starts) else "")
    return [p for p in pieces if p]


def _pack(
    units: list[_Unit], key: str, source: str, page: int, limit: int, overlap: int, seen: dict[str, int]
) -> list[Chunk]:
    chunks: list[Chunk] = []
    current: list[_Unit] = []
    size = 0
    fresh = 0  # units in `current` not carried over from the previous chunk
    for unit in units:
        if current and size + unit.cost > limit:
            if fresh:
                chunks.append(_emit(current, key, source, page, seen))
            current, size = _tail(current, overlap, limit - unit.tokens)
            fresh = 0
        size += unit.cost if current else unit.tokens
        current.append(unit)
        fresh += 1
    if current and fresh:
        chunks.append(_emit(current, key, source, page, seen))
    return chunks


def _tail(units: list[_Unit], overlap: int, room: int) -> tuple[list[_Unit], int]:
    """The last units of a chunk totalling at most `overlap` tokens (and at most `room`), to start the next."""
    kept: list[_Unit] = []
    size = 0
    budget = min(overlap, room - 1)  # - 1: the break between the kept units and the next one
    for unit in reversed(units):
        if size + unit.cost > budget:
            break
        kept.append(unit)
        size += unit.cost
    kept.reverse()
    if kept:
        size += kept[0].tokens - kept[0].cost  # the first unit of a chunk has no break before it
    return kept, size


def _emit(units: list[_Unit], key: str, source: str, page: int, seen: dict[str, int]) -> Chunk:
    text = units[0].text + "".join(unit.joiner + unit.text for unit in units[1:])
    return _make(key, source, page, text, count_tokens(text), seen)


def _make(key: str, source: str, page: int, text: str, tokens: int, seen: dict[str, int]) -> Chunk:
    digest = hashlib.blake2b(f"{key}\x00{page}\x00{text}".encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    n = seen.get(digest, 0)
    seen[digest] = n + 1
    chunk_id = digest if n == 0 else f"{digest}-{n}"
    return Chunk(chunk_id, source, page, page, text, tokens)

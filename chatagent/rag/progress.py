"""Progress of loading and searching a file set, reported to a callback whose failure never breaks retrieval."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Progress", "ProgressCallback", "page_reporter", "report"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Progress:
    """One step of loading and searching a file set. By `stage`:

    - 'read': a page of `source` was read (`done` pages of `total`; PDFs, as they are parsed); `reader` names the
      second extractor when the page was read again with it ('pypdf': PDFium's text of it looked wrong);
    - 'prepare': `source`'s text is being cut into pieces and counted (`done` of `total` MB), after it was read;
    - 'parse', 'cached', 'failed': file number `done` of `total` was parsed, found in the cache (this content was
      parsed before, maybe under another name or by another process), or failed;
    - 'indexing': the set's index is being built (`done` of `total` pieces);
    - 'index': the set's index is ready (`total` files); 'search': the set is being searched;
    - 'embed': the search is by keywords only, while `done` passages of `total` have vectors for search by meaning.
    """

    stage: str
    source: str
    done: int
    total: int
    seconds: float = 0.0
    reader: str = ""

    def describe(self) -> str:
        """A short line for a person watching: 'Reading manual.pdf: page 40 of 113'."""
        if self.stage == "read":
            again = f" (read again with {self.reader}: the first reading looked wrong)" if self.reader else ""
            return f"Reading {self.source}: page {self.done} of {self.total}{again}"
        if self.stage == "prepare":
            return f"Preparing {self.source} for search: {self.done} of {self.total} MB"
        if self.stage == "indexing":
            return f"Indexing: {self.done} of {self.total} pieces"
        if self.stage == "parse":
            return f"Read {self.source} (file {self.done} of {self.total}, {self.seconds:.1f} s)"
        if self.stage == "cached":
            return f"{self.source}: taken from the cache of files parsed before (file {self.done} of {self.total})"
        if self.stage == "failed":
            return f"Could not read {self.source}"
        if self.stage == "index":
            return f"Indexed {self.total} file{'s' if self.total != 1 else ''}"
        if self.stage == "embed":
            return f"Searching by keywords; meaning joins once the passages are embedded ({self.done} of {self.total})"
        if self.stage == "search":
            return "Searching the files"
        return f"{self.stage} {self.source}".strip()


ProgressCallback = Callable[[Progress], Any]


def page_reporter(callback: ProgressCallback | None, name: str) -> Callable[[int, int], None] | None:
    """An `on_page` for the parsers that reports each page read as Progress('read', ...)."""
    if callback is None:
        return None
    return lambda done, total, reader="": report(callback, Progress("read", name, done, total, reader=reader))


def report(callback: ProgressCallback | None, progress: Progress) -> None:
    """Give `progress` to `callback` (if any); an exception it raises is logged, not raised."""
    if callback is not None:
        try:
            callback(progress)
        except Exception:  # a broken progress display must not break retrieval
            logger.exception("progress callback failed")

"""What every parser shares: Page, Document, DocumentError, and the ParseJob that bounds one parse.

A ParseJob carries the file's name, its password and the two bounds of a parse: the run's deadline
(a time.monotonic() value; past it, `check()` raises RunDeadlineExceeded) and the most text a file may give
(`add()` raises DocumentError('too_large') beyond it). Parsers call both as they go, per page, sheet block
or paragraph block, so that neither a hostile file nor a huge one can hold a run past its deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from chatagent.errors import ChatAgentError, RunDeadlineExceeded

__all__ = ["REASONS", "Document", "DocumentError", "Page", "ParseJob"]

REASONS = ("needs_password", "no_text", "broken", "too_large", "unsupported")


@dataclass(frozen=True, slots=True)
class Page:
    """One page (PDF page, slide, sheet or block of rows) of a document; `number` counts from 1."""

    number: int
    text: str


@dataclass(slots=True)
class Document:
    """A parsed file: its `source` (the file's name, no directories), `kind` (extension) and `pages`."""

    source: str
    kind: str
    pages: list[Page] = field(default_factory=list)

    @property
    def text(self) -> str:
        """All pages' text, separated by blank lines."""
        return "\n\n".join(p.text for p in self.pages)


class DocumentError(ChatAgentError):
    """A file that cannot give text. `reason` is one of REASONS; str(error) is a message for the user."""

    def __init__(self, reason: str, message: str, source: str = "") -> None:
        if reason not in REASONS:
            raise ValueError(f"unknown DocumentError reason {reason!r}")
        super().__init__(message)
        self.reason = reason
        self.source = source

    def __reduce__(self) -> tuple[Any, ...]:
        return (DocumentError, (self.reason, str(self), self.source))


PageCallback = Callable[..., Any]  # on_page(pages done, pages in all[, the second extractor that read the page])


class ParseJob:
    """One parse of one file: its `name` and `password`, its deadline, its text budget (`max_chars`) and who
    hears of each page read (`on_page(done, total)`, for progress displays)."""

    __slots__ = ("chars", "deadline", "max_chars", "name", "on_page", "password", "why_max")

    def __init__(
        self,
        name: str,
        password: str | None = None,
        *,
        deadline: float | None = None,
        max_chars: int = 2**62,
        why_max: str = "the limit for one document",
        on_page: PageCallback | None = None,
    ) -> None:
        self.name = name
        self.password = password
        self.deadline = deadline
        self.max_chars = max_chars
        self.why_max = why_max  # what the budget is, for the message
        self.chars = 0  # of text given so far
        self.on_page = on_page

    def page_read(self, done: int, total: int, reader: str = "") -> None:
        """Tell `on_page` that `done` of `total` pages are read (and `reader`, when the last one was read again
        with a second extractor: then as a third argument)."""
        if self.on_page is not None:
            if reader:
                self.on_page(done, total, reader)
            else:
                self.on_page(done, total)

    def check(self, where: str = "") -> None:
        """Raise RunDeadlineExceeded if the deadline has passed; `where` says how far the parse got."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            at = f" at {where}" if where else ""
            raise RunDeadlineExceeded(f"reading '{self.name}' was stopped{at}: the run went past its deadline")

    def add(self, text: str) -> str:
        """Count `text` against the budget and return it; DocumentError('too_large') when over it."""
        self.chars += len(text)
        if self.chars > self.max_chars:
            raise DocumentError(
                "too_large",
                f"'{self.name}' was not read to the end: it gives more than {self.max_chars / 1e6:.0f} million "
                f"characters of text, over {self.why_max}.",
                self.name,
            )
        return text


def why(error: BaseException) -> str:
    """A short `Type: first line` of an exception, for messages."""
    message = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {message[:200]}" if message else type(error).__name__

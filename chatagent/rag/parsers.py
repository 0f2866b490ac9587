"""Files -> Documents of numbered pages of text, for PDF, DOCX, PPTX, XLSX, CSV/TSV, HTML, Markdown and text.

    from chatagent.rag import parse_file, DocumentError
    try:
        doc = parse_file('manual.pdf')
    except DocumentError as e:
        print(e.reason, e)            # needs_password / no_text / broken / too_large / unsupported
    for page in doc.pages:
        print(page.number, page.text[:80])

Page numbers are the PDF's pages, a presentation's slides, a spreadsheet's sheets (long sheets and
CSV files are cut into blocks of rows, each a page that repeats the header row); a Word, HTML,
Markdown or text file is page 1. Tables become Markdown tables. A file that cannot give text raises
DocumentError with a message a user can act on; nothing else escapes, except RunDeadlineExceeded when a
`deadline` is given and parsing passes it (checked per page, sheet block or paragraph block).

Work is bounded by what a file really holds, not by what it declares: see chatagent.rag.pdf (page trees),
chatagent.rag.office (zip sizes, sheet dimensions) and chatagent.rag.text (encodings). A document gives at
most MAX_TEXT_PER_BYTE characters of text per byte of the file (at least MIN_TEXT_BUDGET, at most
MAX_TEXT_CHARS): more is a bomb, refused as too_large.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chatagent.errors import RunDeadlineExceeded
from chatagent.rag.document import REASONS, Document, DocumentError, Page, PageCallback, ParseJob, why
from chatagent.rag.office import parse_docx, parse_pptx, parse_xlsx
from chatagent.rag.pdf import parse_pdf
from chatagent.rag.text import decode_text, parse_csv, parse_html, parse_text
from chatagent.utils.extras import missing_dependency

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "REASONS",
    "SUPPORTED_EXTENSIONS",
    "Document",
    "DocumentError",
    "Page",
    "decode_text",
    "parse_bytes",
    "parse_file",
]

DEFAULT_MAX_FILE_BYTES = 200 * 1024 * 1024  # override per call, or with CHATAGENT_MAX_FILE_MB
MAX_TEXT_PER_BYTE = 32  # characters of text a file may give per byte of its size (an honest one gives < 10) ...
MIN_TEXT_BUDGET = 16 * 1024 * 1024  # ... or this many, whichever is more ...
MAX_TEXT_CHARS = 256 * 1024 * 1024  # ... and never more than this (~64 million tokens to chunk and index)

logger = logging.getLogger(__name__)


def parse_file(
    path: str | os.PathLike[str],
    password: str | None = None,
    *,
    max_bytes: int | None = None,
    kind: str | None = None,
    deadline: float | None = None,
    on_page: PageCallback | None = None,
) -> Document:
    """Parse the file at `path` into a Document (see the module docstring); raise DocumentError if it gives no text.

    `password` opens an encrypted PDF. `max_bytes` caps the file size (default DEFAULT_MAX_FILE_BYTES or
    CHATAGENT_MAX_FILE_MB). `kind` overrides the type that the extension implies ('pdf',
    'docx', ...). `deadline` (a time.monotonic() value) stops parsing with RunDeadlineExceeded once passed.
    `on_page(done, total)` is called after each page of a PDF is read (for progress displays).
    """
    limit = max_file_bytes(max_bytes)
    data, name = read_file(path, limit)
    return parse_bytes(data, name, password, max_bytes=limit, kind=kind, deadline=deadline, on_page=on_page)


def read_file(path: str | os.PathLike[str], max_bytes: int) -> tuple[bytes, str]:
    """The bytes of the file at `path` and its display name; DocumentError if missing, unreadable or too large."""
    name = display_name(path)
    try:
        size = os.stat(path).st_size
        if size > max_bytes:
            raise _too_large(name, size, max_bytes)
        with open(path, "rb") as f:
            return f.read(min(size, max_bytes) + 1), name  # read(n) allocates n bytes up front: ask for what is there
    except FileNotFoundError:
        raise DocumentError("broken", f"'{name}' was not found.", name) from None
    except IsADirectoryError:
        raise DocumentError("unsupported", f"'{name}' is a directory, not a file.", name) from None
    except (OSError, ValueError) as e:  # ValueError: a NUL byte in the path
        raise DocumentError(
            "broken", f"'{name}' could not be read: {getattr(e, 'strerror', None) or e}.", name
        ) from None


def display_name(file: str | os.PathLike[str]) -> str:
    """The file name of a path or URL (no directories, no NUL bytes), as shown to users and cited."""
    text = os.fspath(file)
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = text.replace("\x00", "")
    return os.path.basename(text.replace("\\", "/").rstrip("/")) or text


def parse_bytes(
    data: bytes,
    name: str,
    password: str | None = None,
    *,
    max_bytes: int | None = None,
    kind: str | None = None,
    deadline: float | None = None,
    on_page: PageCallback | None = None,
) -> Document:
    """Parse a file's content; `name` is its file name (for the type and for messages only). See parse_file."""
    name = display_name(name) or "file"
    limit = max_file_bytes(max_bytes)
    if len(data) > limit:
        raise _too_large(name, len(data), limit)
    kind = (kind or _extension(name)).lower().lstrip(".")
    parser = _PARSERS.get(kind)
    if parser is None:
        shown = f".{kind} files are" if kind else "files without an extension are"
        raise DocumentError(
            "unsupported", f"'{name}' cannot be read: {shown} not supported (supported: {_SUPPORTED_SHOWN}).", name
        )
    if not data:  # a failed upload or copy, not a document of that kind
        raise DocumentError("broken", f"'{name}' is empty (0 bytes): there is nothing to read.", name)
    if parser in _TEXT_PARSERS and not data.strip():
        raise DocumentError("no_text", f"'{name}' is empty.", name)
    job = ParseJob(name, password, deadline=deadline, on_page=on_page, **_text_budget(len(data)))
    try:
        job.check()
        pages = parser(data, job)
    except (DocumentError, RunDeadlineExceeded):
        raise
    except ModuleNotFoundError as e:  # the rag extra is not installed: say so, not "the file is damaged"
        raise missing_dependency(e, f"reading .{kind} files") from None
    except MemoryError:
        raise DocumentError("too_large", f"'{name}' is too large to parse in the memory available.", name) from None
    except Exception as e:  # any parser failure on a bad file: a message for the user, not a traceback
        raise DocumentError(
            "broken",
            f"'{name}' could not be read: the file is damaged or is not a valid {kind.upper()} file ({why(e)}).",
            name,
        ) from e
    pages = [Page(p.number, t) for p in pages if (t := _tidy(p.text))]
    if not pages:
        hint = " (a scanned document needs OCR first)" if kind == "pdf" else ""
        raise DocumentError("no_text", f"'{name}' contains no extractable text{hint}.", name)
    return Document(source=name, kind=kind, pages=pages)


def max_file_bytes(max_bytes: int | None = None) -> int:
    """The file size limit in force: `max_bytes`, else CHATAGENT_MAX_FILE_MB, else DEFAULT_MAX_FILE_BYTES."""
    if max_bytes is not None:
        return int(max_bytes)
    env = os.environ.get("CHATAGENT_MAX_FILE_MB")
    if env:
        try:
            return int(float(env) * 1024 * 1024)
        except ValueError:
            logger.warning("ignoring CHATAGENT_MAX_FILE_MB=%r: not a number", env)
    return DEFAULT_MAX_FILE_BYTES


# ---------------------------------------------------------------------------------------- helpers

_PARSERS: dict[str, Callable[[bytes, ParseJob], list[Page]]] = {
    "pdf": parse_pdf,
    "docx": parse_docx,
    "pptx": parse_pptx,
    "xlsx": parse_xlsx,
    "xlsm": parse_xlsx,
    "html": parse_html,
    "htm": parse_html,
    "xhtml": parse_html,
    "md": parse_text,
    "markdown": parse_text,
    "txt": parse_text,
    "text": parse_text,
    "rst": parse_text,
    "log": parse_text,
    "json": parse_text,
    "csv": parse_csv,
    "tsv": parse_csv,
    "tab": parse_csv,
}
_TEXT_PARSERS = (parse_text, parse_html, parse_csv)
SUPPORTED_EXTENSIONS: frozenset[str] = frozenset(_PARSERS)

_BLANK_LINES = re.compile(r"\n[ \t\r\f\v]*(?:\n[ \t\r\f\v]*)+")
_TRAILING = re.compile(r"[ \t]+\n")


def _tidy(text: str) -> str:
    """Strip trailing spaces, collapse runs of blank lines into one, strip the ends."""
    text = text.replace("\x00", "")
    return _BLANK_LINES.sub("\n\n", _TRAILING.sub("\n", text)).strip()


def _text_budget(size: int) -> dict[str, Any]:
    """The most text a file of `size` bytes may give: what its size can really hold (zipped XML and compressed
    PDF streams expand, but an honest file gives far less than MAX_TEXT_PER_BYTE characters a byte), within
    MIN_TEXT_BUDGET and MAX_TEXT_CHARS."""
    holds = max(MIN_TEXT_BUDGET, MAX_TEXT_PER_BYTE * size)
    if holds < MAX_TEXT_CHARS:
        return {"max_chars": holds, "why_max": f"what a file of {size / 2**20:.1f} MB can hold (a zip bomb?)"}
    return {"max_chars": MAX_TEXT_CHARS, "why_max": "the most one document may give"}


def _extension(name: str) -> str:
    return Path(name).suffix.lower().lstrip(".")


_SUPPORTED_SHOWN = "csv, docx, html, md, pdf, pptx, tsv, txt, xlsx"  # the main ones, for messages


def _too_large(name: str, size: int, limit: int) -> DocumentError:
    return DocumentError(
        "too_large",
        f"'{name}' is {size / 2**20:.1f} MB, over the limit of {limit / 2**20:.1f} MB "
        "(raise it with max_bytes= or CHATAGENT_MAX_FILE_MB).",
        name,
    )

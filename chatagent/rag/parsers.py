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
DocumentError with a message a user can act on; nothing else escapes. Office files are zip archives:
their declared sizes and compression ratios are checked before anything is decompressed, and zipfile
never inflates a member beyond its declared size, so a zip bomb costs nothing.
"""

from __future__ import annotations

import codecs
import csv
import io
import logging
import os
import re
import threading
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chatagent.errors import ChatAgentError

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "SUPPORTED_EXTENSIONS",
    "Document",
    "DocumentError",
    "Page",
    "parse_bytes",
    "parse_file",
]

DEFAULT_MAX_FILE_BYTES = 200 * 1024 * 1024  # override per call, or with CHATAGENT_MAX_FILE_MB
MAX_UNZIPPED_BYTES = 500 * 1024 * 1024  # total declared size of an Office file's members
MAX_ZIP_RATIO = 200  # a member may expand at most this many times (checked for members over 1 MB)
MAX_ZIP_MEMBERS = 20_000
ROWS_PER_PAGE = 100  # CSV / sheet rows per page (each page repeats the header row)

REASONS = ("needs_password", "no_text", "broken", "too_large", "unsupported")

logger = logging.getLogger(__name__)

PageCallback = Callable[[int, int], Any]  # on_page(pages done, pages in all)


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


def parse_file(
    path: str | os.PathLike[str],
    password: str | None = None,
    *,
    max_bytes: int | None = None,
    kind: str | None = None,
    on_page: PageCallback | None = None,
) -> Document:
    """Parse the file at `path` into a Document (see the module docstring); raise DocumentError if it gives no text.

    `password` opens an encrypted PDF. `max_bytes` caps the file size (default DEFAULT_MAX_FILE_BYTES or
    CHATAGENT_MAX_FILE_MB). `kind` overrides the type that the extension implies ('pdf', 'docx', ...).
    `on_page(done, total)` is called after each page of a PDF is read (for progress displays).
    """
    limit = max_file_bytes(max_bytes)
    data, name = read_file(path, limit)
    return parse_bytes(data, name, password, max_bytes=limit, kind=kind, on_page=on_page)


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
    on_page: PageCallback | None = None,
) -> Document:
    """Parse a file's content; `name` is its file name (for the type and for messages only); see `parse_file`."""
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
    if not data.strip():
        raise DocumentError("no_text", f"'{name}' is empty.", name)
    try:
        pages = (
            _parse_pdf(data, name, password, on_page)
            if on_page is not None and parser is _parse_pdf
            else parser(data, name, password)
        )
    except DocumentError:
        raise
    except MemoryError:
        raise DocumentError("too_large", f"'{name}' is too large to parse in the memory available.", name) from None
    except Exception as e:  # any parser failure on a bad file: a message for the user, not a traceback
        raise DocumentError(
            "broken",
            f"'{name}' could not be read: the file is damaged or is not a valid {kind.upper()} file ({_why(e)}).",
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


# ---------------------------------------------------------------------------------------------- PDF

_pdfium_lock = threading.Lock()  # PDFium is not thread-safe


def _parse_pdf(data: bytes, name: str, password: str | None, on_page: PageCallback | None = None) -> list[Page]:
    if not data.lstrip()[:5].startswith(b"%PDF"):
        raise DocumentError("broken", f"'{name}' is not a PDF file (it has no PDF header).", name)
    try:
        import pypdfium2  # noqa: F401
    except ImportError:
        return _parse_pdf_pypdf(data, name, password, on_page)
    return _parse_pdf_pdfium(data, name, password, on_page)


def _parse_pdf_pdfium(data: bytes, name: str, password: str | None, on_page: PageCallback | None = None) -> list[Page]:
    import pypdfium2 as pdfium

    pages: list[Page] = []
    with _pdfium_lock:
        try:
            pdf = pdfium.PdfDocument(data, password=password)
        except pdfium.PdfiumError as e:
            if getattr(e, "err_code", None) == 4:  # FPDF_ERR_PASSWORD
                raise _needs_password(name, password) from None
            raise DocumentError(
                "broken", f"'{name}' could not be read: the PDF is damaged ({_why(e)}).", name
            ) from None
        try:
            total = len(pdf)
            for i in range(total):
                page = pdf[i]
                try:
                    textpage = page.get_textpage()
                    try:
                        text = textpage.get_text_range()
                    finally:
                        textpage.close()
                except pdfium.PdfiumError as e:  # one unreadable page does not lose the others
                    logger.warning("%s: page %d could not be read (%s); it is left out", name, i + 1, _why(e))
                    text = ""
                finally:
                    page.close()
                pages.append(Page(i + 1, _clean_pdf_text(text)))
                if on_page is not None:
                    on_page(i + 1, total)
        finally:
            pdf.close()
    return pages


_LEADERS = re.compile(r"(?:\. ?){4,}")  # the dot leaders of a table of contents or an index


def _clean_pdf_text(text: str) -> str:
    """PDFium's text with line ends normalised, soft hyphens (U+FFFE) joined and dot leaders shortened."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\ufffe\n", "").replace("\ufffe", "")
    return _LEADERS.sub(" ... ", text)


def _parse_pdf_pypdf(data: bytes, name: str, password: str | None, on_page: PageCallback | None = None) -> list[Page]:
    import pypdf

    reader = pypdf.PdfReader(io.BytesIO(data))
    if reader.is_encrypted:
        try:
            ok = reader.decrypt(password or "")
        except Exception as e:  # an encryption scheme pypdf cannot handle
            raise DocumentError(
                "needs_password", f"'{name}' is encrypted and could not be opened ({_why(e)}).", name
            ) from None
        if not ok:
            raise _needs_password(name, password)
    pages = []
    total = len(reader.pages)
    for i, page in enumerate(reader.pages, 1):
        try:
            text = page.extract_text() or ""
        except Exception as e:  # one unreadable page does not lose the others
            logger.warning("%s: page %d could not be read (%s); it is left out", name, i, _why(e))
            text = ""
        pages.append(Page(i, _LEADERS.sub(" ... ", text)))
        if on_page is not None:
            on_page(i, total)
    return pages


def _needs_password(name: str, password: str | None) -> DocumentError:
    if password:
        return DocumentError("needs_password", f"'{name}' is password-protected and the password given is wrong.", name)
    return DocumentError("needs_password", f"'{name}' is password-protected: give its password to read it.", name)


# ------------------------------------------------------------------------------------ Office (zip)


def _open_office_zip(data: bytes, name: str, kind: str) -> io.BytesIO:
    """Check an Office file's zip directory before any library decompresses it; return the data as a file."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise DocumentError(
            "broken", f"'{name}' could not be read: it is not a valid {kind.upper()} file (damaged or not a zip).", name
        ) from None
    with archive:
        infos = archive.infolist()
        if len(infos) > MAX_ZIP_MEMBERS:
            raise DocumentError("broken", f"'{name}' has {len(infos)} parts: too many for a {kind.upper()} file.", name)
        total = 0
        for info in infos:
            total += info.file_size
            ratio = info.file_size / max(info.compress_size, 1)
            if info.file_size > 1024 * 1024 and ratio > MAX_ZIP_RATIO:
                raise DocumentError(
                    "too_large",
                    f"'{name}' was not opened: a part of it expands {ratio:.0f} times (a zip bomb, or a damaged file).",
                    name,
                )
        if total > MAX_UNZIPPED_BYTES:
            raise DocumentError(
                "too_large",
                f"'{name}' was not opened: it would expand to {total / 2**20:.0f} MB, over the limit of "
                f"{MAX_UNZIPPED_BYTES / 2**20:.0f} MB.",
                name,
            )
    return io.BytesIO(data)


def _parse_docx(data: bytes, name: str, password: str | None) -> list[Page]:
    import docx
    from docx.table import Table

    document = docx.Document(_open_office_zip(data, name, "docx"))
    parts: list[str] = []
    for block in document.iter_inner_content():
        if isinstance(block, Table):
            parts.append(_markdown_table(_docx_rows(block)))
        else:
            text = block.text.strip()
            if not text:
                continue
            style = (block.style.name if block.style is not None else "") or ""
            level = style.removeprefix("Heading ").strip()
            if style.startswith("Heading ") and level.isdigit():
                text = "#" * min(int(level), 6) + " " + text
            elif style == "Title":
                text = "# " + text
            parts.append(text)
    return [Page(1, "\n\n".join(parts))]


def _docx_rows(table: Any) -> list[list[str]]:
    rows = []
    for row in table.rows:
        cells: list[str] = []
        previous = None
        for cell in row.cells:  # a merged cell is repeated by python-docx: keep it once
            if cell._tc is previous:
                continue
            previous = cell._tc
            cells.append(cell.text)
        rows.append(cells)
    return rows


def _parse_pptx(data: bytes, name: str, password: str | None) -> list[Page]:
    import pptx

    presentation = pptx.Presentation(_open_office_zip(data, name, "pptx"))
    pages = []
    for number, slide in enumerate(presentation.slides, 1):
        parts: list[str] = []
        title = slide.shapes.title
        if title is not None and title.has_text_frame and title.text_frame.text.strip():
            parts.append("# " + title.text_frame.text.strip())
        for shape in _walk_shapes(slide.shapes):
            if title is not None and shape.shape_id == title.shape_id:
                continue
            if getattr(shape, "has_table", False) and shape.has_table:
                parts.append(_markdown_table([[c.text for c in row.cells] for row in shape.table.rows]))
            elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
                text = shape.text_frame.text.strip()
                if text:
                    parts.append(text)
        if slide.has_notes_slide:
            notes = slide.notes_slide.notes_text_frame
            if notes is not None and notes.text.strip():
                parts.append("Notes: " + notes.text.strip())
        pages.append(Page(number, "\n\n".join(parts)))
    return pages


def _walk_shapes(shapes: Iterable[Any]) -> Iterable[Any]:
    for shape in shapes:
        if getattr(shape, "shape_type", None) == 6:  # MSO_SHAPE_TYPE.GROUP
            yield from _walk_shapes(shape.shapes)
        else:
            yield shape


def _parse_xlsx(data: bytes, name: str, password: str | None) -> list[Page]:
    import openpyxl

    book = openpyxl.load_workbook(_open_office_zip(data, name, "xlsx"), read_only=True, data_only=True)
    try:
        pages: list[Page] = []
        for sheet in book.worksheets:
            rows = [["" if v is None else str(v) for v in row] for row in sheet.iter_rows(values_only=True)]
            rows = [r for r in rows if any(c.strip() for c in r)]
            for text in _table_pages(rows, heading=f"## Sheet: {sheet.title}"):
                pages.append(Page(len(pages) + 1, text))
        return pages
    finally:
        book.close()


# ------------------------------------------------------------------------------------------- text


def decode_text(data: bytes, name: str = "file") -> str:
    """Bytes of a text file -> str: BOM (UTF-8/16/32), else UTF-8, else GB18030 (GBK), else Windows-1252.

    Raise DocumentError('unsupported') for binary content (NUL bytes or many control characters).
    """
    for bom, encoding in (
        (codecs.BOM_UTF32_LE, "utf-32"),
        (codecs.BOM_UTF32_BE, "utf-32"),
        (codecs.BOM_UTF8, "utf-8-sig"),
        (codecs.BOM_UTF16_LE, "utf-16"),
        (codecs.BOM_UTF16_BE, "utf-16"),
    ):
        if data.startswith(bom):
            try:
                return _check_text(data.decode(encoding), name)
            except UnicodeDecodeError:
                break
    head = data[:65536]
    if b"\x00" in head:
        raise _binary(name)
    try:
        return _check_text(data.decode("utf-8"), name)
    except UnicodeDecodeError:
        pass
    try:
        text = data.decode("gb18030")
        non_ascii = [c for c in text[:20000] if ord(c) > 127]
        cjk = sum(1 for c in non_ascii if "\u3000" <= c <= "\u9fff" or "\uff00" <= c <= "\uffef")
        if not non_ascii or cjk / len(non_ascii) > 0.6:
            return _check_text(text, name)
    except UnicodeDecodeError:
        pass
    return _check_text(data.decode("cp1252", errors="replace"), name)


_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f\ufffd]")


def _check_text(text: str, name: str) -> str:
    sample = text[:20000]
    if sample and len(_CONTROL.findall(sample)) > max(8, len(sample) // 100):
        raise _binary(name)
    return text


def _binary(name: str) -> DocumentError:
    return DocumentError("unsupported", f"'{name}' is not a text file (it contains binary data).", name)


def _parse_text(data: bytes, name: str, password: str | None) -> list[Page]:
    return [Page(1, decode_text(data, name))]


def _parse_html(data: bytes, name: str, password: str | None) -> list[Page]:
    from bs4 import BeautifulSoup

    if b"\x00" in data[:65536] and not data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise _binary(name)
    soup = BeautifulSoup(data, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup(["script", "style", "noscript", "template", "svg", "head"]):
        tag.decompose()
    for level in range(1, 7):
        for heading in soup.find_all(f"h{level}"):
            heading.replace_with(f"\n{'#' * level} {heading.get_text(' ', strip=True)}\n")
    for table in soup.find_all("table"):
        rows = [[c.get_text(" ", strip=True) for c in tr.find_all(["td", "th"])] for tr in table.find_all("tr")]
        table.replace_with("\n" + _markdown_table(rows) + "\n")
    text = soup.get_text("\n")
    if title and title not in text[:500]:
        text = f"# {title}\n\n{text}"
    return [Page(1, text)]


def _parse_csv(data: bytes, name: str, password: str | None) -> list[Page]:
    text = decode_text(data, name)
    delimiter = "\t" if name.lower().endswith((".tsv", ".tab")) else None
    if delimiter is None:
        try:
            delimiter = csv.Sniffer().sniff(text[:8192], delimiters=",;\t|").delimiter
        except csv.Error:
            delimiter = ","
    rows = [row for row in csv.reader(io.StringIO(text), delimiter=delimiter) if any(c.strip() for c in row)]
    return [Page(i, t) for i, t in enumerate(_table_pages(rows), 1)]


# ----------------------------------------------------------------------------------------- tables


def _table_pages(rows: Sequence[Sequence[str]], heading: str = "") -> list[str]:
    """A table as Markdown pages of ROWS_PER_PAGE rows, each repeating the header row."""
    if not rows:
        return []
    header, body = rows[0], rows[1:]
    pages = []
    for start in range(0, max(len(body), 1), ROWS_PER_PAGE):
        table = _markdown_table([header, *body[start : start + ROWS_PER_PAGE]])
        pages.append(f"{heading}\n\n{table}" if heading else table)
    return pages


def _markdown_table(rows: Sequence[Sequence[str]]) -> str:
    rows = [[_cell(c) for c in row] for row in rows if row]
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * width]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(lines)


def _cell(value: str) -> str:
    return " ".join(str(value).split()).replace("|", "\\|")


# ---------------------------------------------------------------------------------------- helpers

_PARSERS: dict[str, Callable[[bytes, str, str | None], list[Page]]] = {
    "pdf": _parse_pdf,
    "docx": _parse_docx,
    "pptx": _parse_pptx,
    "xlsx": _parse_xlsx,
    "xlsm": _parse_xlsx,
    "html": _parse_html,
    "htm": _parse_html,
    "xhtml": _parse_html,
    "md": _parse_text,
    "markdown": _parse_text,
    "txt": _parse_text,
    "text": _parse_text,
    "rst": _parse_text,
    "log": _parse_text,
    "json": _parse_text,
    "csv": _parse_csv,
    "tsv": _parse_csv,
    "tab": _parse_csv,
}
SUPPORTED_EXTENSIONS: frozenset[str] = frozenset(_PARSERS)

_BLANK_LINES = re.compile(r"\n[ \t\r\f\v]*(?:\n[ \t\r\f\v]*)+")
_TRAILING = re.compile(r"[ \t]+\n")


def _tidy(text: str) -> str:
    """Strip trailing spaces, collapse runs of blank lines into one, strip the ends."""
    text = text.replace("\x00", "")
    return _BLANK_LINES.sub("\n\n", _TRAILING.sub("\n", text)).strip()


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


def _why(error: BaseException) -> str:
    message = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {message[:200]}" if message else type(error).__name__

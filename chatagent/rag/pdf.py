"""PDF -> pages of text: PDFium (pypdfium2) page by page, pypdf where PDFium's text of a page is implausible.

Work is bounded by what the file holds. A page tree may declare pages that are not there, or reach one page
object a million times from a 12 KB file: when the declared count is more than the file's size can hold,
the tree is walked (each node once) and every page object is read once. A page whose PDFium text looks wrong
(replacement or private-use characters, few letters, characters whose font has no usable Unicode map, or fewer
than three CJK characters read per text object drawn: vertical CJK in a font the file does not embed, of which
PDFium reads one column) is read by pypdf too, and the better text is kept; the page's progress then names pypdf. A password is tried as
typed and, for AES-256 files, normalised with SASLprep as the PDF 2.0 spec requires.
"""

from __future__ import annotations

import io
import logging
import re
import string
import threading
from typing import Any

from chatagent.errors import RunDeadlineExceeded
from chatagent.rag.document import DocumentError, Page, ParseJob, why
from chatagent.utils.lang import CJK_CHARS

__all__ = ["clean_pdf_text", "parse_pdf", "parse_pdf_pdfium", "parse_pdf_pypdf", "saslprep", "text_score"]

PDF_MIN_PAGE_BYTES = 200  # a declared page count above size / this (and over 64) has its page tree checked
MAP_ERROR_SAMPLE = 4  # characters per page asked whether their font maps them to Unicode

logger = logging.getLogger(__name__)
_pdfium_lock = threading.Lock()  # PDFium is not thread-safe


def parse_pdf(data: bytes, job: ParseJob) -> list[Page]:
    """A PDF's pages (see the module docstring); PDFium when installed, else pypdf."""
    if not data.lstrip()[:5].startswith(b"%PDF"):
        raise DocumentError("broken", f"'{job.name}' is not a PDF file (it has no PDF header).", job.name)
    try:
        import pypdfium2  # noqa: F401
    except ImportError:
        return parse_pdf_pypdf(data, job)
    return parse_pdf_pdfium(data, job)


# ------------------------------------------------------------------------------------------ PDFium


def parse_pdf_pdfium(data: bytes, job: ParseJob) -> list[Page]:
    """Every page's text by PDFium, with pypdf's for pages whose PDFium text is implausible."""
    import pypdfium2 as pdfium

    with _pdfium_lock:
        pdf = _open_pdfium(data, job)
        try:
            count = len(pdf)
            most = max(64, len(data) // PDF_MIN_PAGE_BYTES)
            if count > most:  # more pages than the file can hold? walk the tree: each page object once
                distinct = _walk_suspect_tree(data, job, count)
                if distinct is None:
                    count = most
                elif len(distinct) < count:
                    return _pypdf_pages(distinct, job)
            other = _OtherExtractor(data, job)
            pages = []
            for i in range(count):
                job.check(f"page {i + 1}")
                try:
                    page = pdf[i]
                except pdfium.PdfiumError as e:  # one unreadable page does not lose the others
                    logger.warning("%s: page %d could not be read (%s); it is left out", job.name, i + 1, why(e))
                    continue
                try:
                    text, reader = _page_text(page, i, other, job)
                finally:
                    page.close()
                pages.append(Page(i + 1, job.add(text)))
                job.page_read(i + 1, count, reader)
            return pages
        finally:
            pdf.close()


def _open_pdfium(data: bytes, job: ParseJob) -> Any:
    import pypdfium2 as pdfium

    for password in password_candidates(job.password):
        try:
            return pdfium.PdfDocument(data, password=password)
        except pdfium.PdfiumError as e:
            if getattr(e, "err_code", None) != 4:  # FPDF_ERR_PASSWORD
                raise DocumentError(
                    "broken", f"'{job.name}' could not be read: the PDF is damaged ({why(e)}).", job.name
                ) from None
    raise _needs_password(job)


def _page_text(page: Any, index: int, other: _OtherExtractor, job: ParseJob) -> tuple[str, str]:
    """PDFium's text of one page, or pypdf's when PDFium's is implausible and pypdf's is better; and which of
    the two it is ('' for PDFium, 'pypdf')."""
    import pypdfium2 as pdfium

    try:
        textpage = page.get_textpage()
    except pdfium.PdfiumError as e:
        logger.warning("%s: page %d could not be read (%s); it is left out", job.name, index + 1, why(e))
        return "", ""
    try:
        text = clean_pdf_text(textpage.get_text_range())
        unmapped = _unmapped_share(textpage)
    finally:
        textpage.close()
    if not _implausible(text, unmapped, page):
        return text, ""
    alternative = other.page_text(index)
    if alternative is not None and text_score(alternative) > text_score(text, unmapped) * 1.25 + 2:
        logger.info("%s: page %d read by pypdf (PDFium's text of it looks wrong)", job.name, index + 1)
        return alternative, "pypdf"
    return text, ""


_SPACES = re.compile(r"\s+")
_WORDS = re.compile(r"[\w\s]+")  # letters and digits of any script, and spaces
_CJK = re.compile(f"[{CJK_CHARS}]")
_BAD = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ue000-\uf8ff\ufffd\ufffe\uffff]")
_ASCII_SPACE = string.whitespace.encode()
_ASCII_WORD_OR_SPACE = (string.ascii_letters + string.digits + "_" + string.whitespace).encode()
_ASCII_SYMBOLS = string.punctuation.encode()


def text_score(text: str, unmapped: float = 0.0) -> float:
    """How much real text `text` holds: its letters and digits, less twice its bad characters (replacement,
    private-use, control), times the share of characters whose font maps them to Unicode (1 - `unmapped`)."""
    visible, symbols, bad = _counts(text)
    return max(visible - symbols - 2 * bad, 0) * (1.0 - unmapped)


def _counts(text: str) -> tuple[int, int, int]:
    """(visible characters, symbols among them, bad characters among the symbols) of `text`."""
    raw = text.encode("ascii", "ignore")
    foreign = len(text) - len(raw)
    if foreign * 8 > len(text):  # another script, or garbage: classify every character
        rest = _WORDS.sub("", text)
        return len(_SPACES.sub("", text)), len(rest), len(_BAD.findall(rest))
    # mostly ASCII (most pages): bytes.translate counts in about a microsecond; the few others count as letters
    symbols = raw.translate(None, _ASCII_WORD_OR_SPACE)
    bad = len(symbols.translate(None, _ASCII_SYMBOLS)) + text.count("\ufffd")
    return len(raw.translate(None, _ASCII_SPACE)) + foreign, len(symbols), bad


def _implausible(text: str, unmapped: float, page: Any) -> bool:
    """Whether a page's PDFium text may have lost or garbled what the page shows."""
    if len(text) > 1024:  # garbage is garbage throughout: a sample from the middle will do
        middle = len(text) // 2
        text = text[middle - 512 : middle + 512]
    visible, symbols, bad = _counts(text)
    if visible >= 16 and (unmapped >= 0.5 or visible - symbols - 2 * bad < 0.3 * visible):
        return True
    if visible < 16:
        return _text_objects(page) > 2 * visible  # text drawn, almost nothing read
    # CJK text drawn, little of it read (set vertically in a font the file does not embed, PDFium reads one column)
    return _CJK.search(text) is not None and _text_objects(page) * 3 > visible


def _unmapped_share(textpage: Any) -> float:
    """The share of a sample of the page's characters whose font gives no usable Unicode mapping."""
    import pypdfium2.raw as raw

    handle, has_error = textpage.raw, raw.FPDFText_HasUnicodeMapError
    n = raw.FPDFText_CountChars(handle)
    if n <= 0:
        return 0.0
    step = max(n // MAP_ERROR_SAMPLE, 1)
    sample = range(step // 2, n, step)
    return sum(1 for i in sample if has_error(handle, i) == 1) / len(sample)


def _text_objects(page: Any) -> int:
    import pypdfium2.raw as raw

    n = raw.FPDFPage_CountObjects(page)
    return sum(1 for i in range(n) if raw.FPDFPageObj_GetType(raw.FPDFPage_GetObject(page, i)) == raw.FPDF_PAGEOBJ_TEXT)


class _OtherExtractor:
    """pypdf over the same file, opened at the first page that needs it (most documents never do)."""

    def __init__(self, data: bytes, job: ParseJob) -> None:
        self.data = data
        self.job = job
        self.reader: Any = None
        self.failed = False

    def page_text(self, index: int) -> str | None:
        if self.failed:
            return None
        try:
            if self.reader is None:
                self.reader = _open_pypdf(self.data, self.job)
            if index >= len(self.reader.pages):
                return None
            return clean_pdf_text(self.reader.pages[index].extract_text() or "")
        except RunDeadlineExceeded:
            raise
        except Exception as e:  # pypdf cannot help with this file: PDFium's text stays
            logger.info("%s: pypdf could not read page %d either (%s)", self.job.name, index + 1, why(e))
            self.failed = self.reader is None
            return None


# ------------------------------------------------------------------------------------- page trees


def _walk_suspect_tree(data: bytes, job: ParseJob, declared: int) -> list[tuple[int, Any]] | None:
    """The distinct pages of a page tree that declares more pages than its file can hold (None if it cannot be
    walked). Fewer than declared: the tree repeats or invents pages, and they are read once each by pypdf."""
    try:
        distinct = distinct_pages(_open_pypdf(data, job), job)
    except RunDeadlineExceeded:
        raise
    except Exception as e:  # pypdf cannot walk it (or open it): PDFium reads what the file's size allows
        logger.warning("%s: the page tree declares %d pages and could not be checked (%s); reading at most %d",
                       job.name, declared, why(e), max(64, len(data) // PDF_MIN_PAGE_BYTES))  # fmt: skip
        return None
    if len(distinct) < declared:
        logger.warning("%s: the page tree declares %d pages but holds %d distinct ones; each is read once",
                       job.name, declared, len(distinct))  # fmt: skip
    return distinct


def distinct_pages(reader: Any, job: ParseJob | None = None) -> list[tuple[int, Any]]:
    """(number, pypdf PageObject) of every page object in `reader`'s page tree, in order, each once.

    Each tree node is visited once, so a tree that reaches the same node or page many times (or loops) costs
    what the file holds, not what it declares. `number` counts the pages met so far, repeats included.
    """
    from pypdf import PageObject
    from pypdf.generic import DictionaryObject, IndirectObject, NameObject

    inheritable = ("/Resources", "/MediaBox", "/CropBox", "/Rotate")
    root = reader.trailer["/Root"].get_object()["/Pages"]
    stack: list[tuple[Any, dict[str, Any]]] = [(root, {})]
    seen: set[tuple[int, int]] = set()
    pages: list[tuple[int, Any]] = []
    number = 0
    while stack:
        ref, inherited = stack.pop()
        key = (ref.idnum, ref.generation) if isinstance(ref, IndirectObject) else (-1, id(ref))
        node = ref.get_object()
        if not isinstance(node, DictionaryObject):
            continue
        is_page = node.get("/Type") == "/Page" or "/Kids" not in node
        if is_page:
            number += 1
        if key in seen:
            continue
        seen.add(key)
        if is_page:
            page = PageObject(reader, ref if isinstance(ref, IndirectObject) else None)
            page.update(node)
            for k, v in inherited.items():
                if k not in page:
                    page[NameObject(k)] = v
            pages.append((number, page))
            if job is not None and len(pages) % 256 == 0:
                job.check(f"the page tree (page {number})")
            continue
        below = {**inherited, **{k: node[k] for k in inheritable if k in node}}
        kids = node.get("/Kids")
        stack.extend((kid, below) for kid in reversed(list(kids.get_object() if kids is not None else [])))
    return pages


# -------------------------------------------------------------------------------------------- pypdf


def parse_pdf_pypdf(data: bytes, job: ParseJob) -> list[Page]:
    """Every page's text by pypdf (the fallback when pypdfium2 is not installed)."""
    reader = _open_pypdf(data, job)
    return _pypdf_pages(distinct_pages(reader, job), job)


def _open_pypdf(data: bytes, job: ParseJob) -> Any:
    import pypdf

    reader = pypdf.PdfReader(io.BytesIO(data))
    if reader.is_encrypted:
        opened = False
        for password in password_candidates(job.password):
            try:
                opened = bool(reader.decrypt(password or ""))
            except Exception as e:  # an encryption scheme pypdf cannot handle
                raise DocumentError(
                    "needs_password", f"'{job.name}' is encrypted and could not be opened ({why(e)}).", job.name
                ) from None
            if opened:
                break
        if not opened:
            raise _needs_password(job)
    return reader


def _pypdf_pages(pages: list[tuple[int, Any]], job: ParseJob) -> list[Page]:
    found = []
    for done, (number, page) in enumerate(pages, 1):
        job.check(f"page {number}")
        try:
            text = page.extract_text() or ""
        except Exception as e:  # one unreadable page does not lose the others
            logger.warning("%s: page %d could not be read (%s); it is left out", job.name, number, why(e))
            text = ""
        found.append(Page(number, job.add(clean_pdf_text(text))))
        job.page_read(done, len(pages))
    return found


# ------------------------------------------------------------------------------------ passwords, text


def password_candidates(password: str | None) -> list[str | None]:
    """The password as typed, then its SASLprep form (what AES-256 files are keyed with) if different."""
    if not password:
        return [password]
    candidates: list[str | None] = [password]
    try:
        prepared = saslprep(password)
    except ValueError:
        return candidates  # prohibited characters: no AES-256 file can have this password in prepared form
    if prepared != password:
        candidates.append(prepared)
    return candidates


def saslprep(text: str) -> str:
    """`text` prepared by SASLprep (RFC 4013), as PDF 2.0 prepares AES-256 passwords; ValueError if prohibited.

    Soft hyphens and other "commonly mapped to nothing" characters vanish, non-ASCII spaces become spaces, the
    result is NFKC-normalised (`ª` becomes `a`), and it may not mix right-to-left with left-to-right text.
    """
    import stringprep
    import unicodedata

    prohibited = (
        stringprep.in_table_c12, stringprep.in_table_c21_c22, stringprep.in_table_c3, stringprep.in_table_c4,
        stringprep.in_table_c5, stringprep.in_table_c6, stringprep.in_table_c7, stringprep.in_table_c8,
        stringprep.in_table_c9, stringprep.in_table_a1,
    )  # fmt: skip
    mapped = "".join(" " if stringprep.in_table_c12(c) else c for c in text if not stringprep.in_table_b1(c))
    prepared = unicodedata.normalize("NFKC", mapped)
    for c in prepared:
        if any(check(c) for check in prohibited):
            raise ValueError(f"SASLprep: U+{ord(c):04X} is not allowed in a password")
    if any(stringprep.in_table_d1(c) for c in prepared):
        if any(stringprep.in_table_d2(c) for c in prepared):
            raise ValueError("SASLprep: right-to-left and left-to-right characters mixed")
        if not (stringprep.in_table_d1(prepared[0]) and stringprep.in_table_d1(prepared[-1])):
            raise ValueError("SASLprep: right-to-left text must start and end with a right-to-left character")
    return prepared


def _needs_password(job: ParseJob) -> DocumentError:
    if job.password:
        return DocumentError(
            "needs_password", f"'{job.name}' is password-protected and the password given is wrong.", job.name
        )
    return DocumentError(
        "needs_password", f"'{job.name}' is password-protected: give its password to read it.", job.name
    )


_LEADERS = re.compile(r"(?:\. ?){4,}")  # the dot leaders of a table of contents or an index


def clean_pdf_text(text: str) -> str:
    """A PDF page's text with line ends normalised, soft hyphens (U+FFFE) joined and dot leaders shortened."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\ufffe\n", "").replace("\ufffe", "")
    return _LEADERS.sub(" ... ", text)

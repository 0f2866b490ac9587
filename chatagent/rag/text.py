"""Text-like files -> pages: plain text and Markdown, HTML, CSV/TSV; text decoding; Markdown tables.

A text file's encoding is its BOM (UTF-8/16/32), else UTF-8 when it decodes as such, else the legacy encoding
that charset-normalizer finds most plausible among the ones people still write (GB18030, Big5, Shift-JIS,
EUC-JP, EUC-KR, Windows-125x, KOI8, ...). A file in none of them is refused with a clear message rather than
read as mojibake.
"""

from __future__ import annotations

import codecs
import csv
import io
import logging
import re
from collections.abc import Sequence
from typing import Any

from chatagent.rag.document import DocumentError, Page, ParseJob

__all__ = ["ROWS_PER_PAGE", "decode_text", "markdown_table", "parse_csv", "parse_html", "parse_text", "table_pages"]

ROWS_PER_PAGE = 100  # CSV / sheet rows per page (each page repeats the header row)
DETECT_SAMPLE_BYTES = 256 * 1024  # the legacy-encoding guess looks at the start of the file only

# Legacy encodings tried after UTF-8, in the order that breaks ties (a tie happens on very short texts).
LEGACY_ENCODINGS = (
    "cp1252", "gb18030", "big5", "cp932", "euc_jp", "cp949", "cp1251", "koi8_r", "cp1250", "cp1253", "cp1254",
    "cp1255", "cp1256", "cp1257", "cp1258", "cp874", "koi8_u", "iso8859_2", "big5hkscs",
)  # fmt: skip

logger = logging.getLogger(__name__)

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def decode_text(data: bytes, name: str = "file") -> str:
    """Bytes of a text file -> str: by BOM, else UTF-8, else the most plausible legacy encoding (see above).

    Raise DocumentError('unsupported') for binary content (NUL bytes or many control characters) and for text
    in no encoding we can recognise.
    """
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return _check_text(data.decode(encoding), name)
            except UnicodeDecodeError:
                break
    if b"\x00" in data[:65536]:
        raise _binary(name)
    try:
        return _check_text(data.decode("utf-8"), name)
    except UnicodeDecodeError:
        pass
    return _check_text(_decode_legacy(data, name), name)


def _decode_legacy(data: bytes, name: str) -> str:
    """`data` in the legacy encoding charset-normalizer finds most plausible; DocumentError if none fits."""
    from charset_normalizer import from_bytes

    sample = data[:DETECT_SAMPLE_BYTES]
    if len(data) > len(sample):  # cut at a line end, not inside a multi-byte character
        sample = sample[: sample.rfind(b"\n") + 1] or sample
    matches = from_bytes(sample, cp_isolation=list(LEGACY_ENCODINGS), threshold=0.5)  # its 0.2 misses short texts
    ranked = sorted(matches, key=lambda m: (round(m.chaos, 2), -round(m.coherence, 2), _rank(m.encoding)))
    for match in ranked:
        try:
            text = data.decode(match.encoding)
        except UnicodeDecodeError:
            continue  # the sample fitted, the rest of the file does not
        rivals = [m.encoding for m in ranked[1:4] if _ties(m, match) and str(m) != str(match)]
        if rivals and match is ranked[0]:
            logger.warning("%s: text encoding guessed as %s (the text is short; %s fit as well)", name,
                           match.encoding, ", ".join(rivals))  # fmt: skip
        return text
    raise DocumentError(
        "unsupported",
        f"'{name}' could not be read: it is not UTF-8 and its text encoding was not recognised "
        "(save it as UTF-8 and try again).",
        name,
    )


def _ties(a: Any, b: Any) -> bool:
    return (round(a.chaos, 2), round(a.coherence, 2)) == (round(b.chaos, 2), round(b.coherence, 2))


def _rank(encoding: str) -> int:
    return LEGACY_ENCODINGS.index(encoding) if encoding in LEGACY_ENCODINGS else len(LEGACY_ENCODINGS)


_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f\ufffd]")


def _check_text(text: str, name: str) -> str:
    sample = text[:20000]
    if sample and len(_CONTROL.findall(sample)) > max(8, len(sample) // 100):
        raise _binary(name)
    return text


def _binary(name: str) -> DocumentError:
    return DocumentError("unsupported", f"'{name}' is not a text file (it contains binary data).", name)


def parse_text(data: bytes, job: ParseJob) -> list[Page]:
    """Plain text, Markdown and the like: one page."""
    return [Page(1, job.add(decode_text(data, job.name)))]


def parse_html(data: bytes, job: ParseJob) -> list[Page]:
    """HTML: one page, without scripts and styles, headings as `#`, tables as Markdown."""
    from bs4 import BeautifulSoup

    if b"\x00" in data[:65536] and not data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise _binary(job.name)
    soup = BeautifulSoup(data, "html.parser")
    job.check("the HTML structure")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup(["script", "style", "noscript", "template", "svg", "head"]):
        tag.decompose()
    for level in range(1, 7):
        for heading in soup.find_all(f"h{level}"):
            heading.replace_with(f"\n{'#' * level} {heading.get_text(' ', strip=True)}\n")
    for table in soup.find_all("table"):
        rows = [[c.get_text(" ", strip=True) for c in tr.find_all(["td", "th"])] for tr in table.find_all("tr")]
        table.replace_with("\n" + markdown_table(rows) + "\n")
    text = soup.get_text("\n")
    if title and title not in text[:500]:
        text = f"# {title}\n\n{text}"
    return [Page(1, job.add(text))]


def parse_csv(data: bytes, job: ParseJob) -> list[Page]:
    """CSV/TSV: Markdown tables of ROWS_PER_PAGE rows, each page repeating the header row."""
    text = decode_text(data, job.name)
    delimiter = "\t" if job.name.lower().endswith((".tsv", ".tab")) else None
    if delimiter is None:
        try:
            delimiter = csv.Sniffer().sniff(text[:8192], delimiters=",;\t|").delimiter
        except csv.Error:
            delimiter = ","
    rows: list[list[str]] = []
    for n, row in enumerate(csv.reader(io.StringIO(text), delimiter=delimiter)):
        if n % 10_000 == 0:
            job.check(f"row {n + 1}")
        if any(c.strip() for c in row):
            rows.append(row)
    return [Page(i, job.add(t)) for i, t in enumerate(table_pages(rows), 1)]


def table_pages(rows: Sequence[Sequence[str]], heading: str = "") -> list[str]:
    """A table as Markdown pages of ROWS_PER_PAGE rows, each repeating the header row."""
    if not rows:
        return []
    header, body = rows[0], rows[1:]
    pages = []
    for start in range(0, max(len(body), 1), ROWS_PER_PAGE):
        table = markdown_table([header, *body[start : start + ROWS_PER_PAGE]])
        pages.append(f"{heading}\n\n{table}" if heading else table)
    return pages


def markdown_table(rows: Sequence[Sequence[str]]) -> str:
    """Rows of cells as a Markdown table (the first row is the header); `|` in cells is escaped."""
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

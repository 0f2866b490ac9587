"""Office files (zip archives of XML) -> pages: DOCX, PPTX, XLSX, with work bounded by what the file holds.

Before anything is inflated, the zip directory is checked: the number of parts, each part's compression
ratio, the total declared size, and the declared size of the parts a library reads whole into memory (zipfile
never inflates a part beyond its declared size, so the declared sizes are the bound). DOCX text is read as a
stream (lxml iterparse, each paragraph or table row dropped once read), so memory does not grow with the
document; a sheet is read cell by cell as the file lists them, so its declared dimension and the address of
its last cell cost nothing (a sheet with cells A1 and XFD1048576 is a two-cell table).
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

from chatagent.rag.document import DocumentError, Page, ParseJob
from chatagent.rag.text import ROWS_PER_PAGE, markdown_table

__all__ = ["open_office_zip", "parse_docx", "parse_pptx", "parse_xlsx"]

MAX_UNZIPPED_BYTES = 500 * 1024 * 1024  # total declared size of an Office file's parts
MAX_ZIP_RATIO = 200  # a part may expand at most this many times (checked for parts over 1 MB)
MAX_ZIP_MEMBERS = 20_000
MAX_DOCX_BODY_BYTES = 128 * 1024 * 1024  # word/document.xml: ~40,000 pages of text; read as a stream
# Parts a library reads whole (python-pptx parses every XML part into a tree, ~10x its size in memory;
# openpyxl reads shared strings and styles whole); the DOCX reader reads only styles and relationships whole.
MAX_WHOLE_PARTS_BYTES = {"docx": 16 * 1024 * 1024, "pptx": 32 * 1024 * 1024, "xlsx": 64 * 1024 * 1024}

_W = (
    "http://schemas.openxmlformats.org/wordprocessingml/2006/main",
    "http://purl.oclc.org/ooxml/wordprocessingml/main",
)
_MC_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"
_REL = "{http://schemas.openxmlformats.org/package/2006/relationships}Relationship"
_HEADING = re.compile(r"heading ([1-9])")


def open_office_zip(data: bytes, job: ParseJob, kind: str, read_whole: Callable[[str], bool]) -> zipfile.ZipFile:
    """The Office file as a zip, once its directory is checked (see the module docstring).

    `read_whole(part_name)` says which parts the reader loads whole into memory: together they may declare at
    most MAX_WHOLE_PARTS_BYTES[kind].
    """
    name = job.name
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError):
        raise DocumentError(
            "broken", f"'{name}' could not be read: it is not a valid {kind.upper()} file (damaged or not a zip).", name
        ) from None
    try:
        infos = archive.infolist()
        if len(infos) > MAX_ZIP_MEMBERS:
            raise DocumentError("broken", f"'{name}' has {len(infos)} parts: too many for a {kind.upper()} file.", name)
        total = whole = 0
        for info in infos:
            total += info.file_size
            if read_whole(info.filename):
                whole += info.file_size
            ratio = info.file_size / max(info.compress_size, 1)
            if info.file_size > 1024 * 1024 and ratio > MAX_ZIP_RATIO:
                raise _expands(name, f"a part of it expands {ratio:.0f} times (a zip bomb, or a damaged file)")
        if total > MAX_UNZIPPED_BYTES:
            raise _expands(name, f"it would expand to {_mb(total)}, over the limit of {_mb(MAX_UNZIPPED_BYTES)}")
        if whole > MAX_WHOLE_PARTS_BYTES[kind]:
            raise _expands(
                name, f"its structure expands to {_mb(whole)} in memory, over the limit of "
                f"{_mb(MAX_WHOLE_PARTS_BYTES[kind])} for a {kind.upper()} file",
            )  # fmt: skip
    except DocumentError:
        archive.close()
        raise
    return archive


def _expands(name: str, why: str) -> DocumentError:
    return DocumentError("too_large", f"'{name}' was not opened: {why}.", name)


def _mb(size: int) -> str:
    return f"{size / 2**20:.0f} MB"


def _is_xml(part: str) -> bool:
    return part.endswith((".xml", ".rels"))


# -------------------------------------------------------------------------------------------- DOCX


def parse_docx(data: bytes, job: ParseJob) -> list[Page]:
    """A Word file: page 1, headings as `#`, paragraphs and tables (Markdown) in document order."""
    with open_office_zip(data, job, "docx", lambda part: part.endswith((".rels", "/styles.xml"))) as z:
        body = _main_part(z, "word/document.xml")
        size = z.getinfo(body).file_size
        if size > MAX_DOCX_BODY_BYTES:
            raise _expands(job.name, f"its text part expands to {_mb(size)}, over the limit of "
                           f"{_mb(MAX_DOCX_BODY_BYTES)} (a zip bomb, or far more than any real document)")  # fmt: skip
        headings = _docx_headings(z, body)
        with z.open(body) as stream:
            blocks = [job.add(block) for block in _docx_blocks(stream, headings, job)]
    return [Page(1, "\n\n".join(blocks))]


def _main_part(archive: zipfile.ZipFile, default: str) -> str:
    """The package's main part (its officeDocument relationship), else `default`."""
    for target, kind in _relationships(archive, "_rels/.rels", ""):
        if kind.endswith("/officeDocument") and target in archive.NameToInfo:
            return target
    return default  # missing too: reading it raises KeyError, reported as a damaged file


def _relationships(archive: zipfile.ZipFile, rels: str, base: str) -> list[tuple[str, str]]:
    """(target part, relationship type) of a .rels part; targets resolved against the folder `base`."""
    import lxml.etree as etree  # this form: pyright cannot resolve `from lxml import etree` (a compiled module)

    if rels not in archive.NameToInfo:
        return []
    root = etree.fromstring(archive.read(rels), parser=_xml_parser())
    found = []
    for rel in root.iter(_REL):
        target = rel.get("Target", "")
        if rel.get("TargetMode") == "External":
            continue
        path = target.lstrip("/") if target.startswith("/") else _join(base, target)
        found.append((path, rel.get("Type", "")))
    return found


def _join(base: str, target: str) -> str:
    parts: list[str] = [p for p in base.split("/") if p]
    for piece in target.split("/"):
        if piece == "..":
            if parts:
                parts.pop()
        elif piece and piece != ".":
            parts.append(piece)
    return "/".join(parts)


def _xml_parser() -> Any:
    import lxml.etree as etree

    return etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)


def _docx_headings(archive: zipfile.ZipFile, body: str) -> dict[str, int]:
    """Paragraph style id -> heading level (1 for Title and Heading 1, ...) from the styles part."""
    import lxml.etree as etree

    folder, _, file = body.rpartition("/")
    styles = next((t for t, k in _relationships(archive, f"{folder}/_rels/{file}.rels", folder)
                   if k.endswith("/styles") and t in archive.NameToInfo), None)  # fmt: skip
    if styles is None:
        return {}
    levels: dict[str, int] = {}
    root = etree.fromstring(archive.read(styles), parser=_xml_parser())
    for style in root:
        if _local(style.tag) != "style" or _attr(style, "type") != "paragraph":
            continue
        label = next((_attr(c, "val") or "" for c in style if _local(c.tag) == "name"), "").lower()
        match = _HEADING.fullmatch(label)
        if match or label == "title":
            levels[_attr(style, "styleId") or ""] = int(match.group(1)) if match else 1
    return levels


def _docx_blocks(stream: IO[bytes], headings: dict[str, int], job: ParseJob) -> Iterator[str]:
    """The body's paragraphs and tables as text, in order; each is dropped from memory once read."""
    import lxml.etree as etree

    tags = [f"{{{ns}}}{local}" for ns in _W for local in ("p", "tr", "tbl")]
    rows: list[list[str]] = []
    blocks = 0
    for _, element in etree.iterparse(stream, events=("end",), tag=tags, resolve_entities=False, no_network=True):
        local = _local(element.tag)
        if local == "tr":
            if _in_body(element.getparent()):
                rows.append([_text_of(cell) for cell in _row_cells(element)])
                _drop(element)
                if len(rows) % 1000 == 0:
                    job.check(f"table row {len(rows)}")
            continue
        if not _in_body(element):
            continue
        blocks += 1
        if blocks % 256 == 0:
            job.check(f"paragraph {blocks}")
        if local == "tbl":
            table, rows = markdown_table(rows), []
            if table:
                yield table
        else:
            text = _text_of(element).strip()
            level = headings.get(_paragraph_style(element), 0)
            if text:
                yield f"{'#' * level} {text}" if level else text
        _drop(element)


def _in_body(element: Any) -> bool:
    """Whether a paragraph or table is a block of the body (not inside a table cell or a text box)."""
    parent = element.getparent()
    while parent is not None:
        local = _local(parent.tag)
        if local == "body":
            return True
        if local in ("tc", "txbxContent", "footnote", "comment"):
            return False
        parent = parent.getparent()
    return False


def _row_cells(row: Any) -> Iterator[Any]:
    for child in row:
        local = _local(child.tag)
        if local == "tc":
            yield child
        elif local in ("sdt", "customXml"):  # a content control around cells
            for inner in child.iter():
                if _local(inner.tag) == "tc":
                    yield inner


def _text_of(element: Any) -> str:
    """The text under a paragraph or cell: runs, tabs and breaks; one line per paragraph inside it."""
    parts: list[str] = []
    stack = [element]
    while stack:
        node = stack.pop()
        if node is None:  # the end of a nested paragraph
            parts.append("\n")
            continue
        tag = node.tag
        if not isinstance(tag, str) or tag == _MC_FALLBACK:  # comments; the fallback copy of a drawing
            continue
        local = _local(tag)
        if local == "t":
            parts.append(node.text or "")
        elif local == "tab" and _local(node.getparent().tag) == "r":
            parts.append("\t")
        elif local in ("br", "cr"):
            parts.append("\n")
        elif local == "noBreakHyphen":
            parts.append("-")
        else:
            if local == "p" and node is not element:
                stack.append(None)
            stack.extend(reversed(node))
    return "".join(parts)


def _paragraph_style(paragraph: Any) -> str:
    for child in paragraph:
        if _local(child.tag) == "pPr":
            for prop in child:
                if _local(prop.tag) == "pStyle":
                    return _attr(prop, "val") or ""
    return ""


def _drop(element: Any) -> None:
    """Free a block that has been read, and the blocks before it."""
    element.clear(keep_tail=False)
    parent = element.getparent()
    if parent is not None:
        while element.getprevious() is not None:
            del parent[0]


def _local(tag: Any) -> str:
    return tag.rpartition("}")[2] if isinstance(tag, str) else ""


def _attr(element: Any, local: str) -> str | None:
    for ns in _W:
        value = element.get(f"{{{ns}}}{local}")
        if value is not None:
            return value
    return None


# -------------------------------------------------------------------------------------------- PPTX


def parse_pptx(data: bytes, job: ParseJob) -> list[Page]:
    """A presentation: one page per slide (title as `#`, text boxes, tables, speaker notes)."""
    import pptx

    open_office_zip(data, job, "pptx", _is_xml).close()  # checked; python-pptx opens its own copy
    presentation = pptx.Presentation(io.BytesIO(data))
    pages = []
    for number, slide in enumerate(presentation.slides, 1):
        job.check(f"slide {number}")
        parts: list[str] = []
        title = slide.shapes.title
        if title is not None and title.has_text_frame and title.text_frame.text.strip():
            parts.append("# " + title.text_frame.text.strip())
        for shape in _walk_shapes(slide.shapes):
            if title is not None and shape.shape_id == title.shape_id:
                continue
            if getattr(shape, "has_table", False) and shape.has_table:
                parts.append(markdown_table([[c.text for c in row.cells] for row in shape.table.rows]))
            elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
                text = shape.text_frame.text.strip()
                if text:
                    parts.append(text)
        if slide.has_notes_slide:
            notes = slide.notes_slide.notes_text_frame
            if notes is not None and notes.text.strip():
                parts.append("Notes: " + notes.text.strip())
        pages.append(Page(number, job.add("\n\n".join(parts))))
    return pages


def _walk_shapes(shapes: Iterable[Any]) -> Iterable[Any]:
    for shape in shapes:
        if getattr(shape, "shape_type", None) == 6:  # MSO_SHAPE_TYPE.GROUP
            yield from _walk_shapes(shape.shapes)
        else:
            yield shape


# -------------------------------------------------------------------------------------------- XLSX


def parse_xlsx(data: bytes, job: ParseJob) -> list[Page]:
    """A workbook: each sheet as Markdown tables of ROWS_PER_PAGE rows that repeat the header row.

    Only the cells the sheet holds are read; columns and rows empty in a page are left out of it.
    """
    import openpyxl

    worksheet = re.compile(r"xl/worksheets/[^/]+\.xml")
    open_office_zip(data, job, "xlsx", lambda part: _is_xml(part) and not worksheet.fullmatch(part)).close()
    book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    try:
        pages: list[Page] = []
        for sheet in book.worksheets:
            heading = f"## Sheet: {sheet.title}"
            for text in _sheet_pages(book, sheet, job):
                pages.append(Page(len(pages) + 1, job.add(f"{heading}\n\n{text}")))
        return pages
    finally:
        book.close()


def _sheet_pages(book: Any, sheet: Any, job: ParseJob) -> Iterator[str]:
    """A sheet's non-empty rows as Markdown tables of ROWS_PER_PAGE rows under its first non-empty row."""
    header: dict[int, str] | None = None
    block: list[dict[int, str]] = []
    for n, row in enumerate(_sheet_rows(book, sheet), 1):
        if n % 1000 == 0:
            job.check(f"sheet '{sheet.title}', row {n}")
        if header is None:
            header = row
        else:
            block.append(row)
            if len(block) == ROWS_PER_PAGE:
                yield _sparse_table(header, block)
                block = []
    if header is not None and (block or n == 1):
        yield _sparse_table(header, block)


def _sheet_rows(book: Any, sheet: Any) -> Iterator[dict[int, str]]:
    """The sheet's non-empty rows as {column: text}, only the cells the file holds (its dimension is ignored).

    openpyxl's read-only rows are padded to the sheet's dimension (A1:XFD1048576 is 17 billion cells); its
    sheet parser, which the read-only sheet uses underneath, yields the cells as they are in the file.
    """
    from openpyxl.worksheet._reader import WorkSheetParser

    if not hasattr(sheet, "_get_source"):  # a chartsheet: no cells
        return
    with sheet._get_source() as source:
        parser = WorkSheetParser(source, sheet._shared_strings, data_only=True, epoch=book.epoch,
                                 date_formats=book._date_formats, timedelta_formats=book._timedelta_formats)  # fmt: skip
        for _, cells in parser.parse():
            row = {c["column"]: text for c in cells if c["value"] is not None and (text := str(c["value"])).strip()}
            if row:
                yield row


def _sparse_table(header: dict[int, str], rows: list[dict[int, str]]) -> str:
    columns = sorted(set(header).union(*rows))
    return markdown_table([[r.get(c, "") for c in columns] for r in (header, *rows)])

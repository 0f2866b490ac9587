"""Small hostile documents (issue 19.11): each is built here, parsed in a child process under an address-space
limit, and must give a clear outcome within a memory bound; a run's deadline interrupts every parser."""

from __future__ import annotations

import io
import json
import random
import resource
import subprocess
import sys
import types
import zipfile
from pathlib import Path

import pytest

from chatagent.errors import RunDeadlineExceeded
from chatagent.rag import DocStore, DocumentError, office, parse_bytes, parse_file
from tests.rag.pdf_builders import HELVETICA, raw_pdf, text_pages_pdf, text_stream
from tests.support import processes

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]
CHILD_MEMORY_MB = 768  # address space of the child: the libraries take ~210 MB of it before any parsing
W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
SPREADSHEET = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"


# ------------------------------------------------------------------------------------ child process


def parse_in_child(path: Path) -> dict:
    """parse_file(path) in a fresh interpreter under RLIMIT_AS: its outcome and its peak resident memory."""
    code = f"""
import json, resource
from chatagent.rag import parse_file, DocumentError
try:
    doc = parse_file({str(path)!r})
    out = {{"pages": [[p.number, p.text] for p in doc.pages]}}
except DocumentError as e:
    out = {{"reason": e.reason, "message": str(e)}}
out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""

    default_signals = processes.default_signals()["preexec_fn"]

    def limits() -> None:  # default signal handling, whatever the test runner's parent ignores, and a memory cap
        default_signals()
        resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY_MB * 2**20, CHILD_MEMORY_MB * 2**20))

    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=150, preexec_fn=limits
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def baseline_peak_mb(tmp_path: Path) -> float:
    """The child's peak memory for a tiny honest file: the bound of each hostile case is this plus a margin."""
    small = tmp_path / "small.txt"
    small.write_text("A small honest file.")
    return parse_in_child(small)["peak_mb"]


# -------------------------------------------------------------------------------------------- DOCX


def docx_with_body(path: Path, body_mb: int) -> None:
    """A DOCX whose word/document.xml inflates to `body_mb` MB of paragraphs at ~160x (under the 200x ratio check)."""
    rnd = random.Random(7)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(
            "[Content_Types].xml",
            '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" '
            'ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Override '
            'PartName="/word/document.xml" '
            'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>',
        )
        z.writestr(
            "_rels/.rels",
            '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="r1" '
            'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" '
            'Target="word/document.xml"/></Relationships>',
        )
        with z.open("word/document.xml", "w", force_zip64=True) as f:
            f.write(f'<w:document xmlns:w="{W}"><w:body>'.encode())
            para = b"<w:p><w:r><w:t>The same sentence again and again, %s.</w:t></w:r></w:p>"
            written = 0
            while written < body_mb * 2**20:
                chunk = b"".join(para % (b"%08x" % rnd.getrandbits(32) if i % 40 == 0 else b"x") for i in range(4000))
                f.write(chunk)
                written += len(chunk)
            f.write(b"</w:body></w:document>")


def test_docx_whose_body_inflates_to_hundreds_of_mb_is_refused_before_inflating(tmp_path: Path) -> None:
    path = tmp_path / "bomb.docx"
    docx_with_body(path, 200)
    info = zipfile.ZipFile(path).getinfo("word/document.xml")
    assert path.stat().st_size < 2 * 2**20 and info.file_size > 200 * 2**20
    assert info.file_size / info.compress_size < 200  # the ratio check alone lets it through
    out = parse_in_child(path)
    assert out.get("reason") == "too_large", out
    assert out["message"] == (
        "'bomb.docx' was not opened: its text part expands to 200 MB, over the limit of 128 MB (a zip bomb, or far "
        "more than any real document)."
    )
    assert out["peak_mb"] < baseline_peak_mb(tmp_path) + 30  # nothing was inflated


def test_docx_under_the_size_limit_is_read_as_a_stream_and_stops_at_its_text_budget(tmp_path: Path) -> None:
    path = tmp_path / "dense.docx"
    docx_with_body(path, 64)  # 0.4 MB on disk, 37 million characters of text
    out = parse_in_child(path)
    assert out.get("reason") == "too_large", out
    assert "was not read to the end: it gives more than 17 million characters" in out["message"]
    assert "what a file of 0.4 MB can hold" in out["message"]
    assert out["peak_mb"] < baseline_peak_mb(tmp_path) + 120  # the 64 MB of XML never was in memory at once


def test_docx_streaming_reader_keeps_headings_paragraphs_and_tables_in_order(tmp_path: Path) -> None:
    import docx

    d = docx.Document()
    d.add_heading("Report", level=0)  # the Title style
    d.add_heading("Results", level=2)
    d.add_paragraph("Tab\there and a line\nbreak.")
    table = d.add_table(rows=3, cols=3)
    for r, row in enumerate([["name", "value", "note"], ["speed", "fast", "x"], ["size", "small", "y"]]):
        for c, text in enumerate(row):
            table.cell(r, c).text = text
    table.cell(1, 2).merge(table.cell(2, 2))  # a vertical merge
    inner = table.cell(2, 0).add_table(rows=1, cols=2)  # a nested table: its text stays in its cell
    inner.cell(0, 0).text, inner.cell(0, 1).text = "inner", "cell"
    d.add_paragraph("After.")
    d.save(tmp_path / "r.docx")
    text = parse_file(tmp_path / "r.docx").pages[0].text
    assert text.splitlines()[:5] == ["# Report", "", "## Results", "", "Tab\there and a line"]
    assert "| name | value | note |\n|---|---|---|\n| speed | fast | x y |\n| size inner cell | small |  |" in text
    assert text.endswith("After.")


@pytest.mark.parametrize("kind", ["pptx", "xlsx"])
def test_parts_a_library_reads_whole_are_capped_by_their_declared_size(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """python-pptx parses every XML part into a tree (~10x its size) and openpyxl reads shared strings whole:
    their declared sizes are summed before anything is inflated (the limit is lowered here to keep files small)."""
    monkeypatch.setitem(office.MAX_WHOLE_PARTS_BYTES, kind, 2**20)
    words = " ".join(f"word{i}" for i in range(300_000))  # 2.3 MB of text, in one part
    path = tmp_path / f"big.{kind}"
    if kind == "pptx":
        import pptx

        deck = pptx.Presentation()
        deck.slides.add_slide(deck.slide_layouts[1]).placeholders[1].text = words
        deck.save(path)
    else:
        import openpyxl

        book = openpyxl.Workbook()
        book.active["A1"] = "first"
        book.save(path)
        with zipfile.ZipFile(path, "a") as z:  # shared strings, as Excel writes them (openpyxl writes inline ones)
            z.writestr("xl/sharedStrings.xml", f'<sst xmlns="{SPREADSHEET}"><si><t>{words}</t></si></sst>')
    with pytest.raises(DocumentError) as info:
        parse_file(path)
    assert info.value.reason == "too_large"
    assert str(info.value).startswith(f"'big.{kind}' was not opened: its structure expands to ")
    assert str(info.value).endswith(f" MB in memory, over the limit of 1 MB for a {kind.upper()} file.")


# -------------------------------------------------------------------------------------------- XLSX


def test_xlsx_with_two_cells_at_opposite_corners_simply_parses(tmp_path: Path) -> None:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Corners"
    sheet["A1"], sheet["XFD1048576"] = "first cell", "last cell"
    path = tmp_path / "corners.xlsx"
    book.save(path)
    assert b'<dimension ref="A1:XFD1048576"/>' in zipfile.ZipFile(path).read("xl/worksheets/sheet1.xml")
    assert path.stat().st_size < 8000
    out = parse_in_child(path)
    assert out.get("pages") == [[1, "## Sheet: Corners\n\n| first cell |  |\n|---|---|\n|  | last cell |"]], out
    assert out["peak_mb"] < baseline_peak_mb(tmp_path) + 30  # 17 billion declared cells were never made


def test_xlsx_sheet_pages_leave_out_empty_columns_and_keep_values(tmp_path: Path) -> None:
    import datetime

    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    sheet["C3"], sheet["E3"] = "item", "when"
    sheet["C4"], sheet["E4"] = 1.5, datetime.datetime(2024, 5, 1)
    sheet["ZZ9"] = True
    book.save(tmp_path / "sparse.xlsx")
    text = parse_file(tmp_path / "sparse.xlsx").pages[0].text
    assert text.endswith("| item | when |  |\n|---|---|---|\n| 1.5 | 2024-05-01 00:00:00 |  |\n|  |  | True |")


# --------------------------------------------------------------------------------------------- PDF


def million_page_pdf() -> bytes:
    """12 KB: a page tree of 1,000 references to a node of 1,000 references to one page (1,000,000 leaves)."""
    return raw_pdf([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [" + b"3 0 R " * 1000 + b"] /Count 1000000 >>",
        b"<< /Type /Pages /Parent 2 0 R /Kids [" + b"4 0 R " * 1000 + b"] /Count 1000 >>",
        b"<< /Type /Page /Parent 3 0 R /MediaBox [0 0 612 792] /Contents 5 0 R /Resources << /Font << /F1 6 0 R >> >> >>",
        text_stream(b"The only page there is."),
        HELVETICA,
    ])  # fmt: skip


def lying_count_pdf() -> bytes:
    """A page tree whose /Count says 1,000,000 over one real page."""
    return text_pages_pdf([b"The only page there is."], count=1_000_000)


@pytest.mark.parametrize("build", [million_page_pdf, lying_count_pdf])
def test_pdf_declaring_a_million_pages_reads_the_pages_it_holds(build, pages_read: dict[str, int]) -> None:  # type: ignore[no-untyped-def]
    data = build()
    assert len(data) < 13_000
    doc = parse_bytes(data, "million.pdf")
    assert [(p.number, p.text) for p in doc.pages] == [(1, "The only page there is.")]
    assert pages_read["pdfium"] + pages_read["pypdf"] <= 1  # pages read <= page objects that exist


def test_honest_pdf_with_many_tiny_pages_is_read_whole_by_pdfium(pages_read: dict[str, int]) -> None:
    """100 pages in ~14 KB (under 200 bytes a page) make the page tree suspect; it checks out, PDFium reads all."""
    n = 100
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b""]
    kids = []
    for i in range(n):
        kids.append(b"%d 0 R" % (len(objects) + 1))
        objects.append(b"<< /Type /Page /Parent 2 0 R /Contents %d 0 R >>" % (len(objects) + 2))
        objects.append(text_stream(b"p%d" % (i + 1)) if i % 10 == 0 else b"<< /Length 0 >>\nstream\n\nendstream")
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d /MediaBox [0 0 200 200] /Resources << /Font << /F1 %d 0 R >> >> >>" % (
        b" ".join(kids), n, len(objects) + 1
    )  # fmt: skip
    objects.append(HELVETICA)
    data = raw_pdf(objects)
    assert len(data) < n * 200
    doc = parse_bytes(data, "tiny.pdf")
    assert [(p.number, p.text) for p in doc.pages] == [(i + 1, f"p{i + 1}") for i in range(0, n, 10)]
    assert pages_read == {"pdfium": n, "pypdf": 0}


# -------------------------------------------------------------------------------------------- text


def test_sixty_mb_text_file_is_stopped_by_the_deadline_and_not_remembered_as_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    words = " ".join(f"word{i}" for i in range(1000)).encode() + b"\n"
    path = tmp_path / "huge.txt"
    path.write_bytes(words * (60 * 2**20 // len(words)))
    assert path.stat().st_size > 59 * 2**20
    clock = FakeClock(monkeypatch)
    store = DocStore(tmp_path / "ws", disk_cache=False, max_text_chars=10**9)  # (the default refuses it: too large)
    with pytest.raises(RunDeadlineExceeded) as info:
        store.retrieve([path], "word7", 100, deadline=clock.now + 1.5)  # passes after the parse, as it is prepared
    assert str(info.value).startswith("reading 'huge.txt' was stopped at preparing it for search (")
    assert clock.checks == 2 and store.parses == 1
    assert store._key_locks == {}  # nor a per-content lock (it was kept for ever after such a failure)
    small = tmp_path / "small.txt"
    small.write_text("word7 is here")
    with pytest.raises(RunDeadlineExceeded):  # a deadline already passed: not even a small file is read
        store.retrieve([small], "word7", 100, deadline=clock.now - 1)
    assert store.retrieve([small], "word7", 100).chunks  # the interrupted parse left no failure behind


# ----------------------------------------------------------------------------------------- deadline


class FakeClock:
    """The parsers' clock, advancing one second at each deadline check: a deadline passes at a known check."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = 1000.0
        self.checks = 0
        monkeypatch.setattr("chatagent.rag.document.time", types.SimpleNamespace(monotonic=self.tick))

    def tick(self) -> float:
        self.checks += 1
        self.now += 1
        return self.now


def long_pdf(pages: int) -> bytes:
    import fpdf

    pdf = fpdf.FPDF()
    pdf.set_font("helvetica", size=12)
    for i in range(pages):
        pdf.add_page()
        pdf.cell(0, 10, f"Page {i + 1} of a long report.")
    return bytes(pdf.output())


def long_docx(paragraphs: int) -> bytes:
    import docx

    d = docx.Document()
    for i in range(paragraphs):
        d.add_paragraph(f"Paragraph {i + 1}.")
    out = io.BytesIO()
    d.save(out)
    return out.getvalue()


def long_xlsx(rows: int) -> bytes:
    import openpyxl

    book = openpyxl.Workbook(write_only=True)
    sheet = book.create_sheet("Rows")
    for i in range(rows):
        sheet.append([f"row {i + 1}", i])
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def long_pptx(slides: int) -> bytes:
    import pptx

    prs = pptx.Presentation()
    for i in range(slides):
        prs.slides.add_slide(prs.slide_layouts[5]).shapes.title.text = f"Slide {i + 1}"
    out = io.BytesIO()
    prs.save(out)
    return out.getvalue()


@pytest.mark.parametrize(
    "name,build,checks,where",
    [
        ("report.pdf", lambda: long_pdf(40), 5, "page 4"),  # one check before parsing, then one per page
        ("report.docx", lambda: long_docx(2000), 4, "paragraph 768"),  # one per 256 paragraphs
        ("rows.xlsx", lambda: long_xlsx(5000), 4, "sheet 'Rows', row 3000"),  # one per 1,000 rows
        ("deck.pptx", lambda: long_pptx(10), 3, "slide 2"),
        ("rows.csv", lambda: "".join(f"r{i},{i}\n" for i in range(50_000)).encode(), 4, "row 20001"),
    ],
)
def test_the_deadline_interrupts_each_parser_where_it_is(
    name: str,
    build,
    checks: int,
    where: str,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
) -> None:
    data = build()
    clock = FakeClock(monkeypatch)
    with pytest.raises(RunDeadlineExceeded) as info:
        parse_bytes(data, name, deadline=clock.now + checks - 0.5)
    assert str(info.value) == f"reading '{name}' was stopped at {where}: the run went past its deadline"
    assert clock.checks == checks
    assert not isinstance(info.value, DocumentError)  # not cached as a bad file: a later run may read it

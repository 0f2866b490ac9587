"""parse_file on real files generated here: every format, every encoding, and every kind of bad file."""

from __future__ import annotations

import io
import logging
import os
import pickle
import re
import struct
import sys
import tracemalloc
import zipfile
from pathlib import Path

import pytest

from chatagent.rag import SUPPORTED_EXTENSIONS, Document, DocumentError, parse_file
from chatagent.rag.document import ParseJob
from chatagent.rag.parsers import REASONS, decode_text, parse_bytes
from chatagent.rag.pdf import clean_pdf_text, parse_pdf_pypdf
from tests.support import processes

pytestmark = pytest.mark.timeout(60)


# ------------------------------------------------------------------------------------ file builders


def make_pdf(pages: list[str]) -> bytes:
    """A PDF with one page per string (an empty string makes a page with only a drawing, like a scan)."""
    import fpdf

    pdf = fpdf.FPDF()
    pdf.set_font("helvetica", size=12)
    for text in pages:
        pdf.add_page()
        if text:
            pdf.multi_cell(0, 8, text)
        else:
            pdf.rect(20, 20, 100, 100, style="F")
    return bytes(pdf.output())


def encrypt_pdf(data: bytes, password: str) -> bytes:
    import pypdf

    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(data)))
    writer.encrypt(password, algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def make_docx(path: Path) -> None:
    import docx

    d = docx.Document()
    d.add_heading("Installation", level=1)
    d.add_paragraph("First paragraph before the table.")
    table = d.add_table(rows=2, cols=2)
    table.cell(0, 0).text = "name"
    table.cell(0, 1).text = "value"
    table.cell(1, 0).text = "speed"
    table.cell(1, 1).text = "fast | very"
    d.add_paragraph("Paragraph after the table.")
    d.save(path)


def make_pptx(path: Path) -> None:
    import pptx
    from pptx.util import Inches

    prs = pptx.Presentation()
    s1 = prs.slides.add_slide(prs.slide_layouts[1])
    s1.shapes.title.text = "Welcome slide"
    s1.placeholders[1].text = "Bullet about cats"
    s1.notes_slide.notes_text_frame.text = "Speaker notes here"
    s2 = prs.slides.add_slide(prs.slide_layouts[5])
    s2.shapes.title.text = "Numbers"
    shape = s2.shapes.add_table(2, 2, Inches(1), Inches(2), Inches(4), Inches(1))
    shape.table.cell(0, 0).text = "year"
    shape.table.cell(0, 1).text = "sales"
    shape.table.cell(1, 0).text = "2024"
    shape.table.cell(1, 1).text = "42"
    prs.slides.add_slide(prs.slide_layouts[6])  # an empty slide: no text, dropped
    prs.save(path)


def make_xlsx(path: Path, rows: int = 3) -> None:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Prices"
    sheet.append(["item", "price"])
    for i in range(rows):
        sheet.append([f"item{i}", i * 1.5])
    sheet.append([None, None])
    other = book.create_sheet("Notes")
    other.append(["note"])
    other.append(["remember the milk"])
    book.save(path)


def zip_bomb(path: Path, member: str, size: int = 60 * 1024 * 1024) -> None:
    """An Office-looking zip whose `member` inflates from a few KB to `size` bytes."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        z.writestr(member, b"\0" * size)


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def reason_of(path: Path, **kwargs: object) -> DocumentError:
    with pytest.raises(DocumentError) as info:
        parse_file(path, **kwargs)  # type: ignore[arg-type]
    assert info.value.reason in REASONS
    assert path.name in str(info.value)  # the user is told which file
    return info.value


# --------------------------------------------------------------------------------------------- PDF


def test_pdf_pages_are_numbered_and_keep_text(tmp_path: Path) -> None:
    path = write(tmp_path, "manual.pdf", make_pdf(["Install packages with install.packages.", "", "Third page text."]))
    doc = parse_file(path)
    assert isinstance(doc, Document) and doc.source == "manual.pdf" and doc.kind == "pdf"
    assert [p.number for p in doc.pages] == [1, 3]  # the page without text is left out, numbers stay true
    assert "install.packages" in doc.pages[0].text
    assert doc.pages[1].text == "Third page text."


def test_pypdf_fallback_reads_the_same_text() -> None:
    data = make_pdf(["Alpha beta gamma.", "Delta."])
    pages = parse_pdf_pypdf(data, ParseJob("x.pdf"))
    assert [p.number for p in pages] == [1, 2]
    assert "Alpha beta gamma." in pages[0].text


def test_encrypted_pdf_needs_password_and_opens_with_it(tmp_path: Path) -> None:
    path = write(tmp_path, "secret.pdf", encrypt_pdf(make_pdf(["Top secret plans."]), "s3cret"))
    error = reason_of(path)
    assert error.reason == "needs_password" and "password" in str(error)
    wrong = reason_of(path, password="nope")
    assert wrong.reason == "needs_password" and "wrong" in str(wrong)
    assert parse_file(path, password="s3cret").pages[0].text == "Top secret plans."
    data = path.read_bytes()
    with pytest.raises(DocumentError) as info:  # the pypdf fallback says the same
        parse_pdf_pypdf(data, ParseJob("secret.pdf", "nope"))
    assert info.value.reason == "needs_password"
    assert parse_pdf_pypdf(data, ParseJob("secret.pdf", "s3cret"))[0].text.strip() == "Top secret plans."
    assert parse_bytes(data, "any-name", "s3cret", kind="pdf").pages[0].text == "Top secret plans."


def test_scan_without_text_layer_is_no_text(tmp_path: Path) -> None:
    error = reason_of(write(tmp_path, "scan.pdf", make_pdf(["", ""])))
    assert error.reason == "no_text" and "OCR" in str(error)


def test_corrupt_and_truncated_pdfs_never_crash(tmp_path: Path) -> None:
    assert reason_of(write(tmp_path, "garbage.pdf", b"%PDF-1.7\n" + os.urandom(5000))).reason == "broken"
    assert reason_of(write(tmp_path, "notpdf.pdf", b"hello, I am text")).reason == "broken"
    full = make_pdf(["Some text on page one.", "More text on page two."])
    for cut in (20, len(full) // 3, len(full) // 2, len(full) - 40):
        path = write(tmp_path, f"cut{cut}.pdf", full[:cut])
        try:
            doc = parse_file(path)
        except DocumentError as e:
            assert e.reason in ("broken", "no_text")
        else:  # PDFium repairs some truncated files: then the text it found is real
            assert all(p.text for p in doc.pages)


# ------------------------------------------------------------------------------------------ Office


def test_docx_paragraphs_and_tables_in_document_order(tmp_path: Path) -> None:
    make_docx(tmp_path / "notes.docx")
    doc = parse_file(tmp_path / "notes.docx")
    assert [p.number for p in doc.pages] == [1]
    text = doc.pages[0].text
    assert text.index("# Installation") < text.index("First paragraph") < text.index("| name | value |")
    assert text.index("| speed | fast \\| very |") < text.index("Paragraph after the table.")


def test_pptx_one_page_per_slide(tmp_path: Path) -> None:
    make_pptx(tmp_path / "deck.pptx")
    doc = parse_file(tmp_path / "deck.pptx")
    assert [p.number for p in doc.pages] == [1, 2]
    assert doc.pages[0].text.startswith("# Welcome slide")
    assert "Bullet about cats" in doc.pages[0].text and "Speaker notes here" in doc.pages[0].text
    assert "| year | sales |" in doc.pages[1].text and "| 2024 | 42 |" in doc.pages[1].text


def test_xlsx_sheets_as_markdown_tables(tmp_path: Path) -> None:
    make_xlsx(tmp_path / "book.xlsx")
    doc = parse_file(tmp_path / "book.xlsx")
    assert [p.number for p in doc.pages] == [1, 2]
    assert doc.pages[0].text.splitlines()[0] == "## Sheet: Prices"
    assert "| item | price |" in doc.pages[0].text and "| item1 | 1.5 |" in doc.pages[0].text
    assert "remember the milk" in doc.pages[1].text


def test_long_sheet_is_cut_into_pages_that_repeat_the_header(tmp_path: Path) -> None:
    make_xlsx(tmp_path / "big.xlsx", rows=250)
    doc = parse_file(tmp_path / "big.xlsx")
    prices = [p for p in doc.pages if "Sheet: Prices" in p.text]
    assert len(prices) == 3
    assert all("| item | price |" in p.text for p in prices)
    assert "| item249 |" in prices[-1].text


@pytest.mark.parametrize("member", ["word/document.xml", "xl/worksheets/sheet1.xml", "ppt/slides/slide1.xml"])
def test_zip_bomb_posing_as_office_file_is_refused_fast(tmp_path: Path, member: str) -> None:
    ext = {"word": "docx", "xl": "xlsx", "ppt": "pptx"}[member.split("/")[0]]
    path = tmp_path / f"bomb.{ext}"
    zip_bomb(path, member)
    assert path.stat().st_size < 200_000
    tracemalloc.start()
    try:
        error = reason_of(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert error.reason == "too_large" and "expands" in str(error)
    assert peak < 20 * 1024 * 1024  # the memory bound is the proof (a hang: the test's deadline)


def test_zip_that_lies_about_its_sizes_is_read_no_further_than_declared(tmp_path: Path) -> None:
    """Declared sizes pass the checks, the real content is 30 MB: zipfile stops at the declared size."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        z.writestr("word/document.xml", b"<" * (30 * 1024 * 1024))
    data = bytearray(buffer.getvalue())
    info = zipfile.ZipFile(io.BytesIO(bytes(data))).getinfo("word/document.xml")
    struct.pack_into("<I", data, info.header_offset + 22, 1000)  # local header: uncompressed size
    central = data.rfind(b"PK\x01\x02")  # the member's central directory entry is the last one
    struct.pack_into("<I", data, central + 24, 1000)
    path = write(tmp_path, "liar.docx", bytes(data))
    tracemalloc.start()
    error = reason_of(path)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert error.reason == "broken"
    assert peak < 20 * 1024 * 1024


@pytest.mark.parametrize("ext", ["docx", "pptx", "xlsx"])
def test_non_zip_office_files_are_broken(tmp_path: Path, ext: str) -> None:
    assert reason_of(write(tmp_path, f"fake.{ext}", b"this is not a zip file at all")).reason == "broken"
    full = tmp_path / f"full.{ext}"
    {"docx": make_docx, "pptx": make_pptx, "xlsx": make_xlsx}[ext](full)
    assert reason_of(write(tmp_path, f"cut.{ext}", full.read_bytes()[:2000])).reason == "broken"


# -------------------------------------------------------------------------------------------- text


@pytest.mark.parametrize(
    "encoding,bom",
    [("utf-8", b""), ("utf-8", b"\xef\xbb\xbf"), ("gbk", b""), ("gb18030", b""), ("utf-16-le", b"\xff\xfe"),
     ("utf-16-be", b"\xfe\xff")],
)  # fmt: skip
def test_text_encodings_are_detected(tmp_path: Path, encoding: str, bom: bytes) -> None:
    text = "第一章 安装\n\n使用 install.packages 安装软件包。价格：100元"
    path = write(tmp_path, "notes.txt", bom + text.encode(encoding))
    assert parse_file(path).pages[0].text == text


LEGACY_TEXTS = {
    "zh-Hant": "第一章 安裝說明\n\n請使用 install.packages 函數安裝軟體套件。安裝完成後，請使用 library 函數載入套件。"
    "這份文件是以繁體中文撰寫的，詳細內容請參考下一章。價格：100元。\n",
    "ja": "第一章 インストール\n\nパッケージは install.packages 関数でインストールします。インストールが終わったら、"
    "library 関数でパッケージを読み込みます。この文書は日本語で書かれています。詳しくは次の章を参照してください。\n",
    "ko": "제1장 설치\n\n패키지는 install.packages 함수로 설치합니다. 설치가 끝나면 library 함수로 패키지를 "
    "불러옵니다. 가격은 100원입니다. 이 문서는 한국어로 작성되었습니다. 자세한 내용은 다음 장을 참고하십시오.\n",
    "ru": "Глава 1. Установка\n\nПакеты устанавливаются функцией install.packages. После установки загрузите "
    "пакет функцией library. Этот документ написан на русском языке. Подробности смотрите в следующей главе.\n",
}


@pytest.mark.parametrize(
    "lang,encoding",
    [("zh-Hant", "big5"), ("ja", "shift_jis"), ("ja", "euc-jp"), ("ko", "euc-kr"), ("ru", "cp1251"), ("ru", "koi8-r")],
)
def test_east_asian_and_cyrillic_legacy_encodings_are_detected(tmp_path: Path, lang: str, encoding: str) -> None:
    text = LEGACY_TEXTS[lang] * 3
    path = write(tmp_path, "notes.txt", text.encode(encoding))
    assert parse_file(path).pages[0].text == text.strip()
    rows = [s.strip() for s in re.split(r"[。.\n]+", LEGACY_TEXTS[lang]) if s.strip()]
    table = "text,n\n" + "".join(f"{row},{n}\n" for n, row in enumerate(rows))
    csv_text = parse_file(write(tmp_path, "table.csv", table.encode(encoding))).pages[0].text
    assert all(f"| {' '.join(row.split())} | {n} |" in csv_text for n, row in enumerate(rows))


def test_text_in_no_recognisable_encoding_is_refused_not_garbled(tmp_path: Path) -> None:
    path = write(tmp_path, "odd.txt", b"hello " + bytes([0x81, 0xFF, 0xFE, 0x80]) * 50)
    error = reason_of(path)
    assert error.reason == "unsupported"
    assert str(error) == (
        "'odd.txt' could not be read: it is not UTF-8 and its text encoding was not recognised "
        "(save it as UTF-8 and try again)."
    )


def test_western_legacy_encoding_falls_back_to_cp1252(tmp_path: Path) -> None:
    path = write(tmp_path, "old.txt", "Café crème — naïve résumé".encode("cp1252"))
    assert parse_file(path).pages[0].text == "Café crème — naïve résumé"


def test_markdown_and_html(tmp_path: Path) -> None:
    md = write(tmp_path, "readme.md", b"# Title\n\nSome *markdown* text.\n")
    assert parse_file(md).pages[0].text == "# Title\n\nSome *markdown* text."
    html = b"""<html><head><title>Guide</title><style>p{color:red}</style></head><body>
    <script>var secret = 1;</script><h2>Setup</h2><p>Run the installer.</p>
    <table><tr><th>os</th><th>cmd</th></tr><tr><td>linux</td><td>apt</td></tr></table></body></html>"""
    text = parse_file(write(tmp_path, "page.html", html)).pages[0].text
    assert text.startswith("# Guide") and "## Setup" in text and "Run the installer." in text
    assert "| os | cmd |" in text and "| linux | apt |" in text
    assert "secret" not in text and "color" not in text


def test_csv_and_tsv_become_markdown_tables(tmp_path: Path) -> None:
    csv_path = write(tmp_path, "data.csv", b"name,qty\napple,3\npear|x,5\n")
    assert parse_file(csv_path).pages[0].text == "| name | qty |\n|---|---|\n| apple | 3 |\n| pear\\|x | 5 |"
    tsv_path = write(tmp_path, "data.tsv", "名字\t数量\n苹果\t3\n".encode("gbk"))
    assert "| 苹果 | 3 |" in parse_file(tsv_path).pages[0].text
    rows = "\n".join(f"r{i},{i}" for i in range(150))
    pages = parse_file(write(tmp_path, "long.csv", f"a,b\n{rows}\n".encode())).pages
    assert [p.number for p in pages] == [1, 2] and all(p.text.startswith("| a | b |") for p in pages)


# ------------------------------------------------------------------------------------- bad inputs


def test_a_zero_byte_file_is_broken_and_a_blank_text_file_has_no_text(tmp_path: Path) -> None:
    for name in ("empty.txt", "empty.pdf", "empty.docx", "empty.xlsx", "empty.csv"):
        error = reason_of(write(tmp_path, name, b""))
        assert (error.reason, str(error)) == ("broken", f"'{name}' is empty (0 bytes): there is nothing to read.")
    for name in ("blank.md", "blank.txt", "blank.csv", "blank.html"):
        error = reason_of(write(tmp_path, name, b"  \n\n "))
        assert (error.reason, str(error)) == ("no_text", f"'{name}' is empty.")
    assert reason_of(write(tmp_path, "blank.pdf", b"  \n\n ")).reason == "broken"  # not a PDF at all


def test_binary_renamed_txt_is_refused(tmp_path: Path) -> None:
    elf = b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 20
    assert reason_of(write(tmp_path, "program.txt", elf)).reason == "unsupported"
    assert reason_of(write(tmp_path, "noise.txt", os.urandom(4096))).reason == "unsupported"
    png = b"\x89PNG\r\n\x1a\n" + os.urandom(2048)
    assert reason_of(write(tmp_path, "image.md", png)).reason == "unsupported"


def test_too_large_files_are_refused_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(tmp_path, "big.txt", b"word " * 5000)
    error = reason_of(path, max_bytes=1000)
    assert error.reason == "too_large" and "limit" in str(error)
    monkeypatch.setenv("CHATAGENT_MAX_FILE_MB", "0.001")
    assert reason_of(path).reason == "too_large"
    monkeypatch.setenv("CHATAGENT_MAX_FILE_MB", "lots")  # ignored, with a warning: the default limit applies
    with caplog.at_level(logging.WARNING, logger="chatagent.rag.parsers"):
        assert parse_file(path).pages
    assert "CHATAGENT_MAX_FILE_MB" in caplog.text
    monkeypatch.delenv("CHATAGENT_MAX_FILE_MB")
    assert parse_file(path).pages


def test_unsupported_and_missing(tmp_path: Path) -> None:
    assert reason_of(write(tmp_path, "tool.exe", b"MZ....")).reason == "unsupported"
    assert reason_of(write(tmp_path, "noext", b"text")).reason == "unsupported"
    assert reason_of(tmp_path / "missing.pdf").reason == "broken"
    (tmp_path / "folder.txt").mkdir()
    assert reason_of(tmp_path / "folder.txt").reason == "unsupported"
    assert parse_file(write(tmp_path, "noext2", b"plain words"), kind="txt").pages[0].text == "plain words"
    assert {"pdf", "docx", "pptx", "xlsx", "csv", "tsv", "html", "md", "txt"} <= SUPPORTED_EXTENSIONS
    with pytest.raises(DocumentError) as info:  # a NUL byte in a path: a DocumentError, not a ValueError
        parse_file(tmp_path / "bad\x00name.txt")
    assert info.value.reason == "broken" and info.value.source == "badname.txt" and "\x00" not in str(info.value)


def test_document_error_is_picklable_and_checks_its_reason() -> None:
    error = DocumentError("no_text", "'a.pdf' contains no extractable text.", "a.pdf")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.reason, str(copy), copy.source) == ("no_text", str(error), "a.pdf")
    with pytest.raises(ValueError):
        DocumentError("sad", "x")


def test_decode_text_rejects_control_characters() -> None:
    with pytest.raises(DocumentError):
        decode_text(b"abc\x01\x02\x03\x04\x05\x06\x07\x08\x0e\x0f\x10\x11\x12", "x.txt")
    assert decode_text(b"tab\tand\r\nnewline", "x.txt") == "tab\tand\r\nnewline"


def test_importing_the_rag_package_loads_no_parser_library() -> None:
    code = (
        "import sys, chatagent.rag\n"
        "from chatagent.rag import parse_file, DocumentError, Index\n"
        "heavy = {'pypdf', 'pypdfium2', 'docx', 'pptx', 'openpyxl', 'bs4', 'jieba', 'snowballstemmer'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    out = processes.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_pdf_text_cleanup_joins_soft_hyphens_and_shortens_dot_leaders() -> None:
    assert clean_pdf_text("Oth\ufffe\nerwise\r\nline") == "Otherwise\nline"
    assert clean_pdf_text("Introduction . . . . . . . . . 5") == "Introduction  ... 5"
    assert clean_pdf_text("Wait... what.") == "Wait... what."

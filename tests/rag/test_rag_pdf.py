"""The PDF path on every kind of unusual file, each generated here: encrypted (every algorithm, SASLprep
passwords), damaged cross-reference tables, rotated and huge pages, empty and image-only pages, and fonts whose
text PDFium loses or garbles while pypdf keeps it (issue 16.13, 16.14)."""

from __future__ import annotations

import io

import pytest

from chatagent.rag import DocumentError, parse_bytes
from chatagent.rag.document import ParseJob
from chatagent.rag.pdf import parse_pdf_pypdf, password_candidates, saslprep, text_score
from tests.rag.pdf_builders import noisy_ocr_pdf, one_page_pdf, text_pages_pdf, vertical_japanese_pdf
from tests.rag.test_rag_parsers import make_pdf

pytestmark = pytest.mark.timeout(60)


def encrypted(data: bytes, password: str | bytes, algorithm: str) -> bytes:
    import pypdf

    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(data)))
    writer.encrypt(user_password=password, algorithm=algorithm)  # type: ignore[arg-type]
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def texts(data: bytes, name: str = "x.pdf", password: str | None = None) -> list[tuple[int, str]]:
    return [(p.number, p.text) for p in parse_bytes(data, name, password).pages]


# ------------------------------------------------------------------------------------------ passwords


@pytest.mark.parametrize("algorithm", ["RC4-40", "RC4-128", "AES-128", "AES-256-R5", "AES-256"])
def test_every_encryption_needs_its_password_and_opens_with_it(algorithm: str) -> None:
    data = encrypted(make_pdf(["Quarterly figures."]), "s3cret", algorithm)
    for password, reason in ((None, "give its password"), ("wrong", "the password given is wrong")):
        with pytest.raises(DocumentError) as info:
            parse_bytes(data, "q.pdf", password)
        assert info.value.reason == "needs_password" and reason in str(info.value)
    assert texts(data, password="s3cret") == [(1, "Quarterly figures.")]
    assert parse_pdf_pypdf(data, ParseJob("q.pdf", "s3cret"))[0].text == "Quarterly figures."


def test_aes256_password_is_normalised_with_saslprep_as_pdf_2_requires() -> None:
    """A soft hyphen (mapped to nothing) and `ª` (NFKC: `a`) in the password the user types: the file's key is
    made from 'passworda', as every PDF 2.0 writer (here pypdf) makes it; PDFium alone does not normalise."""
    import pypdfium2

    typed = "pass\u00adword\u00aa"
    data = encrypted(make_pdf(["Salaries for 2024."]), typed, "AES-256")
    with pytest.raises(pypdfium2.PdfiumError):  # what failed before: the password as typed, in UTF-8
        pypdfium2.PdfDocument(data, password=typed)
    assert texts(data, password=typed) == [(1, "Salaries for 2024.")]
    assert texts(data, password="passworda") == [(1, "Salaries for 2024.")]
    with pytest.raises(DocumentError) as info:
        parse_bytes(data, "s.pdf", "pass\u00adword")
    assert info.value.reason == "needs_password" and "wrong" in str(info.value)


def test_a_file_keyed_with_the_password_as_typed_still_opens() -> None:
    """Writers that skip SASLprep key the file with the raw UTF-8 bytes: the typed password is tried first."""
    typed = "pass\u00adword\u00aa"
    data = encrypted(make_pdf(["Raw key."]), typed.encode(), "AES-256")
    assert texts(data, password=typed) == [(1, "Raw key.")]


def test_saslprep_follows_rfc_4013() -> None:
    assert saslprep("I\u00adX") == "IX"  # the RFC's examples
    assert saslprep("user") == "user" and saslprep("USER") == "USER"
    assert saslprep("\u00aa") == "a" and saslprep("\u2168") == "IX"
    assert saslprep("a\u00a0b") == "a b"  # a non-ASCII space becomes a space
    for bad in ("\u0007", "a\ue000", "\u0627\u0031"):  # a control, a private-use character, mixed directions
        with pytest.raises(ValueError):
            saslprep(bad)
    assert password_candidates("pass\u00adword") == ["pass\u00adword", "password"]
    assert password_candidates("plain") == ["plain"] and password_candidates(None) == [None]
    assert password_candidates("bell\u0007") == ["bell\u0007"]  # prohibited: only as typed


# ------------------------------------------------------------------------------------- damaged files


def test_damaged_cross_reference_table_is_repaired() -> None:
    assert texts(text_pages_pdf([b"Text behind a broken xref."], xref=True)) == [(1, "Text behind a broken xref.")]
    assert texts(text_pages_pdf([b"Text behind a broken xref."], xref=False)) == [(1, "Text behind a broken xref.")]


def test_a_page_that_fails_to_load_does_not_lose_the_others() -> None:
    assert texts(text_pages_pdf([b"First page.", None, b"Third page."])) == [(1, "First page."), (3, "Third page.")]


# ---------------------------------------------------------------------------------- unusual pages


def test_rotated_and_huge_pages_give_their_text() -> None:
    rotated = one_page_pdf(b"BT /F1 12 Tf 72 720 Td (Turned on its side.) Tj ET", page=b"/Rotate 90 ")
    assert texts(rotated) == [(1, "Turned on its side.")]
    huge = one_page_pdf(
        b"BT /F1 400 Tf 1000 13000 Td (Poster title) Tj ET /F1 12 Tf BT 14000 100 Td (Far corner.) Tj ET",
        page=b"/MediaBox [0 0 14400 14400] ",  # the largest page PDF allows: 200 x 200 inches
    )
    assert texts(huge) == [(1, "Poster title\nFar corner.")]


def test_empty_and_image_only_pages_are_left_out_and_numbers_stay_true() -> None:
    from PIL import Image

    image = io.BytesIO()
    Image.new("L", (300, 200), 90).save(image, format="PNG")
    import fpdf

    pdf = fpdf.FPDF()
    pdf.set_font("helvetica", size=12)
    pdf.add_page()  # empty
    pdf.add_page()
    pdf.image(image, x=20, y=20, w=150)  # a scan: an image, no text
    pdf.add_page()
    pdf.cell(0, 10, "The only text.")
    assert texts(bytes(pdf.output())) == [(3, "The only text.")]
    scan = fpdf.FPDF()
    scan.add_page()
    scan.image(image, x=20, y=20, w=150)
    with pytest.raises(DocumentError) as info:
        parse_bytes(bytes(scan.output()), "scan.pdf")
    assert info.value.reason == "no_text" and "OCR" in str(info.value)


# ------------------------------------------------------------------------------- extractor choice


def test_vertical_japanese_that_pdfium_loses_is_read_by_pypdf(pages_read: dict[str, int]) -> None:
    import pypdfium2

    data = vertical_japanese_pdf("縦書きの日本語の文章です")
    page = pypdfium2.PdfDocument(data)[0]
    assert page.get_textpage().get_text_range() == ""  # PDFium reads nothing of it
    pages_read.update(pdfium=0, pypdf=0)
    assert texts(data) == [(1, "縦書きの日本語の文章です")]
    assert pages_read == {"pdfium": 1, "pypdf": 1}


def test_noisy_ocr_layer_that_pdfium_garbles_is_read_by_pypdf(pages_read: dict[str, int]) -> None:
    import pypdfium2

    letter = "这是一封扫描的中文信件，内容是关于合同的说明。"
    data = noisy_ocr_pdf(letter)
    garbage = pypdfium2.PdfDocument(data)[0].get_textpage().get_text_range()
    assert garbage.startswith("ABCDEFG")  # PDFium: the glyph ids as Latin letters
    pages_read.update(pdfium=0, pypdf=0)
    assert texts(data) == [(1, letter)]
    assert pages_read == {"pdfium": 1, "pypdf": 1}


def test_ordinary_pages_are_read_by_pdfium_alone(pages_read: dict[str, int]) -> None:
    import fpdf

    pages = [
        "Install packages with install.packages().",
        "x <- c(1, 2, 3); y <- x^2 + 1 # code: few letters, still text",
        "Café crème, naïve résumé: accents are letters too.",
        "~~~ ### ??? !!! ... a page of symbols is odd, and pypdf gives nothing better for it",
    ]
    pdf = fpdf.FPDF()
    pdf.set_font("helvetica", size=12)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 8, text)
    assert [t for _, t in texts(bytes(pdf.output()))] == pages
    assert pages_read == {"pdfium": len(pages), "pypdf": 0}
    chinese = "第一章 安装：使用 install.packages 安装软件包。"
    pages_read.update(pdfium=0)
    assert texts(noisy_ocr_pdf(chinese, honest=True)) == [(1, chinese)]  # a CID font with a sound map
    assert pages_read == {"pdfium": 1, "pypdf": 0}


def test_text_score_prefers_real_text_over_garbage() -> None:
    real = "这是一封扫描的中文信件，内容是关于合同的说明。"
    assert text_score(real) > text_score("ABCDEFGHIJKLMNOPQRSTUVW", unmapped=1.0) == 0
    assert text_score("Plain English words here.") > text_score("\ue000\ue001\ue002 \ufffd\ufffd ÿþ ¤¥ ~^ @@")
    assert text_score("") == 0 and text_score("   \n ") == 0

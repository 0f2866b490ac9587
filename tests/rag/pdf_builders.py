"""PDFs built object by object, for the cases a layout library will not make: lying page trees, odd fonts,
broken cross-reference tables, rotated and huge pages."""

from __future__ import annotations

FONT_DESCRIPTOR = (
    b"<< /Type /FontDescriptor /FontName /Font /Flags 4 /FontBBox [0 -141 1000 859] /ItalicAngle 0 /Ascent 859 "
    b"/Descent -141 /CapHeight 700 /StemV 80 >>"
)
HELVETICA = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def raw_pdf(objects: list[bytes], *, xref: bool = True) -> bytes:
    """A PDF of the given object bodies (object n is objects[n - 1]; 1 must be the catalog).

    `xref=False` writes a cross-reference table whose offsets are all wrong, as a damaged file has."""
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out) if xref else 9 + 7 * n)
        out += b"%d 0 obj\n%s\nendobj\n" % (n, body)
    start = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, start if xref else 3)
    return bytes(out)


def stream(data: bytes) -> bytes:
    return b"<< /Length %d >>\nstream\n%s\nendstream" % (len(data), data)


def text_stream(text: bytes) -> bytes:
    return stream(b"BT /F1 12 Tf 72 720 Td (" + text + b") Tj ET")


def text_pages_pdf(texts: list[bytes | None], *, count: int | None = None, xref: bool = True) -> bytes:
    """A PDF with a page per text in Helvetica (None: a kid of the page tree that is not a page at all);
    `count` overrides the page tree's /Count."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"", HELVETICA]
    kids = []
    for text in texts:
        kids.append(b"%d 0 R" % (len(objects) + 1))
        if text is None:
            objects.append(b"(not a page at all)")
            continue
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
                       b"/Resources << /Font << /F1 3 0 R >> >> >>" % (len(objects) + 2))  # fmt: skip
        objects.append(text_stream(text))
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(kids), len(texts) if count is None else count)
    return raw_pdf(objects, xref=xref)


def one_page_pdf(content: bytes, font: bytes = HELVETICA, extra: tuple[bytes, ...] = (), page: bytes = b"") -> bytes:
    """One page drawing `content` with font /F1 (object 5); `extra` objects follow as 6, 7, ...; `page` adds keys."""
    return raw_pdf([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> " + page + b">>",
        stream(content),
        font,
        *extra,
    ])  # fmt: skip


def vertical_japanese_pdf(text: str) -> bytes:
    """Vertical Japanese in a non-embedded CID font with the predefined Shift-JIS CMap 90ms-RKSJ-V and no
    ToUnicode: PDFium gives no text for it, pypdf decodes the Shift-JIS codes."""
    font = b"<< /Type /Font /Subtype /Type0 /BaseFont /MS-Mincho /Encoding /90ms-RKSJ-V /DescendantFonts [6 0 R] >>"
    cid = (
        b"<< /Type /Font /Subtype /CIDFontType0 /BaseFont /MS-Mincho /CIDSystemInfo << /Registry (Adobe) "
        b"/Ordering (Japan1) /Supplement 2 >> /FontDescriptor 7 0 R /WMode 1 >>"
    )
    codes = text.encode("cp932").hex().encode()
    return one_page_pdf(b"BT /F1 12 Tf 300 720 Td <" + codes + b"> Tj ET", font, (cid, FONT_DESCRIPTOR))


def noisy_ocr_pdf(text: str, *, honest: bool = False) -> bytes:
    """An invisible OCR text layer (render mode 3) in an Identity-H font whose ToUnicode CMap declares the wrong
    number of entries, as some OCR tools write it: PDFium drops the map and gives the glyph ids as Latin
    letters ("ABCD..."), pypdf reads the map and gives the Chinese text. `honest=True`: the right count."""
    codes = [0x41 + i for i in range(len(text))]
    entries = b"\n".join(
        b"<%04X> <%s>" % (c, ch.encode("utf-16-be").hex().encode()) for c, ch in zip(codes, text, strict=True)
    )
    count = b"%d" % len(codes) if honest else b"2"
    cmap = (
        b"begincmap 1 begincodespacerange <0000> <FFFF> endcodespacerange "
        + count
        + b" beginbfchar\n%s\nendbfchar endcmap"
    )
    font = b"<< /Type /Font /Subtype /Type0 /BaseFont /OCR /Encoding /Identity-H /DescendantFonts [6 0 R] /ToUnicode 8 0 R >>"
    cid = (
        b"<< /Type /Font /Subtype /CIDFontType2 /BaseFont /OCR /CIDSystemInfo << /Registry (Adobe) "
        b"/Ordering (Identity) /Supplement 0 >> /FontDescriptor 7 0 R >>"
    )
    content = b"BT /F1 12 Tf 3 Tr 72 720 Td <" + b"".join(b"%04X" % c for c in codes) + b"> Tj ET"
    return one_page_pdf(content, font, (cid, FONT_DESCRIPTOR, stream(cmap % entries)))

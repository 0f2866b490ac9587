"""Small real documents for tests: a text PDF of given pages (fpdf2), a PDF of vertical CJK text (by hand)."""

from __future__ import annotations

from pathlib import Path


def make_pdf(pages: list[str], path: Path) -> None:
    """A PDF with one page per text (Helvetica 12)."""
    import fpdf

    pdf = fpdf.FPDF()
    pdf.set_font("helvetica", size=12)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 8, text)
    pdf.output(str(path))


def make_vertical_cjk_pdf(pages: list[str], path: Path, column: int = 24) -> None:
    """A PDF of Japanese (or Chinese) text set vertically, as such books and forms are: one page per text, in
    columns of `column` characters from right to left, in a Type0 font with the vertical Identity-V encoding and a
    ToUnicode map, the font itself not embedded (as in many office-made PDFs). Written by hand: fpdf2 sets no
    vertical text, and no CJK font need be installed."""
    chars = sorted({c for text in pages for c in text})
    tounicode = "\n".join(
        ["/CIDInit /ProcSet findresource begin", "12 dict begin", "begincmap", "/CMapName /Vertical def",
         "1 begincodespacerange <0000> <FFFF> endcodespacerange", f"{len(chars)} beginbfchar",
         *(f"<{ord(c):04X}> <{ord(c):04X}>" for c in chars),
         "endbfchar", "endcmap", "CMapName currentdict /CMap defineresource pop", "end", "end"]
    ).encode()  # fmt: skip
    n = len(pages)
    font, descendant, descriptor, cmap = 3 + 2 * n, 4 + 2 * n, 5 + 2 * n, 6 + 2 * n
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % (3 + 2 * i) for i in range(n)), n),
    ]
    for i, text in enumerate(pages):
        ops = ["BT", "/F1 18 Tf"]
        for k in range(0, len(text), column):
            ops += [f"1 0 0 1 {540 - (k // column) * 24} 800 Tm"]
            ops += ["<" + "".join(f"{ord(c):04X}" for c in text[k : k + column]) + "> Tj"]
        content = "\n".join([*ops, "ET"]).encode()
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 %d 0 R >> >> "
            b"/Contents %d 0 R >>" % (font, 4 + 2 * i)
        )
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content))
    objects += [
        b"<< /Type /Font /Subtype /Type0 /BaseFont /KozMinPr6N-Regular /Encoding /Identity-V "
        b"/DescendantFonts [%d 0 R] /ToUnicode %d 0 R >>" % (descendant, cmap),
        b"<< /Type /Font /Subtype /CIDFontType0 /BaseFont /KozMinPr6N-Regular /CIDSystemInfo << /Registry (Adobe) "
        b"/Ordering (Identity) /Supplement 0 >> /FontDescriptor %d 0 R /DW 1000 /DW2 [880 -1000] >>" % descriptor,
        b"<< /Type /FontDescriptor /FontName /KozMinPr6N-Regular /Flags 4 /FontBBox [0 -200 1000 900] "
        b"/ItalicAngle 0 /Ascent 880 /Descent -120 /CapHeight 700 /StemV 80 >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(tounicode), tounicode),
    ]
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    path.write_bytes(bytes(out))

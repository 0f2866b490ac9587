"""Small real documents for tests: a text PDF of given pages (fpdf2)."""

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

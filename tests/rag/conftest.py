"""Fixtures of the RAG tests: `pages_read` counts the PDF pages each library really reads."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def pages_read(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """How many pages PDFium loaded and pypdf extracted, counted at the libraries' own entry points."""
    import pypdf
    import pypdfium2

    counts = {"pdfium": 0, "pypdf": 0}
    load, extract = pypdfium2.PdfDocument.get_page, pypdf.PageObject.extract_text

    def counted_load(self: object, index: int) -> object:
        counts["pdfium"] += 1
        return load(self, index)

    def counted_extract(self: object, *args: object, **kwargs: object) -> str:
        counts["pypdf"] += 1
        return extract(self, *args, **kwargs)

    monkeypatch.setattr(pypdfium2.PdfDocument, "get_page", counted_load)
    monkeypatch.setattr(pypdfium2.PdfDocument, "__getitem__", counted_load)
    monkeypatch.setattr(pypdf.PageObject, "extract_text", counted_extract)
    yield counts

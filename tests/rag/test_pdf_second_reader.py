"""A PDF page whose PDFium text is missing or implausible is read again with pypdf, and the page's progress says so.

The document: 30 pages of Japanese set vertically (tests/support/documents.make_vertical_cjk_pdf), as books and
forms are, in a font the file does not embed: PDFium gives no text for such a page, pypdf reads it through the
font's ToUnicode map.
"""

from __future__ import annotations

from pathlib import Path

from chatagent.rag import DocStore, Progress
from tests.support.documents import make_pdf, make_vertical_cjk_pdf

SENTENCES = [
    "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。",
    "何でも薄暗いじめじめした所でニャーニャー泣いていた事だけは記憶している。",
    "吾輩はここで始めて人間というものを見た。しかもあとで聞くとそれは書生という人間中で一番獰悪な種族であったそうだ。",
]


def test_vertical_japanese_pages_are_read_again_with_pypdf_and_the_progress_says_so(tmp_path: Path) -> None:
    pages = [f"第{i}章。" + "".join(SENTENCES[(i + k) % 3] for k in range(6)) for i in range(1, 31)]
    vertical = tmp_path / "tategaki.pdf"
    make_vertical_cjk_pdf(pages, vertical)
    plain = tmp_path / "plain.pdf"
    make_pdf(["An ordinary page of English text, which PDFium reads well."] * 3, plain)
    seen: list[Progress] = []
    store = DocStore(tmp_path / "store", disk_cache=False)
    index, errors = store.load([str(vertical), str(plain)], on_progress=seen.append)
    assert errors == []
    read = [p for p in seen if p.stage == "read"]
    again = [p for p in read if p.source == "tategaki.pdf"]
    assert [p.done for p in again] == list(range(1, 31)) and {p.reader for p in again} == {"pypdf"}
    assert "page 7 of 30 (read again with pypdf" in again[6].describe()
    assert {p.reader for p in read if p.source == "plain.pdf"} == {""}
    text = index.select("名前はまだ無い", 2000).as_text()
    assert "吾輩は猫である" in text

"""Qwen-Agent's shapes of a parsed document, made from chatagent's Document (`chatagent.rag`).

- pages, as `simple_doc_parser` gives them with `structured_doc`: `[{'page_num': 1, 'content': [{'text': ...,
  'token': 12}, {'table': '|a|b|', 'token': 5}], 'title': ...}, ...]`, and as plain text (`plain_text`);
- a Record, as `doc_parser` gives it: `{'url', 'title', 'raw': [{'content', 'token', 'metadata': {'source',
  'title', 'chunk_id'}}]}`; the whole document is one chunk when it fits `max_ref_token`, else chunks of about
  `parser_page_size` tokens (chatagent's chunker), each opening with `[page: N]`.

The search tools (`chatagent.tools.search_tools`) take Records, or their dicts, as `docs=`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from chatagent.rag.chunking import chunk_document
from chatagent.rag.document import Document, Page
from chatagent.utils.tokens import count_tokens

__all__ = ["Chunk", "Record", "make_record", "plain_text", "record_from_texts", "structured_pages"]

DEFAULT_MAX_REF_TOKEN = 20000  # Qwen-Agent's
DEFAULT_PARSER_PAGE_SIZE = 500  # Qwen-Agent's
PARAGRAPH_SPLIT_SYMBOL = "\n"
_PARAGRAPHS = re.compile(r"\n\s*\n")


@dataclass
class Chunk:
    """One chunk of a Record: its text, its token count and `metadata` ({'source', 'title', 'chunk_id'})."""

    content: str
    metadata: dict[str, Any]
    token: int

    def to_dict(self) -> dict[str, Any]:
        return {"content": self.content, "metadata": self.metadata, "token": self.token}


@dataclass
class Record:
    """A parsed, chunked document: `Record(**doc_parser_result)` rebuilds one from its dict."""

    url: str
    raw: list[Chunk] = field(default_factory=list[Chunk])
    title: str = ""

    def __post_init__(self) -> None:
        given: list[Any] = list(self.raw)  # Chunks, or their dicts (a doc_parser result)
        self.raw = [c if isinstance(c, Chunk) else Chunk(**c) for c in given]

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "raw": [c.to_dict() for c in self.raw], "title": self.title}


def structured_pages(doc: Document) -> list[dict[str, Any]]:
    """The document's pages in Qwen-Agent's structured form: paragraphs as `text`, markdown tables as `table`."""
    pages: list[dict[str, Any]] = []
    for page in doc.pages:
        content: list[dict[str, Any]] = []
        for para in _PARAGRAPHS.split(page.text):
            para = para.strip()
            if para:
                kind = "table" if all(line.lstrip().startswith("|") for line in para.splitlines()) else "text"
                content.append({kind: para, "token": count_tokens(para)})
        pages.append({"page_num": page.number, "content": content})
    if pages:
        pages[0]["title"] = doc.source
    return pages


def plain_text(pages: list[dict[str, Any]]) -> str:
    """Structured pages as one text: their paragraphs and tables, one a line."""
    return PARAGRAPH_SPLIT_SYMBOL.join(
        str(v) for page in pages for para in page["content"] for k, v in para.items() if k in ("text", "table", "image")
    )


def make_record(
    doc: Document,
    url: str,
    max_ref_token: int = DEFAULT_MAX_REF_TOKEN,
    parser_page_size: int = DEFAULT_PARSER_PAGE_SIZE,
) -> Record:
    """A Record of `doc` (read from `url`): one chunk when it fits `max_ref_token`, else `parser_page_size` chunks."""
    title = doc.source
    pages = structured_pages(doc)
    total = sum(para["token"] for page in pages for para in page["content"])
    if total <= max_ref_token:
        whole = Chunk(plain_text(pages), {"source": url, "title": title, "chunk_id": 0}, total)
        return Record(url, [whole] if pages else [], title)
    raw: list[Chunk] = []
    for n, chunk in enumerate(
        chunk_document(doc, chunk_tokens=parser_page_size, overlap_tokens=parser_page_size // 10)
    ):
        text = f"[page: {chunk.page}]{PARAGRAPH_SPLIT_SYMBOL}{chunk.text}"
        raw.append(Chunk(text, {"source": url, "title": title, "chunk_id": n}, count_tokens(text)))
    return Record(url, raw, title)


def record_from_texts(pages: list[str], url: str, parser_page_size: int = DEFAULT_PARSER_PAGE_SIZE) -> Record:
    """A Record of texts given directly (one page each), as the search tools accept them in `docs=`."""
    doc = Document(source=url, kind="txt", pages=[Page(n, text) for n, text in enumerate(pages, 1)])
    record = make_record(doc, url, 0, parser_page_size)
    record.title = ""
    return record

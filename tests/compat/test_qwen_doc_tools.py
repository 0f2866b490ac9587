"""Qwen-Agent's document tools called directly, with Qwen-Agent's parameters and result shapes."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatagent.tools import (
    DocParser,
    FrontPageSearch,
    HybridSearch,
    KeywordSearch,
    Retrieval,
    SimpleDocParser,
    Storage,
    VectorSearch,
)
from chatagent.tools.doc_records import Record
from chatagent.tools.search_tools import as_records
from chatagent.tools.storage import KeyNotExistsError
from tests.support.file_server import FileServer
from tests.support.openai_server import OpenAIServer

VAULT = "The secret code of the vault is 4242"


def test_simple_doc_parser_gives_the_text_or_the_pages(resources: Path) -> None:
    text = SimpleDocParser().call({"url": str(resources / "report.pdf")})
    assert isinstance(text, str) and VAULT in text and "Section 12." in text
    pages = SimpleDocParser({"structured_doc": True}).call({"url": str(resources / "report.pdf")})
    assert isinstance(pages, list) and [p["page_num"] for p in pages] == list(range(1, 13))
    assert pages[0]["title"] == "report.pdf"
    para = pages[8]["content"][0]
    assert VAULT in para["text"] and para["token"] > 100


def test_simple_doc_parser_reads_a_csv_as_a_table_and_a_url(resources: Path) -> None:
    pages = SimpleDocParser({"structured_doc": True}).call(f'{{"url": "{resources / "stock_prices.csv"}"}}')
    assert isinstance(pages, list) and "table" in pages[0]["content"][0]
    with FileServer(resources) as server:
        text = SimpleDocParser().call({"url": server.url("doc.pdf")})
    assert "ImageOps.mirror(image)" in text


def test_doc_parser_returns_a_record_whole_or_in_chunks(resources: Path) -> None:
    whole = DocParser().call({"url": str(resources / "report.pdf")})
    assert isinstance(whole, dict) and set(whole) == {"url", "title", "raw"}
    assert len(whole["raw"]) == 1 and VAULT in whole["raw"][0]["content"]
    assert whole["raw"][0]["metadata"] == {
        "source": str(resources / "report.pdf"),
        "title": "report.pdf",
        "chunk_id": 0,
    }
    chunked = DocParser({"max_ref_token": 1000, "parser_page_size": 300}).call({"url": str(resources / "report.pdf")})
    assert isinstance(chunked, dict) and len(chunked["raw"]) > 12
    assert all(c["token"] <= 340 and c["content"].startswith("[page: ") for c in chunked["raw"])
    assert [c["metadata"]["chunk_id"] for c in chunked["raw"]] == list(range(len(chunked["raw"])))
    record = Record(**chunked)
    assert record.raw[0].content == chunked["raw"][0]["content"]


def test_doc_parser_raises_for_an_unreadable_file(tmp_path: Path) -> None:
    from chatagent.tools.simple_doc_parser import DocParserError

    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4 not really")
    with pytest.raises(DocParserError) as caught:
        DocParser().call({"url": str(broken)})
    assert caught.value.code == "broken"


def test_retrieval_called_directly_answers_as_qwen_agent(resources: Path) -> None:
    found = Retrieval({"max_ref_token": 600, "parser_page_size": 200}).call(
        {"query": "secret code vault", "files": [str(resources / "report.pdf"), str(resources / "doc.pdf")]}
    )
    assert isinstance(found, list) and found and all(set(f) == {"url", "text"} for f in found)
    texts = [t for f in found for t in f["text"]]
    assert any("4242" in t for t in texts)
    whole = Retrieval().call({"query": "flip", "files": [str(resources / "doc.pdf")]})
    assert isinstance(whole, list) and "ImageOps.flip(image)" in whole[0]["text"][0]
    assert Retrieval().call({"query": "anything", "files": []}) == []


def test_retrieval_picks_its_searchers(resources: Path) -> None:
    files = [str(resources / "report.pdf")]
    cfg = {"max_ref_token": 1000, "parser_page_size": 200}
    front = Retrieval({**cfg, "rag_searchers": ["front_page_search"]}).call({"query": "vault code", "files": files})
    assert isinstance(front, list) and "Section 1." in front[0]["text"][0]
    assert not any("4242" in t for t in front[0]["text"])
    keyword = Retrieval({**cfg, "rag_searchers": ["keyword_search"]}).call({"query": "vault code", "files": files})
    assert isinstance(keyword, list) and any("4242" in t for t in keyword[0]["text"])
    assert not any("4242" in t for t in front[0]["text"])


def test_the_searchers_take_records_dicts_and_texts() -> None:
    pages = [f"Page {i}. " + "Nothing of note happens in this part of the story. " * 15 for i in range(8)]
    pages[5] += "The lighthouse keeper was called Tomas Berg."
    found = KeywordSearch({"max_ref_token": 300}).call({"query": "lighthouse keeper name"}, docs=[pages])
    assert found[0]["url"] == "doc_0" and any("Tomas Berg" in t for t in found[0]["text"])
    front = FrontPageSearch({"max_ref_token": 700}).call({"query": "lighthouse"}, docs=[pages])
    assert front[0]["text"][0].startswith("[page: 1]")
    hybrid = HybridSearch({"max_ref_token": 2000}).call({"query": "lighthouse keeper"}, docs=[pages])
    texts = hybrid[0]["text"]
    assert texts[0].startswith("[page: 1]") and any("Tomas Berg" in t for t in texts)
    assert KeywordSearch().call({"query": "x"}, docs=[]) == []
    assert KeywordSearch().call({"query": "keeper"}, docs=["short text"]) == [
        {"url": "doc_0", "text": ["[page: 1]\nshort text"]}
    ]
    unmatched = KeywordSearch({"max_ref_token": 300}).call({"query": "zebra"}, docs=[pages])
    assert unmatched[0]["text"][0].startswith("[page: 1]")  # nothing matches: the front part
    keywords = '{"keywords_en": ["lighthouse"], "text": "who kept it"}'
    assert any(
        "Tomas Berg" in t
        for t in KeywordSearch({"max_ref_token": 300}).call({"query": keywords}, docs=[pages])[0]["text"]
    )


def test_vector_search_ranks_by_an_embedder(openai_server: OpenAIServer) -> None:
    from chatagent.rag.embedders import OpenAIEmbedder

    pages = ["Bananas are yellow fruit. " * 30, "Submarines dive under the sea. " * 30, "Kittens purr softly. " * 30]
    embedder = OpenAIEmbedder(openai_server.base_url, "toy")
    search = VectorSearch({"max_ref_token": 300, "embedder": embedder})
    found = search.call({"query": "submarines dive"}, docs=[pages])
    assert any("Submarines" in t for t in found[0]["text"]) and len(found[0]["text"]) < 3
    assert search.sort_by_scores("submarines dive", as_records([pages]))[0][:2] == ("doc_0", 1)
    assert any(r.path.endswith("/embeddings") for r in openai_server.requests)


def test_vector_search_without_an_embedder_says_what_to_install() -> None:
    with pytest.raises(ImportError, match=r"chatagent\[embed\]"):
        VectorSearch({"max_ref_token": 10}).call({"query": "q"}, docs=[["a long text " * 50]])


def test_storage_puts_gets_scans_and_deletes(tmp_path: Path) -> None:
    db = Storage({"storage_root_path": str(tmp_path / "db")})
    assert db.call({"operate": "put", "key": "/trips/paris", "value": "Louvre"}) == "Successfully saved trips/paris."
    db.put("trips/rome", "Colosseum")
    assert db.call('{"operate": "get", "key": "/trips/paris"}') == "Louvre"
    assert db.call({"operate": "scan", "key": "/trips"}) == "/paris: Louvre\n/rome: Colosseum"
    assert db.call({"operate": "delete", "key": "trips/rome"}) == "Successfully deleted trips/rome"
    with pytest.raises(KeyNotExistsError):
        db.get("trips/rome")
    with pytest.raises(ValueError, match="leaves the storage directory"):
        db.call({"operate": "put", "key": "../../escaped", "value": "x"})
    assert not (tmp_path / "escaped").exists()

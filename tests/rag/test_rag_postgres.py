"""The PostgreSQL retrieval backend against a real server (started by the `postgres` fixture): keywords by
PostgreSQL's full-text search over our analyser's terms (English stems, Chinese bigrams), vectors stored in the
database (pgvector's column when the extension is installed, else real[]), both sides fused."""

from __future__ import annotations

import pytest

from chatagent.rag.backends import PostgresBackend, RetrievalBackend
from chatagent.rag.embedders import OpenAIEmbedder
from chatagent.rag.index import Index

pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")

TEXTS = {
    "brakes": "Brake pads wear down with every stop; replace both pads on the axle.",
    "tyres": "Check tyre pressure monthly: soft tyres raise fuel consumption.",
    "panda": "大熊猫主要以竹子为食，每天要吃十几公斤。",
    "bread": "Bake the loaf at 230 degrees with steam for twenty minutes.",
}


def test_keywords_in_english_and_chinese(postgres) -> None:
    corpus = PostgresBackend(postgres.new_store_url(), table="manual", embedder=None)
    try:
        corpus.add_texts(list(TEXTS), list(TEXTS.values()), ["Brakes", "Tyres", None, "Baking"])
        assert isinstance(corpus, RetrievalBackend) and isinstance(Index(embedder=None), RetrievalBackend)
        assert len(corpus) == 4
        assert corpus.search("replacing the brake pad")[0][0] == "brakes"  # stems: replacing ~ replace, pad ~ pads
        assert corpus.search("熊猫吃什么")[0][0] == "panda"
        assert corpus.search("it's a \\ 'quoted' query") == []  # quotes and backslashes are only text
        corpus.add_texts(["bread"], ["Bread keeps best in a paper bag."])  # replaces
        assert corpus.search("paper bag")[0][0] == "bread" and len(corpus) == 4
        assert corpus.delete(["bread", "nothing"]) == 1 and corpus.search("paper bag") == []
    finally:
        corpus.close()


def test_vectors_in_the_database_join_the_search(postgres, openai_server) -> None:
    embedder = OpenAIEmbedder(openai_server.base_url, "toy", api_key="k")
    url = postgres.new_store_url()
    corpus = PostgresBackend(url, table="manual", embedder=embedder)
    try:
        corpus.add_texts(list(TEXTS), list(TEXTS.values()))
        hits = corpus.search("tyre pressure", top_k=2)
        assert hits[0][0] == "tyres" and len(hits) == 2
        column = corpus._conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'manual'::regclass "
            "AND attname = 'embedding'"
        ).fetchone()[0]
        assert column == ("vector" if corpus.pgvector else "real[]")
        stored = corpus._conn.execute("SELECT count(*) FROM manual WHERE embedding IS NOT NULL").fetchone()[0]
        assert stored == 4
        again = PostgresBackend(url, table="manual", embedder=embedder)  # another client: nothing embedded again
        before = len(openai_server.requests)
        assert again.search("fuel consumption", top_k=1)[0][0] == "tyres"
        assert len(openai_server.requests) == before + 1  # the query only
        again.close()
    finally:
        corpus.close()

"""The PostgreSQL retrieval backend against real servers started by the fixtures: keywords by PostgreSQL's
full-text search over our analyser's terms (English stems, Chinese bigrams), vectors stored in the database
(pgvector's column when the extension is installed, else real[]), both sides fused. Each test runs on Debian's
PostgreSQL (no pgvector in bookworm: real[]) and on the PostgreSQL 16 with pgvector that the pgserver wheel bundles
(tests/support/postgres.py), so that both vector paths run."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from chatagent.rag.backends import MAX_EF_SEARCH, PostgresBackend, RetrievalBackend, RetrievalBackendError
from chatagent.rag.embedders import OpenAIEmbedder
from chatagent.rag.index import Index
from tests.support.embeddings import toy_vector
from tests.support.openai_server import OpenAIServer
from tests.support.postgres import PostgresCluster, pgvector_bin_dir, unavailable
from tests.support.tcp_relay import TcpRelay
from tests.support.threads import raised_within

pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")

TEXTS = {
    "brakes": "Brake pads wear down with every stop; replace both pads on the axle.",
    "tyres": "Check tyre pressure monthly: soft tyres raise fuel consumption.",
    "panda": "大熊猫主要以竹子为食，每天要吃十几公斤。",
    "bread": "Bake the loaf at 230 degrees with steam for twenty minutes.",
}


@pytest.fixture(scope="module")
def postgres_pgvector() -> Iterator[PostgresCluster]:
    """A throwaway PostgreSQL with pgvector (the pgserver wheel's programs) for this module's tests."""
    bin_dir = pgvector_bin_dir()
    if bin_dir is None:
        pytest.skip("no PostgreSQL with pgvector here: the pgserver wheel (the dev extra) is not installed")
    reason = unavailable(bin_dir)
    if reason:
        pytest.skip(reason)
    with PostgresCluster(bin_dir=bin_dir).start() as cluster:
        # in a schema of its own, off every store's search_path (as hosted PostgreSQL services install it)
        cluster.admin("CREATE SCHEMA extensions")
        cluster.admin("CREATE EXTENSION vector SCHEMA extensions")
        yield cluster


@pytest.fixture(params=["debian", "pgvector"])
def server(request: pytest.FixtureRequest) -> PostgresCluster:
    """Each test on both servers: Debian's (`postgres`, session-wide) and the one with pgvector."""
    return request.getfixturevalue("postgres" if request.param == "debian" else "postgres_pgvector")


def test_keywords_in_english_and_chinese(server: PostgresCluster) -> None:
    corpus = PostgresBackend(server.new_store_url(), table="manual", embedder=None)
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


def test_vectors_in_the_database_join_the_search(
    server: PostgresCluster, openai_server: OpenAIServer, request: pytest.FixtureRequest
) -> None:
    embedder = OpenAIEmbedder(openai_server.base_url, "toy", api_key="k")
    url = server.new_store_url()
    corpus = PostgresBackend(url, table="manual", embedder=embedder)
    try:
        assert corpus.pgvector or request.node.callspec.params["server"] == "debian"  # the pgvector path ran
        corpus.add_texts(list(TEXTS), list(TEXTS.values()))
        hits = corpus.search("tyre pressure", top_k=2)
        assert hits[0][0] == "tyres" and len(hits) == 2
        column = corpus._conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'manual'::regclass "
            "AND attname = 'embedding'"
        ).fetchone()[0]
        assert column == ("extensions.vector" if corpus.pgvector else "real[]")
        stored = corpus._conn.execute("SELECT count(*) FROM manual WHERE embedding IS NOT NULL").fetchone()[0]
        assert stored == 4
        again = PostgresBackend(url, table="manual", embedder=embedder)  # another client: nothing embedded again
        before = len(openai_server.requests)
        assert again.search("fuel consumption", top_k=1)[0][0] == "tyres"
        asked = [r.json["input"] for r in openai_server.requests[before:]]
        assert asked in ([], [["fuel consumption"]])  # the query at most (its vector may be remembered): no passage
        again.close()
    finally:
        corpus.close()


def test_pgvector_searches_through_an_hnsw_index(
    postgres_pgvector: PostgresCluster, openai_server: OpenAIServer
) -> None:
    """The meaning side goes through pgvector's HNSW index (made as the vectors come) and finds what comparing
    every row finds; asked for more candidates than the index can give, every row is compared."""
    embedder = OpenAIEmbedder(openai_server.base_url, "toy", api_key="k")
    corpus = PostgresBackend(postgres_pgvector.new_store_url(), table="shelf", embedder=embedder)
    try:
        topics = [
            "brake pads",
            "tyre pressure",
            "engine oil",
            "sourdough starter",
            "password rules",
            "tomato seedlings",
        ]
        texts = [f"Note {i}: {topics[i % 6]} checked on day {i}, batch {i * 7 % 13}." for i in range(300)]
        corpus.add_texts([f"n{i}" for i in range(300)], texts)
        (definition,) = corpus._conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE tablename = 'shelf' AND indexname = 'shelf_embedding'"
        ).fetchone()
        assert "USING hnsw" in definition and "vector_cosine_ops" in definition
        corpus._conn.execute("SET enable_seqscan = off")  # 300 rows: the planner would rather read them all
        query = "sourdough starter on day 45"
        v = corpus._vector_param(np.asarray(toy_vector(query)))
        plan = corpus._conn.execute("EXPLAIN " + corpus._hybrid_sql(10), {"q": "'x'", "v": v, "n": 10}).fetchall()
        assert any("shelf_embedding" in row[0] for row in plan), plan
        through_index = [i for i, _ in corpus.search(query, top_k=10)]
        every_row = [i for i, _ in corpus.search(query, top_k=MAX_EF_SEARCH + 1)][:10]
        assert through_index[0] == every_row[0] == "n45"
        assert len(set(through_index) & set(every_row)) >= 8  # approximate, but not on 300 vectors at ef_search 100
    finally:
        corpus.close()


def test_a_lost_or_silent_server_fails_one_search_clearly_and_the_next_connects_again(
    server: PostgresCluster, openai_server: OpenAIServer
) -> None:
    """A server restart (every client's connection ended) fails the search in progress with RetrievalBackendError,
    naming the server without its password; the next search connects again, its session settings made anew
    (pgvector's ef_search). A server that keeps the connection open and answers nothing fails a search after the
    URL's answer_timeout, and the next one (once it answers) works. Before, every later search failed for ever."""
    embedder = OpenAIEmbedder(openai_server.base_url, "toy", api_key="k")
    password = "pw-backend-4e1"
    url = server.new_store_url().replace("postgres@", f"postgres:{password}@")
    with TcpRelay(server.port).start() as relay:
        relayed = url.replace(f":{server.port}/", f":{relay.port}/") + "&answer_timeout=2"
        corpus = PostgresBackend(relayed, table="manual", embedder=embedder)
        try:
            corpus.add_texts(list(TEXTS), list(TEXTS.values()))
            assert corpus.search("tyre pressure", top_k=1)[0][0] == "tyres"
            assert server.terminate_clients() >= 1
            with pytest.raises(RetrievalBackendError, match="lost the connection to PostgreSQL") as lost:
                corpus.search("tyre pressure", top_k=1)
            assert password not in str(lost.value)
            assert corpus.search("tyre pressure", top_k=1)[0][0] == "tyres"  # connected again
            relay.freeze()
            try:
                silent = raised_within(lambda: corpus.search("brake pads", top_k=1))
            finally:
                relay.thaw()
            assert isinstance(silent, RetrievalBackendError) and "gave no answer in 2 s" in str(silent), silent
            assert password not in str(silent)
            assert corpus.search("brake pads", top_k=1)[0][0] == "brakes"
        finally:
            corpus.close()

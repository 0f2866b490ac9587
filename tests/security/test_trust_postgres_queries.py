"""The PostgreSQL retrieval backend against questions and documents a client controls (issue 36, item 18), on a
real PostgreSQL started by the fixture. Before the fix a question with no term (`???`, an emoji, a NUL) raised
PostgreSQL's tsquery syntax error, and one NUL byte in one document dropped the whole indexing batch. Now a question
with no term finds nothing, NULs are taken out, and a document PostgreSQL refuses is reported alone, the rest of its
batch stored."""

from __future__ import annotations

import pytest

from chatagent.rag.backends import IndexingError, PostgresBackend
from tests.support.postgres import PostgresCluster

pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")

pytestmark = pytest.mark.timeout(180)

TEXTS = {
    "brakes": "Brake pads wear down with every stop; replace both pads on the axle.",
    "tyres": "Check tyre pressure monthly: soft tyres raise fuel consumption.",
}


@pytest.mark.parametrize("question", ["???", "\U0001f6a8\U0001f6a8", "\x00", "", "   ", "'", "\\", "' | !"])
def test_a_question_with_no_term_finds_nothing(postgres: PostgresCluster, question: str) -> None:
    corpus = PostgresBackend(postgres.new_store_url(), table="manual", embedder=None)
    try:
        corpus.add_texts(list(TEXTS), list(TEXTS.values()))
        assert corpus.search(question) == []
        assert corpus.search(f"brake pads{question}")[0][0] == "brakes"  # still a real query beside it
    finally:
        corpus.close()


def test_a_nul_byte_drops_nothing_and_a_refused_document_is_reported_alone(postgres: PostgresCluster) -> None:
    corpus = PostgresBackend(postgres.new_store_url(), table="manual", embedder=None)
    try:
        corpus.add_texts(["nul", *TEXTS], ["Tow\x00ing a car needs a rope.", *TEXTS.values()], ["A\x00B", None, None])
        assert len(corpus) == 3, "one NUL byte dropped the batch"
        assert corpus.search("towing")[0][0] == "nul"
        # a passage whose terms are more than a tsvector may hold (1 MB): refused by PostgreSQL, alone
        huge = " ".join(f"w{i:07d}" for i in range(130_000))
        with pytest.raises(IndexingError, match="huge") as raised:
            corpus.add_texts(["huge", "bread"], [huge, "Bake the loaf at 230 degrees with steam."])
        assert raised.value.failed == ["huge"]
        assert len(corpus) == 4 and corpus.search("loaf")[0][0] == "bread", "the good document of the batch was lost"
    finally:
        corpus.close()

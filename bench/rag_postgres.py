"""The PostgreSQL retrieval backend at scale: a hybrid search through pgvector's HNSW index, beside every row compared.

    .venv/bin/python bench/rag_postgres.py [--sizes 20000,50000] [--queries 40]

A throwaway PostgreSQL 16 with pgvector (the `pgserver` wheel of the dev extra; skipped, saying why, without it)
holds N passages: synthetic text (content words drawn from a Zipf law over 50,000 made-up words, its 200 most
frequent left out as a real analyser leaves out stopwords; 30-60 words per passage) and synthetic vectors of 384
dimensions (multilingual-e5-small's size): unit vectors near a 48-dimensional subspace, as sentence embeddings
are, rather than uniformly random ones, on which any nearest-neighbour index does badly. They stand in for an
embedder because embedding 100k passages takes hours on 2 cores; bench/rag_quality.py measures quality with real
vectors. The queries' vectors come from the same law, so the figures are the backend's own (no query embedding:
that is ~17 ms with the default embedder, bench/rag_hybrid.py).

Prints, per size: the time to store and index the passages, `PostgresBackend.search(q, top_k=10)` wall p50/p99
through the HNSW index, the same with the index dropped (every vector compared: what a corpus costs without
pgvector's index), and how many of the exact meaning side's 10 best the index finds (the approximation's price).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from _measure import show  # noqa: E402

DIM = 384


LATENT = 48


class SyntheticVectors:
    """An embedder of synthetic vectors (seeded): unit vectors near a LATENT-dimensional subspace of DIM."""

    name = "synthetic-384"

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.basis = np.random.default_rng(0).standard_normal((LATENT, DIM)).astype(np.float32)

    def _unit(self, n: int) -> np.ndarray:
        v = self.rng.standard_normal((n, LATENT)).astype(np.float32) @ self.basis
        v += 0.3 * self.rng.standard_normal((n, DIM)).astype(np.float32) * float(np.sqrt(LATENT / DIM))
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._unit(len(texts))

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._unit(len(texts))


def passages(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    syllables = ["ka", "lo", "mer", "tis", "an", "dru", "pe", "sol", "vin", "ra", "qu", "el", "bor", "ni", "ust"]
    vocab = ["".join(rng.choice(syllables, size=rng.integers(2, 4))) + str(i % 7) for i in range(50000)]
    ranks = rng.zipf(1.1, size=n * 200) - 1
    ranks = ranks[(ranks >= 200) & (ranks < len(vocab))]  # the most frequent words are stopwords: left out
    out, at = [], 0
    for length in rng.integers(30, 61, size=n):
        out.append(" ".join(vocab[r] for r in ranks[at : at + length]))
        at += length
    return out


def timed_searches(corpus, questions: list[str]) -> list[float]:
    out = []
    for q in questions:
        start = time.perf_counter()
        corpus.search(q, top_k=10)
        out.append((time.perf_counter() - start) * 1000)
    return out


def dense_top(corpus, vector: str, k: int = 10) -> list[str]:
    v = f"{corpus._vector}({DIM})"
    schema = corpus._vector.removesuffix(".vector")
    rows = corpus._conn.execute(
        f"SELECT id FROM {corpus.table} ORDER BY embedding::{v} OPERATOR({schema}.<=>) %s::{v} LIMIT {k}", (vector,)
    ).fetchall()
    return [r[0] for r in rows]


def run(cluster, n: int, queries: int) -> None:
    from chatagent.rag.backends import PostgresBackend

    texts = passages(n, seed=n)
    corpus = PostgresBackend(cluster.new_store_url(), table="bench", embedder=SyntheticVectors(seed=1))
    try:
        start = time.perf_counter()
        for at in range(0, n, 5000):
            corpus.add_texts([f"p{i}" for i in range(at, min(n, at + 5000))], texts[at : at + 5000])
        show(f"postgres {n} passages: stored, analysed and indexed (s)", f"{time.perf_counter() - start:.1f}")
        rng = np.random.default_rng(7)
        questions = [" ".join(rng.choice(texts[int(rng.integers(n))].split(), size=6)) for _ in range(queries)]
        hnsw = timed_searches(corpus, questions)
        probe = SyntheticVectors(seed=99).embed_queries(["q"] * 20)
        found = [dense_top(corpus, corpus._vector_param(v)) for v in probe]
        corpus._conn.execute("DROP INDEX bench_embedding")  # the backend keeps its sized expression: no index now
        exact = timed_searches(corpus, questions)
        truth = [dense_top(corpus, corpus._vector_param(v)) for v in probe]
        recall = statistics.mean(len(set(a) & set(b)) / 10 for a, b in zip(found, truth, strict=True))
        p = statistics.quantiles
        show(f"postgres {n} passages: search through the HNSW index, p50 / p99 (ms)",
             f"{statistics.median(hnsw):.1f} / {p(hnsw, n=100)[98]:.1f}")  # fmt: skip
        show(f"postgres {n} passages: search comparing every vector (no index), p50 / p99 (ms)",
             f"{statistics.median(exact):.1f} / {p(exact, n=100)[98]:.1f}   ratio {statistics.median(exact) / statistics.median(hnsw):.1f}x")  # fmt: skip
        show(f"postgres {n} passages: the index finds of the exact 10 nearest (recall@10)", f"{recall:.3f}")
    finally:
        corpus.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20000,50000")
    parser.add_argument("--queries", type=int, default=40)
    args = parser.parse_args()
    try:
        import psycopg  # noqa: F401
    except ModuleNotFoundError:
        show("postgres", "skipped: the [postgres] extra is not installed")
        return
    from tests.support.postgres import PostgresCluster, pgvector_bin_dir, unavailable

    bin_dir = pgvector_bin_dir()
    reason = "the pgserver wheel (dev extra) is not installed" if bin_dir is None else unavailable(bin_dir)
    if reason:
        show("postgres", f"skipped: {reason}")
        return
    with PostgresCluster(bin_dir=bin_dir).start() as cluster:
        cluster.admin("CREATE EXTENSION vector")
        for n in (int(s) for s in args.sizes.split(",")):
            run(cluster, n, args.queries)


if __name__ == "__main__":
    main()

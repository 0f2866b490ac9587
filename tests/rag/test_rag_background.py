"""The background embedding job: vectors from the cache at once, the rest embedded once (on the worker thread or a
caller's), a failure leaves retrieval on keywords, and the worker runs at the lowest priority. The embedder here is
a small real one (tests/support/embeddings.py: trigram hashing): this is about the job, not the model."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from chatagent.rag.background import EmbeddingJob
from chatagent.rag.index import Index
from chatagent.rag.vector_cache import VectorCache
from tests.support.embeddings import toy_vector


class Toy:
    name = "toy"

    def __init__(self, fail: bool = False) -> None:
        self.fail, self.embedded, self.threads = fail, 0, set()

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if self.fail:
            raise RuntimeError("the model is gone")
        self.embedded += len(texts)
        self.threads.add(threading.get_native_id())
        return np.array([toy_vector(t) for t in texts], dtype=np.float32)

    embed_queries = embed_passages


def test_cached_vectors_are_taken_and_the_rest_embedded_once(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path / "v.sqlite3")
    texts = [f"passage number {i}" for i in range(40)]
    first = Toy()
    job = EmbeddingJob(first, texts[:20], cache).start()
    assert job.wait(60) and first.embedded == 20
    second = Toy()
    job = EmbeddingJob(second, texts, cache)
    job.start()  # queued to the worker; this thread joins in: the job completes once, whoever gets there first
    job.run_now()
    assert job.wait(60) and job.error is None and job.vectors is not None
    assert 20 <= second.embedded <= 40
    assert np.allclose(job.vectors[5], toy_vector(texts[5]), atol=1e-3)  # float16 in the cache
    assert (tmp_path / "v.sqlite3").stat().st_mode & 0o777 == 0o600


def test_the_worker_runs_at_the_lowest_priority() -> None:
    toy = Toy()
    assert EmbeddingJob(toy, ["a lonely passage"]).start().wait(60)
    (tid,) = toy.threads
    assert os.getpriority(os.PRIO_PROCESS, tid) == 19


def test_a_failing_embedder_leaves_the_index_on_keywords() -> None:
    index = Index(embedder=Toy(fail=True))
    index.add_texts(["a", "b"], ["red apples", "blue sky"])
    assert not index.wait_for_vectors(60)
    assert "the model is gone" in (index.embedding_error or "")
    assert index.search("apples")[0][0] == "a" and not index.dense_ready

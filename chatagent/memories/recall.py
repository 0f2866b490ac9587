"""How recall ranks a user's records: meaning (hybrid keywords + vectors), recency and importance.

    score = meaning x relevance + recency x 0.5 ** (age_days / half_life_days) + importance x record.importance

Relevance is the hybrid score of `chatagent.rag.fusion` (BM25 and cosine, each standardised over the user's
records) scaled to [0, 1] over them; a record not embedded yet counts by its keywords alone. Only the
`shortlist` most relevant records are ranked by the full score, so recency and importance order what is
relevant and never bring up what is not. A text said many times (in a scope) is one candidate: its latest record.
CrewAI's composite (0.5 / 0.3 / 0.2) was the starting point; the weights here were chosen with bench/memory.py on
the development half of our multi-session set (more recency than this put older remarks above the evidence).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from chatagent.memories.records import MemoryMatch, MemoryRecord
from chatagent.rag.embedders import Embedder, cosines, query_vector
from chatagent.rag.fusion import fuse, standardised
from chatagent.rag.index import Index

__all__ = ["RecallWeights", "UserIndex"]

DAY = 86400.0


@dataclass(frozen=True, slots=True)
class RecallWeights:
    """The parts of a recall score (see the module docstring)."""

    meaning: float = 0.93
    recency: float = 0.02
    importance: float = 0.05
    half_life_days: float = 90.0
    shortlist: int = 20  # records ranked by the full score (at least 2 x k)


class UserIndex:
    """One user's records as recall searches them, built from one version of the store."""

    def __init__(
        self,
        version: int,
        rows: list[tuple[MemoryRecord, str | None, bytes | None]],
        embedder: Embedder | None,
        terms: dict[str, tuple[str, list[str]]] | None = None,
    ) -> None:
        self.version = version
        self.records = [r for r, _, _ in rows]
        self.embedder = embedder
        self.index = Index(embedder=None)
        known = terms or {}
        analysed = []
        for r in self.records:
            found = known.get(r.id)
            analysed.append(found[1] if found is not None and found[0] == r.text else self.index.analyze(r.text))
        self.index.add_terms(list(range(len(self.records))), analysed)
        self.terms = {
            r.id: (r.text, t) for r, t in zip(self.records, analysed, strict=True)
        }  # reused by the next version
        self.vectors: np.ndarray | None = None
        self.embedded = np.zeros(len(rows), dtype=bool)
        name = embedder.name if embedder is not None else None
        blobs = [blob if model == name else None for _, model, blob in rows]
        if embedder is not None and any(b is not None for b in blobs):
            dim = next(len(b) for b in blobs if b is not None) // 2
            matrix = np.zeros((len(rows), dim), dtype=np.float32)
            for i, blob in enumerate(blobs):
                if blob is not None and len(blob) == dim * 2:
                    matrix[i] = np.frombuffer(blob, dtype=np.float16)
                    self.embedded[i] = True
            self.vectors = matrix
        self.all_embedded = bool(self.embedded.all())
        self.distinct = _latest_of_each_text(self.records, by_scope=False)
        self.distinct_in_scope = _latest_of_each_text(self.records, by_scope=True)
        if self.records:
            self.index.scores("")  # build the postings now

    def relevance(self, query: str) -> np.ndarray:
        """Each record's relevance to `query` in [0, 1] (see the module docstring)."""
        bm25 = self.index.scores(query)
        if self.vectors is not None and self.embedder is not None:
            cosine = cosines(self.vectors, query_vector(self.embedder, query))
            if not self.all_embedded:
                dense = standardised(cosine[self.embedded]) if self.embedded.any() else cosine[:0]
                cosine = np.zeros(len(self.records))
                cosine[self.embedded] = dense  # a record with no vector yet: the crowd's mean, its keywords decide
            scores = fuse(bm25, cosine, self.index.coverage(query, bm25))
        else:
            scores = standardised(bm25)
        low, high = float(scores.min()), float(scores.max())
        return (scores - low) / (high - low) if high > low else np.zeros(len(scores))

    def search(
        self, query: str, k: int, weights: RecallWeights, scope: str | None = None, now: float | None = None
    ) -> list[MemoryMatch]:
        """The `k` best records for `query` (of `scope` when given), best first."""
        if not self.records or k <= 0:
            return []
        relevance = self.relevance(query)
        if scope is None:
            keep = self.distinct
        else:
            keep = self.distinct_in_scope & np.array([r.scope == scope for r in self.records])
        relevance = np.where(keep, relevance, -1.0)
        size = max(weights.shortlist, 2 * k)
        if size < len(relevance):  # the `size` most relevant (unordered), then ordered: not a sort of every record
            top = np.argpartition(-relevance, size)[:size]
            shortlist = top[np.lexsort((top, -relevance[top]))]  # ties by position, as a stable sort would
        else:
            shortlist = np.argsort(-relevance, kind="stable")
        shortlist = shortlist[relevance[shortlist] >= 0]
        now = time.time() if now is None else now
        scored = []
        for i in shortlist.tolist():
            record = self.records[i]
            age_days = max(0.0, now - (record.updated or record.created)) / DAY
            recency = 0.5 ** (age_days / weights.half_life_days) if weights.half_life_days > 0 else 0.0
            score = (
                weights.meaning * float(relevance[i])
                + weights.recency * recency
                + weights.importance * record.importance
            )
            scored.append(MemoryMatch(record, score))
        scored.sort(key=lambda m: -m.score)
        return scored[:k]


def _latest_of_each_text(records: list[MemoryRecord], by_scope: bool) -> np.ndarray:
    """True for one record of each text (of each scope, `by_scope`), case and spacing aside: the most recently
    updated, then the most important. A remark made in many conversations is one memory to recall, not `k`."""
    best: dict[tuple[str, str], int] = {}
    for i, r in enumerate(records):
        key = (r.scope if by_scope else "", " ".join(r.text.split()).casefold())
        j = best.get(key)
        if j is None or (r.updated, r.importance) > (records[j].updated, records[j].importance):
            best[key] = i
    mask = np.zeros(len(records), dtype=bool)
    mask[list(best.values())] = True
    return mask

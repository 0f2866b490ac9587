"""Fusing the keyword (BM25) and meaning (cosine) scores of every document into one ranking.

    scores = fuse(bm25, cosine, query)      # numpy arrays over the same documents, in the same order

Each side is standardised over the documents of this query (minus its mean, over its standard deviation): a
document's fused score is how far above the crowd each retriever puts it, weighted by `DENSE_WEIGHT` for the
query's language. Standardising keeps a side's confidence: when BM25 finds one passage far above the rest (a rare
name, an exact phrase) that passage stays on top; when the question shares no words with the answer, BM25's
scores are flat noise and the meaning side decides. Reciprocal-rank fusion throws that confidence away (an equal
RRF scored below dense retrieval alone on a Chinese set where BM25 was weak).

The weights were chosen with bench/rag_fusion.py on our own paraphrase sets (bench/data/paraphrase_*.json) and
checked on the held-out sets of bench/rag_quality.py, where the fusion beats both of its parts.
"""

from __future__ import annotations

import numpy as np

from chatagent.utils.lang import detect_lang

__all__ = ["DENSE_WEIGHT", "fuse", "standardised"]

DENSE_WEIGHT = {"en": 0.5, "zh": 0.5}  # per query language; others use 'en'


def standardised(scores: np.ndarray) -> np.ndarray:
    """`scores` minus their mean, over their standard deviation (all zeros when they are all equal)."""
    std = float(scores.std())
    if std == 0.0 or not np.isfinite(std):
        return np.zeros_like(scores, dtype=np.float64)
    return (scores - scores.mean()) / std


def fuse(bm25: np.ndarray, cosine: np.ndarray, query: str, weights: dict[str, float] | None = None) -> np.ndarray:
    """One score per document from its BM25 score and its cosine with the query (see the module docstring)."""
    w = (weights or DENSE_WEIGHT).get(detect_lang(query), (weights or DENSE_WEIGHT)["en"])
    return (1.0 - w) * standardised(np.asarray(bm25, dtype=np.float64)) + w * standardised(
        np.asarray(cosine, dtype=np.float64)
    )

"""Fusing the keyword (BM25) and meaning (cosine) scores of every document into one ranking.

    scores = fuse(bm25, cosine, coverage)   # numpy arrays over the same documents, in the same order

Each side is standardised over the documents of this query (minus its mean, over its standard deviation): a
document's fused score is how far above the crowd each retriever puts it. Standardising keeps a side's
confidence: when BM25 finds one passage far above the rest (a rare name, an exact phrase) that passage stays on
top; when the question shares no words with the answer, BM25's scores are flat noise and the meaning side
decides. Reciprocal-rank fusion throws that confidence away (an equal RRF scored below dense retrieval alone on a
Chinese set where BM25 was weak).

The meaning side's weight is `DENSE_WEIGHT`, raised towards 1 as the query's words go missing: `coverage` is the
share of the query's words found in BM25's best document (`coverage`), so a question asked in other words
than its answer (coverage 0.2) is ranked mostly by meaning, one asked in the document's own words (coverage 1) by
keywords a little more than by meaning. Without a coverage (None), the weight is `DENSE_WEIGHT`.

The weight was chosen with bench/rag_fusion.py on the dev half of four sets (hotpotqa, cmrc2018 and our
paraphrase sets, English and Chinese): the value whose hybrid beats both BM25 and meaning alone on every dev set
by the widest margin (MRR and nDCG@10). Chosen per language, it came out the same (0.3), so there is one weight.
bench/rag_quality.py reports the other half (test), which no choice looked at.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np

from chatagent.utils.lang import CJK_CHARS

__all__ = ["DENSE_WEIGHT", "coverage", "dense_weight", "fuse", "standardised"]

DENSE_WEIGHT = 0.3
_CJK = re.compile(f"[{CJK_CHARS}]")


def standardised(scores: np.ndarray) -> np.ndarray:
    """`scores` minus their mean, over their standard deviation (all zeros when they are all equal)."""
    std = float(scores.std())
    if std == 0.0 or not np.isfinite(std):
        return np.zeros_like(scores, dtype=np.float64)
    return (scores - scores.mean()) / std


def coverage(query_terms: Iterable[str], document_terms: Iterable[str]) -> float:
    """The share of the query's words among the document's (0 to 1; 0 for a query without words). A word is a
    term, or a character of a Chinese bigram: bigrams that straddle two words would otherwise make every Chinese
    question look unmatched."""
    wanted = _units(query_terms)
    return len(wanted & _units(document_terms)) / len(wanted) if wanted else 0.0


def _units(terms: Iterable[str]) -> set[str]:
    """Terms as units of coverage: a CJK term becomes its characters, any other stays whole."""
    out: set[str] = set()
    for term in terms:
        if _CJK.match(term):
            out.update(term)
        else:
            out.add(term)
    return out


def dense_weight(coverage: float | None, base: float = DENSE_WEIGHT) -> float:
    """The meaning side's weight for a query whose terms BM25's best document covers at `coverage` (0 to 1)."""
    if coverage is None:
        return base
    return base + (1.0 - base) * (1.0 - min(1.0, max(0.0, coverage)))


def fuse(bm25: np.ndarray, cosine: np.ndarray, coverage: float | None = None, base: float = DENSE_WEIGHT) -> np.ndarray:
    """One score per document from its BM25 score and its cosine with the query (see the module docstring)."""
    w = dense_weight(coverage, base)
    keywords = standardised(np.asarray(bm25, dtype=np.float64))
    return (1.0 - w) * keywords + w * standardised(np.asarray(cosine, dtype=np.float64))

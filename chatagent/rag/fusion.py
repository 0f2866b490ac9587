"""Fusing the keyword (BM25) and meaning (cosine) scores of every document into one ranking.

    scores = fuse(bm25, cosine, coverage)   # numpy arrays over the same documents, in the same order

Each side is standardised over the documents of this query (minus its mean, over its standard deviation): a
document's fused score is how far above the crowd each retriever puts it. Standardising keeps a side's
confidence: when BM25 finds one passage far above the rest (a rare name, an exact phrase) that passage stays on
top; when the question shares no words with the answer, BM25's scores are flat noise and the meaning side
decides. Reciprocal-rank fusion throws that confidence away (an equal RRF scored below dense retrieval alone on a
Chinese set where BM25 was weak).

The meaning side's weight follows how sure the keywords are, judged two ways, both needed. `coverage`: the share
of the query's words found in BM25's best document (asked in other words than the documents', the keywords are
not to be trusted). `separation`: how far BM25's best stands above the rest, (best - RUNNER_UP-th best) / best.
In multi-document web text the query's words are in many passages, the best among them too, whether it answers or
not (a "related questions" list, a repost, a page title): coverage is then nearly always 1 and said nothing, and
trusting it put the hybrid far below meaning alone on such a set; what such a query's keywords cannot do is single
one passage out. Keyword confidence is the product of two logistic curves, one halfway at coverage `COVERED`, the
other at separation `SEPARATED` (`SLOPE`: most of each move within 0.2 of it); the meaning side's weight moves
from `UNMATCHED_WEIGHT` (no confidence: meaning decides, keywords only break ties if it is below 1) to
`MATCHED_WEIGHT` (a query in the documents' own words that BM25 finds one passage for).

The values were chosen with bench/rag_fusion.py on the dev halves of five sets (hotpotqa, cmrc2018, our paraphrase
sets in English and Chinese, and our Chinese web-search set, bench/data/web_zh.json): the values whose hybrid is
above the better of BM25 and meaning alone on every dev set by the widest margin (MRR and nDCG@10).
bench/rag_quality.py reports the other halves (test), which no choice looked at.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from chatagent.rag.analysis import word_units

__all__ = [
    "COVERED", "MATCHED_WEIGHT", "RUNNER_UP", "SEPARATED", "UNMATCHED_WEIGHT", "coverage", "dense_weight", "fuse",
    "separation", "standardised", "word_units",
]  # fmt: skip

MATCHED_WEIGHT = 0.3  # the meaning side's weight when the keywords are sure
UNMATCHED_WEIGHT = 1.0  # ... and when they are not
COVERED = 0.7  # the coverage halfway between the two
SEPARATED = 0.4  # the separation halfway between the two
RUNNER_UP = 2  # BM25's best is compared with the document of this rank
SLOPE = 20.0


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
    wanted = word_units(query_terms)
    return len(wanted & word_units(document_terms)) / len(wanted) if wanted else 0.0


def separation(bm25: np.ndarray, runner_up: int = RUNNER_UP) -> float:
    """How far BM25's best score stands above the rest: (best - the `runner_up`-th best) / best, from 0 (a tie, or no
    match) to 1 (no other document matches)."""
    scores = np.asarray(bm25, dtype=np.float64)
    if not len(scores):
        return 0.0
    best = float(scores.max())
    if best <= 0:
        return 0.0
    if len(scores) < runner_up:
        return 1.0
    other = float(np.partition(scores, len(scores) - runner_up)[len(scores) - runner_up])
    return (best - max(other, 0.0)) / best


def dense_weight(
    coverage: float,
    separation: float = 1.0,
    matched: float = MATCHED_WEIGHT,
    unmatched: float = UNMATCHED_WEIGHT,
    covered: float = COVERED,
    separated: float = SEPARATED,
) -> float:
    """The meaning side's weight for a query whose words BM25's best document covers at `coverage` (0 to 1), that
    best standing `separation` above the rest (see the module docstring)."""
    sure = 1.0 / (1.0 + math.exp(-SLOPE * (coverage - covered))) / (1.0 + math.exp(-SLOPE * (separation - separated)))
    return unmatched - (unmatched - matched) * sure


def fuse(
    bm25: np.ndarray, cosine: np.ndarray, coverage: float, runner_up: int = RUNNER_UP, **weights: float
) -> np.ndarray:
    """One score per document from its BM25 score and its cosine with the query (see the module docstring);
    `runner_up` and `weights` (dense_weight's), to compare choices (bench/rag_fusion.py)."""
    keywords = np.asarray(bm25, dtype=np.float64)
    w = dense_weight(coverage, separation(keywords, runner_up), **weights)
    return (1.0 - w) * standardised(keywords) + w * standardised(np.asarray(cosine, dtype=np.float64))

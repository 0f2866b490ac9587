"""Fusing the keyword (BM25) and meaning (cosine) scores of every document into one ranking.

    scores = fuse(bm25, cosine, coverage)   # numpy arrays over the same documents, in the same order

Each side is standardised over the documents of this query (minus its mean, over its standard deviation): a
document's fused score is how far above the crowd each retriever puts it. Standardising keeps a side's
confidence: when BM25 finds one passage far above the rest (a rare name, an exact phrase) that passage stays on
top; when the question shares no words with the answer, BM25's scores are flat noise and the meaning side
decides. Reciprocal-rank fusion throws that confidence away (an equal RRF scored below dense retrieval alone on a
Chinese set where BM25 was weak).

The meaning side's weight depends on how well the query's own words find something: `coverage` is the share of
the query's words found in BM25's best document. Asked in the document's own words (coverage well above
`COVERED`), the query is ranked with keywords weighing more (meaning at `MATCHED_WEIGHT`); asked in other words
(well below it), mostly by meaning (`UNMATCHED_WEIGHT`), keywords only breaking near-ties. The weight moves from
one to the other along a logistic curve, halfway at `COVERED` (`SLOPE`: most of the move within 0.2 of it). A linear rule (the weight
raised in proportion to the words missing) could not serve both kinds of question: where it suited questions in
the documents' words, it let keywords overrule meaning on paraphrases.

The three values were chosen with bench/rag_fusion.py on the dev half of four sets (hotpotqa, cmrc2018 and our
paraphrase sets, English and Chinese, 286 dev questions each): the values whose hybrid beats both BM25 and
meaning alone on every dev set by the widest margin (MRR and nDCG@10). bench/rag_quality.py reports the other
half (test), which no choice looked at.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from chatagent.rag.analysis import word_units

__all__ = [
    "COVERED", "MATCHED_WEIGHT", "UNMATCHED_WEIGHT", "coverage", "dense_weight", "fuse", "standardised", "word_units",
]  # fmt: skip

MATCHED_WEIGHT = 0.3  # the meaning side's weight for a query in the documents' own words
UNMATCHED_WEIGHT = 0.9  # ... and for one in other words
COVERED = 0.7  # the coverage halfway between the two
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


def dense_weight(
    coverage: float, matched: float = MATCHED_WEIGHT, unmatched: float = UNMATCHED_WEIGHT, covered: float = COVERED
) -> float:
    """The meaning side's weight for a query whose words BM25's best document covers at `coverage` (0 to 1)."""
    return matched + (unmatched - matched) / (1.0 + math.exp(SLOPE * (coverage - covered)))


def fuse(bm25: np.ndarray, cosine: np.ndarray, coverage: float, **weights: float) -> np.ndarray:
    """One score per document from its BM25 score and its cosine with the query (see the module docstring);
    `weights`: dense_weight's, to compare choices (bench/rag_fusion.py)."""
    w = dense_weight(coverage, **weights)
    keywords = standardised(np.asarray(bm25, dtype=np.float64))
    return (1.0 - w) * keywords + w * standardised(np.asarray(cosine, dtype=np.float64))

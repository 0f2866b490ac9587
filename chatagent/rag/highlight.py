"""The sentences of a passage that best match a query: what a page highlights in the passage it shows.

    from chatagent.rag.highlight import best_sentences
    spans = best_sentences(chunk.text, 'What is a factor?')   # [(start, end), ...] into chunk.text, in order
    [chunk.text[a:b] for a, b in spans]

A sentence ends at `.`, `!`, `?` or `;` before a space, at a CJK full stop, or at a line break unless the next
line starts in lower case (a PDF breaks its lines inside sentences; a heading, a list item or a line of code
starts a new one). A sentence scores the distinct terms of the query it holds, compounds written either way
counting (see `chatagent.rag.analysis.query_terms`).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from chatagent.rag.analysis import analyze, query_terms

__all__ = ["best_sentences", "sentence_spans"]

MAX_SENTENCES = 3
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=\S)|(?<=[。！？；])|\s*\n\s*(?![a-z])")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """The (start, end) of each sentence of `text`, surrounding space left out (see the module docstring)."""
    spans: list[tuple[int, int]] = []
    start = 0
    for end, next_start in [(m.start(), m.end()) for m in _SENTENCE_END.finditer(text)] + [(len(text), len(text))]:
        a, b = start, end
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if a < b:
            spans.append((a, b))
        start = next_start
    return spans


def best_sentences(
    text: str, query: str, *, limit: int = MAX_SENTENCES, analyzer: Callable[[str], list[str]] = analyze
) -> list[tuple[int, int]]:
    """The spans of the sentences of `text` that match `query` best, in text order: the best one and those that
    hold at least half as many of its terms, at most `limit`, the earlier first on a tie ([] when none
    matches). `analyzer` makes a text's terms (the index's)."""
    spans = sentence_spans(text)
    terms = [set(analyzer(text[a:b])) for a, b in spans]
    known = set().union(*terms)
    wanted = set(query_terms(query, known) if analyzer is analyze else analyzer(query))
    scores = [len(wanted & t) for t in terms]
    best = max(scores, default=0)
    if best == 0:
        return []
    ranked = sorted((i for i, s in enumerate(scores) if 2 * s >= best), key=lambda i: (-scores[i], i))[:limit]
    return [spans[i] for i in sorted(ranked)]

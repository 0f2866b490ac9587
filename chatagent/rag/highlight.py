"""The sentences of a passage that best match a query: what a page highlights in the passage it shows.

    from chatagent.rag.highlight import best_sentences
    spans = best_sentences(chunk.text, 'What is a factor?')   # [(start, end), ...] into chunk.text, in order
    [chunk.text[a:b] for a, b in spans]

A sentence ends at `.`, `!`, `?` or `;` before a space, at a CJK full stop, or at a line break unless the next
line starts in lower case (a PDF breaks its lines inside sentences; a heading, a list item or a line of code
starts a new one). A sentence scores the distinct terms of the query it holds, compounds written either way
counting (see `chatagent.rag.analysis.query_terms`), each by its weight when the index's term weights are given
(`Index.term_weights`: its idf there): in a manual where every page says "model" and "fit", the sentence with
"binomial" is the one a question about binomial models needs.

`best_passage` picks which of a search's best hits to show first: the one with the best sentence, so that a
passage whose every sentence holds one word of the question gives way to one where a sentence holds several,
or defines what a "What is X?" question asks ("A factor is a vector object used to ...").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from chatagent.rag.analysis import analyze, query_terms

__all__ = ["TermWeights", "best_passage", "best_sentences", "sentence_scores", "sentence_spans"]

TermWeights = Mapping[str, float]  # a query term -> how much it says (its idf in the index searched)

MAX_SENTENCES = 3
PASSAGE_CANDIDATES = 3  # of a search's best hits, the passage shown first is one of these
_WORDS = re.compile(r"[^\W_]+")
_DEFINITION_QUESTION = re.compile(r"^\s*(?:what|who)\s+(?:is|are|was|were)\s+(.+?)\s*\??\s*$", re.IGNORECASE)
_ARTICLES = frozenset({"a", "an", "the"})
_COPULAS = frozenset({"is", "are", "was", "were", "means", "refers", "denotes"})
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


def sentence_scores(
    text: str, query: str, analyzer: Callable[[str], list[str]] = analyze, weights: TermWeights | None = None
) -> tuple[list[tuple[int, int]], list[float]]:
    """The spans of the sentences of `text`, and how much of `query` each holds: the distinct query terms it holds
    (compounds written either way counting, with the default analyser), each counting its weight in `weights`
    (the index's `term_weights`: a rare term weighs more than a common one; a term missing there weighs as the
    heaviest) or 1 without."""
    spans = sentence_spans(text)
    terms = [set(analyzer(text[a:b])) for a, b in spans]
    wanted = set(query_terms(query, set().union(*terms)) if analyzer is analyze else analyzer(query))
    if not weights:
        return spans, [float(len(wanted & t)) for t in terms]
    heaviest = max(weights.values())
    return spans, [sum(weights.get(term, heaviest) for term in wanted & t) for t in terms]


def best_sentences(
    text: str,
    query: str,
    *,
    limit: int = MAX_SENTENCES,
    analyzer: Callable[[str], list[str]] = analyze,
    weights: TermWeights | None = None,
) -> list[tuple[int, int]]:
    """The spans of the sentences of `text` that match `query` best, in text order: the best one and those that
    hold at least half as much of it, at most `limit`, the earlier first on a tie ([] when none matches).
    `analyzer` makes a text's terms (the index's); `weights` as for `sentence_scores`."""
    spans, scores = sentence_scores(text, query, analyzer, weights)
    best = max(scores, default=0.0)
    if best <= 0:
        return []
    ranked = sorted((i for i, s in enumerate(scores) if 2 * s >= best), key=lambda i: (-scores[i], i))[:limit]
    return [spans[i] for i in sorted(ranked)]


def best_passage(texts: Sequence[str], query: str, weights: TermWeights | None = None) -> int:
    """Which of `texts` (a search's best hits, best first) to show first: among the first PASSAGE_CANDIDATES, the
    one whose best sentence holds most of `query` (`weights` as for `sentence_scores`; a sentence that defines the
    subject of a "What is X?" question counts as holding all of it and more), the better-ranked on a tie."""
    subject = _definition_subject(query)
    best, best_score = 0, -1.0
    for i, text in enumerate(texts[:PASSAGE_CANDIDATES]):
        score = _best_sentence_score(text, query, subject, weights)
        if score > best_score:
            best, best_score = i, score
    return best


def _best_sentence_score(text: str, query: str, subject: list[str], weights: TermWeights | None) -> float:
    spans, scores = sentence_scores(text, query, weights=weights)
    score = max(scores, default=0.0)
    if subject and any(_defines(text[a:b], subject) for a, b in spans):
        every = set(query_terms(query, set(analyze(text))))
        whole = sum(weights.get(t, max(weights.values())) for t in every) if weights else float(len(every))
        score = max(score, whole) + (max(weights.values()) if weights else 1.0)
    return score


def _definition_subject(query: str) -> list[str]:
    """The words of X in a "What is X?" question, its article left out ([] for any other question)."""
    m = _DEFINITION_QUESTION.match(query)
    words = _WORDS.findall(m.group(1).lower()) if m else []
    return words[1:] if words and words[0] in _ARTICLES else words


def _defines(sentence: str, subject: list[str]) -> bool:
    """Whether `sentence` begins "(A|The) <subject> is|are|means ..." (the subject's words compared by their stems)."""
    words = _WORDS.findall(sentence.lower())
    if words and words[0] in _ARTICLES:
        words = words[1:]
    n = len(subject)
    return (
        len(words) > n
        and words[n] in _COPULAS
        and [analyze(w) or [w] for w in words[:n]] == [analyze(w) or [w] for w in subject]
    )

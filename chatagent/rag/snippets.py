"""What a source shows of a passage: the sentences that best match the question, within a length.

    snippet_text(chunk.text, 'How do I flip an image?')     # 'To flip an image, choose Image > Flip. …'
    snippet_source(chunk, query)        # chunk.as_source() with that text: {'file', 'pages', 'text'}

Sentences and their weights are `chatagent.rag.highlight`'s (the distinct query terms a sentence holds, terms as
the index makes them, each by its idf in the index when its weights are given), the earlier first on ties; the chosen sentences come back in the passage's order,
' … ' where text was skipped; sentences that match nothing are left out. A query that shares no term with the
passage gets its opening sentences. An excerpt cut to fit (`chatagent.rag.file_index`) keeps them the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from chatagent.rag.analysis import analyze as default_analyze
from chatagent.rag.chunking import SNIPPET_CHARS
from chatagent.rag.highlight import TermWeights, sentence_scores

if TYPE_CHECKING:
    from chatagent.rag.chunking import Chunk

__all__ = ["ranked_sentences", "snippet_source", "snippet_text"]

GAP = " … "


def ranked_sentences(
    text: str,
    query: str,
    analyze: Callable[[str], list[str]] = default_analyze,
    weights: TermWeights | None = None,
) -> tuple[list[str], list[int], list[float]]:
    """The sentences of `text`, their positions ranked best first for `query` (ties: earlier first), and how
    much of the query each holds (`chatagent.rag.highlight.sentence_scores`, with the index's `weights`)."""
    spans, overlap = sentence_scores(text, query, analyze, weights)
    return [text[a:b] for a, b in spans], sorted(range(len(spans)), key=lambda i: (-overlap[i], i)), overlap


def snippet_text(
    text: str,
    query: str,
    max_chars: int = SNIPPET_CHARS,
    analyze: Callable[[str], list[str]] = default_analyze,
    weights: TermWeights | None = None,
) -> str:
    """The best sentences of `text` for `query` within `max_chars`, in their order (see the module docstring)."""
    pieces, ranked, overlap = ranked_sentences(" ".join(text.split()), query, analyze, weights)
    if not pieces:
        return ""
    if overlap[ranked[0]] > 0:  # only the sentences that match
        ranked = [i for i in ranked if overlap[i] > 0]
    keep: list[int] = []
    used = 0
    for i in ranked:
        cost = len(pieces[i]) + len(GAP)
        if used + cost <= max_chars:
            keep.append(i)
            used += cost
    if not keep:  # the best sentence alone is too long: its start
        first = pieces[ranked[0]]
        cut = first.rfind(" ", 0, max_chars)
        return first[: cut if cut > max_chars // 2 else max_chars] + " …"
    keep.sort()
    out = pieces[keep[0]]
    for before, i in zip(keep, keep[1:], strict=False):
        out += (" " if i == before + 1 else GAP) + pieces[i]
    return out


def snippet_source(
    chunk: Chunk, query: str, max_chars: int = SNIPPET_CHARS, weights: TermWeights | None = None
) -> dict[str, Any]:
    """`chunk.as_source()` whose text is its best sentences for `query` (the query's terms weighted by `weights`,
    the index's `term_weights`, when given)."""
    source = chunk.as_source(max_chars)
    source["text"] = snippet_text(chunk.text, query, max_chars, weights=weights)
    return source

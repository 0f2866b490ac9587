"""BM25 over a user's memories as they change: a record added or removed costs its own terms, never a rebuild.

    keywords = Keywords()
    at = keywords.add(keywords.analyze('Alice is allergic to peanuts.'))    # its position: 0
    keywords.scores('peanuts')          # one BM25 score per position, 0 for removed ones
    keywords.remove(at)

The scores are those of `chatagent.rag.index.Index` with its defaults (Lucene's idf, k1 1.2, b 0.75, no titles)
over the live records, for the same query terms (`chatagent.rag.analysis.query_terms`: a compound's other
spellings too); the weights are worked out when a query asks, from term frequencies and record lengths, so that
the collection may change between two queries. Postings are kept in two parts: `main`, compressed arrays (for
each term, its positions and frequencies), and `recent`, the postings of records added since; `compact()` folds
recent into main, leaving out removed records (searching calls it once recent outgrows a tenth of main).
"""

from __future__ import annotations

import numpy as np

from chatagent.rag.analysis import analyze, query_terms
from chatagent.rag.fusion import coverage

__all__ = ["Keywords"]

K1, B = 1.2, 0.75


class Keywords:
    """BM25 over positions 0..n-1, each a record's terms or nothing (see the module docstring)."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}
        self.names: list[str] = []  # term id -> term
        self.terms: list[np.ndarray] = []  # per position: its term ids in order (empty once removed)
        self.lengths = np.zeros(
            16, dtype=np.float64
        )  # per position (and room for more): its number of terms (0 once removed)
        self.df = np.zeros(0, dtype=np.int64)  # per term: the live positions holding it
        self.live = 0
        self.total = 0.0  # the live positions' lengths
        self.indptr = np.zeros(1, dtype=np.int64)  # main: term t's postings are [indptr[t], indptr[t + 1])
        self.docs = np.zeros(0, dtype=np.int32)
        self.tfs = np.zeros(0, dtype=np.float32)
        self.recent: dict[int, tuple[list[int], list[float]]] = {}  # term id -> (positions, frequencies)
        self.recent_postings = 0

    def __len__(self) -> int:
        return len(self.terms)

    @staticmethod
    def analyze(text: str) -> list[str]:
        """The terms of `text`, as the documents' index makes them."""
        return analyze(text)

    # ---- changes -------------------------------------------------------------------------------------------

    def add(self, terms: list[str]) -> int:
        """A new position holding these terms (positions are never reused: a removed one's postings stay)."""
        position = len(self.terms)
        ids = np.fromiter((self._term_id(t) for t in terms), dtype=np.int32, count=len(terms))
        self.terms.append(ids)
        if len(self.lengths) <= position:
            grown = np.zeros(max(16, 2 * len(self.lengths)), dtype=np.float64)
            grown[: len(self.lengths)] = self.lengths
            self.lengths = grown
        self.lengths[position] = len(ids)
        if len(ids):
            self.live += 1
            self.total += len(ids)
        unique, counts = np.unique(ids, return_counts=True)
        self.df[unique] += 1
        for t, count in zip(unique.tolist(), counts.tolist(), strict=True):
            found = self.recent.get(t)
            if found is None:
                found = self.recent[t] = ([], [])
            found[0].append(position)
            found[1].append(float(count))
        self.recent_postings += len(unique)
        return position

    def remove(self, position: int) -> None:
        """Take `position`'s terms out of the collection (its postings stay until `compact`, scoring nothing)."""
        ids = self.terms[position] if position < len(self.terms) else np.zeros(0, dtype=np.int32)
        if not len(ids):
            return
        self.df[np.unique(ids)] -= 1
        self.live -= 1
        self.total -= len(ids)
        self.lengths[position] = 0.0
        self.terms[position] = np.zeros(0, dtype=np.int32)

    def compact(self) -> None:
        """Fold the recent postings into main, without the removed positions'."""
        n = len(self.terms)
        lengths = np.fromiter((len(t) for t in self.terms), dtype=np.int64, count=n)
        flat = np.concatenate(self.terms) if n else np.zeros(0, dtype=np.int32)
        keys, tf = np.unique(flat.astype(np.int64) * max(n, 1) + np.repeat(np.arange(n, dtype=np.int64), lengths),
                             return_counts=True)  # fmt: skip
        terms = keys // max(n, 1)
        self.docs = (keys % max(n, 1)).astype(np.int32)
        self.tfs = tf.astype(np.float32)
        self.indptr = np.zeros(len(self.names) + 1, dtype=np.int64)
        np.cumsum(np.bincount(terms, minlength=len(self.names)), out=self.indptr[1:])
        self.recent, self.recent_postings = {}, 0

    def _term_id(self, term: str) -> int:
        found = self.vocab.get(term)
        if found is None:
            found = self.vocab[term] = len(self.names)
            self.names.append(term)
            if len(self.df) < len(self.names):
                grown = np.zeros(max(16, 2 * len(self.df)), dtype=np.int64)
                grown[: len(self.df)] = self.df
                self.df = grown
        return found

    # ---- searching -----------------------------------------------------------------------------------------

    def scores(self, query: str) -> np.ndarray:
        """The BM25 score of every position for `query` (0 for removed positions and those matching no term)."""
        n = len(self.terms)
        out = np.zeros(n, dtype=np.float64)
        if not self.live or not n:
            return out
        if self.recent_postings > max(1000, len(self.docs) // 10):
            self.compact()
        average = self.total / self.live
        main_terms = len(self.indptr) - 1
        for term in query_terms(query, self.vocab):
            t = self.vocab.get(term)
            if t is None or not self.df[t]:
                continue
            df = float(self.df[t])
            idf = np.log1p((self.live - df + 0.5) / (df + 0.5))
            parts = []
            if t < main_terms and self.indptr[t + 1] > self.indptr[t]:
                start, end = self.indptr[t], self.indptr[t + 1]
                parts.append((self.docs[start:end], self.tfs[start:end]))
            recent = self.recent.get(t)
            if recent is not None:
                parts.append((np.asarray(recent[0], dtype=np.int32), np.asarray(recent[1], dtype=np.float32)))
            for docs, tf in parts:
                lengths = self.lengths[docs]
                weights = idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * lengths / average))
                out[docs] += np.where(lengths > 0, weights, 0.0)  # a removed position's old postings score nothing
        return out

    def coverage(self, query: str, scores: np.ndarray) -> float:
        """The share of `query`'s words found in the position `scores` ranks first (`chatagent.rag.fusion.coverage`)."""
        if not len(scores) or float(scores.max()) <= 0:
            return 0.0
        names = self.names
        return coverage(analyze(query), {names[t] for t in self.terms[int(np.argmax(scores))].tolist()})

    # ---- saving --------------------------------------------------------------------------------------------

    def arrays(self, keep: np.ndarray) -> dict[str, np.ndarray]:
        """The positions `keep` (in that order, numbered 0..) as arrays `from_arrays` makes the index again from,
        compacted: their terms, and the postings (of the same vocabulary)."""
        kept = [self.terms[i] for i in keep.tolist()]
        made = Keywords()
        made.names, made.terms = self.names, kept
        made.compact()
        return {
            "kw_terms": np.concatenate(kept) if kept else np.zeros(0, dtype=np.int32),
            "kw_lengths": np.fromiter((len(t) for t in kept), dtype=np.int64, count=len(kept)),
            "kw_indptr": made.indptr,
            "kw_docs": made.docs,
            "kw_tfs": made.tfs,
        }

    @classmethod
    def from_arrays(cls, names: list[str], arrays: dict[str, np.ndarray]) -> Keywords:
        """The index `arrays` (of `names`, the vocabulary in id order) were made from."""
        made = cls()
        made.names = list(names)
        made.vocab = {name: i for i, name in enumerate(made.names)}
        lengths = arrays["kw_lengths"]
        offsets = np.concatenate(([0], np.cumsum(lengths)))
        flat = arrays["kw_terms"].astype(np.int32)
        indptr, docs = arrays["kw_indptr"].astype(np.int64), arrays["kw_docs"].astype(np.int32)
        if len(flat) and (int(flat.max()) >= len(names) or int(flat.min()) < 0):
            raise ValueError("a term id outside the vocabulary")
        if len(indptr) != len(names) + 1 or int(indptr[-1]) != len(docs) or len(docs) != len(arrays["kw_tfs"]):
            raise ValueError("inconsistent postings")
        if len(docs) and (int(docs.max()) >= len(lengths) or int(docs.min()) < 0):
            raise ValueError("a posting outside the records")
        made.terms = [flat[offsets[i] : offsets[i + 1]] for i in range(len(lengths))]
        made.lengths = np.zeros(max(16, len(lengths)), dtype=np.float64)
        made.lengths[: len(lengths)] = lengths
        made.live = int(np.count_nonzero(lengths))
        made.total = float(lengths.sum())
        made.indptr, made.docs, made.tfs = indptr, docs, arrays["kw_tfs"].astype(np.float32)
        made.df = np.zeros(max(16, len(names)), dtype=np.int64)
        made.df[: len(names)] = np.diff(indptr)
        return made

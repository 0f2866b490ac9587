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
Each position's terms are kept the same way: one array of the terms of positions 0..base-1 end to end (as compacted,
or as a saved index holds them: no array per record to make when it is loaded), then an array per position added.
"""

from __future__ import annotations

import numpy as np

from chatagent.rag.analysis import analyze, query_terms
from chatagent.rag.fusion import coverage

__all__ = ["Keywords"]

K1, B = 1.2, 0.75
_NONE = np.zeros(0, dtype=np.int32)


class Keywords:
    """BM25 over positions 0..n-1, each a record's terms or nothing (see the module docstring)."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}
        self.names: list[str] = []  # term id -> term
        self.flat = np.zeros(0, dtype=np.int32)  # the term ids of positions 0..base-1, end to end ...
        self.offsets = np.zeros(1, dtype=np.int64)  # ... position p's being flat[offsets[p]:offsets[p + 1]]
        self.added: list[np.ndarray] = []  # the term ids of each position from base on
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
        return len(self.offsets) - 1 + len(self.added)

    def terms_of(self, position: int) -> np.ndarray:
        """The term ids of `position`, in order (none once removed)."""
        base = len(self.offsets) - 1
        if position >= len(self) or not self.lengths[position]:
            return _NONE
        if position < base:
            return self.flat[self.offsets[position] : self.offsets[position + 1]]
        return self.added[position - base]

    def _gather(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The term ids of `positions` (ascending) end to end, and each one's number of terms."""
        base = len(self.offsets) - 1
        lengths = self.lengths[positions].astype(np.int64)
        saved = positions < base
        first, counts = self.offsets[positions[saved]], lengths[saved]
        at = np.repeat(first - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum()), dtype=np.int64)
        parts = [self.flat[at], *(self.added[p - base] for p in positions[~saved].tolist())]
        return np.concatenate(parts).astype(np.int32, copy=False), lengths

    @staticmethod
    def analyze(text: str) -> list[str]:
        """The terms of `text`, as the documents' index makes them."""
        return analyze(text)

    # ---- changes -------------------------------------------------------------------------------------------

    def add(self, terms: list[str]) -> int:
        """A new position holding these terms (positions are never reused: a removed one's postings stay)."""
        position = len(self)
        ids = np.fromiter((self._term_id(t) for t in terms), dtype=np.int32, count=len(terms))
        self.added.append(ids)
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
        ids = self.terms_of(position)
        if not len(ids):
            return
        self.df[np.unique(ids)] -= 1
        self.live -= 1
        self.total -= len(ids)
        self.lengths[position] = 0.0
        base = len(self.offsets) - 1
        if position >= base:
            self.added[position - base] = _NONE

    def compact(self) -> None:
        """Fold the recent postings into main, without the removed positions'."""
        n = len(self)
        flat, lengths = self._gather(np.arange(n))
        keys, tf = np.unique(flat.astype(np.int64) * max(n, 1) + np.repeat(np.arange(n, dtype=np.int64), lengths),
                             return_counts=True)  # fmt: skip
        terms = keys // max(n, 1)
        self.docs = (keys % max(n, 1)).astype(np.int32)
        self.tfs = tf.astype(np.float32)
        self.indptr = np.zeros(len(self.names) + 1, dtype=np.int64)
        np.cumsum(np.bincount(terms, minlength=len(self.names)), out=self.indptr[1:])
        self.recent, self.recent_postings = {}, 0
        self.flat, self.offsets, self.added = flat, np.concatenate(([0], np.cumsum(lengths))), []

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
        n = len(self)
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
        return coverage(analyze(query), {names[t] for t in self.terms_of(int(np.argmax(scores))).tolist()})

    # ---- saving --------------------------------------------------------------------------------------------

    def arrays(self, keep: np.ndarray) -> dict[str, np.ndarray]:
        """The positions `keep` (ascending, numbered 0.. in that order) as arrays `from_arrays` makes the index again from,
        compacted: their terms, and the postings (of the same vocabulary)."""
        flat, lengths = self._gather(keep)
        made = Keywords()
        made.names, made.flat, made.offsets = self.names, flat, np.concatenate(([0], np.cumsum(lengths)))
        made.lengths = lengths.astype(np.float64)
        made.compact()
        return {
            "kw_terms": flat,
            "kw_lengths": lengths,
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
        flat = np.asarray(arrays["kw_terms"], dtype=np.int32)
        indptr, docs = np.asarray(arrays["kw_indptr"], dtype=np.int64), np.asarray(arrays["kw_docs"], dtype=np.int32)
        if len(flat) and (int(flat.max()) >= len(names) or int(flat.min()) < 0):
            raise ValueError("a term id outside the vocabulary")
        if len(indptr) != len(names) + 1 or int(indptr[-1]) != len(docs) or len(docs) != len(arrays["kw_tfs"]):
            raise ValueError("inconsistent postings")
        if len(docs) and (int(docs.max()) >= len(lengths) or int(docs.min()) < 0):
            raise ValueError("a posting outside the records")
        if (len(lengths) and int(lengths.min()) < 0) or int(offsets[-1]) != len(flat):
            raise ValueError("inconsistent terms")
        made.flat, made.offsets = flat, offsets.astype(np.int64)
        made.lengths = np.zeros(max(16, len(lengths)), dtype=np.float64)
        made.lengths[: len(lengths)] = lengths
        made.live = int(np.count_nonzero(lengths))
        made.total = float(lengths.sum())
        made.indptr, made.docs, made.tfs = indptr, docs, np.asarray(arrays["kw_tfs"], dtype=np.float32)
        made.df = np.zeros(max(16, len(names)), dtype=np.int64)
        made.df[: len(names)] = np.diff(indptr)
        return made

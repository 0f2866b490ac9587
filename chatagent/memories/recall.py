"""How recall ranks a user's records: meaning (hybrid keywords + vectors), recency and importance.

    score = meaning x relevance + recency x 0.5 ** (age_days / half_life_days) + importance x record.importance

Relevance is the hybrid score of `chatagent.rag.fusion` (BM25 and cosine, each standardised over the user's
records) scaled to [0, 1] over them; a record not embedded yet counts by its keywords alone. Only the
`shortlist` most relevant records are ranked by the full score, so recency and importance order what is
relevant and never bring up what is not. A text said many times (in a scope) is one candidate: its latest record.
CrewAI's composite (0.5 / 0.3 / 0.2) was the starting point; the weights here were chosen with bench/memory.py on
the development half of our multi-session set (more recency than this put older remarks above the evidence).

A `UserIndex` holds what ranking needs of each record (not its text: the matches are read from the store) and
follows the store's changes one at a time (`apply`: the records changed since its version, those forgotten), so
a turn's new records cost their own terms and vectors, not a reload. Above EXACT records the meaning side is
searched in two steps: the sign bits of the centred vectors find CANDIDATES by Hamming distance, whose exact
cosines are then taken (with BM25's best, and a fixed sample of the records for the crowd's mean and spread).
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from chatagent.memories.keywords import Keywords
from chatagent.memories.rows import Rows
from chatagent.rag.fusion import dense_weight, fuse, separation, standardised

__all__ = ["RecallWeights", "Row", "UserIndex", "text_key"]

DAY = 86400.0
EXACT = 20_000  # records up to which every cosine is computed; above, the two steps of the module docstring
CANDIDATES = 1000  # records whose exact cosine is taken above EXACT (the nearest by Hamming distance) ...
KEYWORD_CANDIDATES = 200  # ... with BM25's best
SAMPLE = 4096  # records whose cosines give the crowd's mean and spread above EXACT


@dataclass(frozen=True, slots=True)
class RecallWeights:
    """The parts of a recall score (see the module docstring)."""

    meaning: float = 0.93
    recency: float = 0.02
    importance: float = 0.05
    half_life_days: float = 90.0
    shortlist: int = 20  # records ranked by the full score (at least 2 x k)


class Row(NamedTuple):
    """A record as the index takes it from the store: what ranking needs, and its vector's model and bytes."""

    id: str
    scope: str
    text: str
    importance: float
    created: float
    updated: float
    model: str | None
    vector: bytes | None


def text_key(text: str) -> int:
    """A text, case and spacing aside, as a number (the same in every process): repeated texts are one candidate."""
    digest = hashlib.blake2b(" ".join(text.split()).casefold().encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


class UserIndex:
    """One user's records as recall searches them (see the module docstring); `lock` guards every use."""

    def __init__(self, model: str | None) -> None:
        self.model = model  # the embedder whose vectors are used (None: keywords only)
        self.version = 0  # of the store, whose changes up to it are applied
        self.ids: list[str] = []  # per position; positions are appended, a removed one stays empty
        self.position: dict[str, int] = {}
        self.keywords = Keywords()
        self.alive = np.zeros(0, dtype=bool)
        self.importance = np.zeros(0, dtype=np.float64)
        self.stamp = np.zeros(0, dtype=np.float64)  # updated (or created)
        self.scope = np.zeros(0, dtype=np.int32)  # index into scopes
        self.key = np.zeros(0, dtype=np.int64)  # text_key
        self.embedded = np.zeros(0, dtype=bool)
        self.vectors: Rows | None = None  # per position (chatagent.memories.rows)
        self.scopes: list[str] = []
        self._scope_codes: dict[str, int] = {}
        self.distinct = np.zeros(0, dtype=bool)  # the latest record of each text
        self.distinct_in_scope = np.zeros(0, dtype=bool)  # ... of each text in each scope
        self._codes: np.ndarray | None = None  # (capacity, words) uint64: sign bits of vector - centre
        self._centre: np.ndarray | None = None
        self._coded = 0  # embedded records when the centre was taken
        self._sample: np.ndarray | None = None
        self.changed = 0  # changes applied since the index was last saved (chatagent.memories.snapshot)
        self.lock = threading.RLock()

    def __len__(self) -> int:
        return int(self.alive[: len(self.ids)].sum())

    @property
    def waiting(self) -> int:
        """Live records without a vector by this index's model."""
        n = len(self.ids)
        return 0 if self.model is None else int((self.alive[:n] & ~self.embedded[:n]).sum())

    def waiting_ids(self) -> list[str]:
        """The ids of the live records without a vector by this index's model."""
        with self.lock:
            n = len(self.ids)
            return [self.ids[i] for i in np.flatnonzero(self.alive[:n] & ~self.embedded[:n]).tolist()]

    @property
    def has_vectors(self) -> bool:
        """Whether some live record has a vector (a query's own vector is then worth making)."""
        n = len(self.ids)
        return self.model is not None and bool((self.alive[:n] & self.embedded[:n]).any())

    # ---- changes -------------------------------------------------------------------------------------------

    def apply(self, version: int, rows: list[Row], forgotten: list[str]) -> None:
        """The store's changes since this index's version: rows added or changed, ids deleted."""
        with self.lock:
            texts: list[int] = []  # the text keys whose latest record may have changed
            for rid in forgotten:
                at = self.position.pop(rid, None)
                if at is not None:
                    texts.append(int(self.key[at]))
                    self._drop(at)
            for row in rows:
                at = self.position.get(row.id)
                key = text_key(row.text)
                if at is not None and self.key[at] != key:  # a new text: a new position, its own terms
                    del self.position[row.id]
                    texts.append(int(self.key[at]))
                    self._drop(at)
                    at = None
                if at is None:
                    at = self._append(row, key)
                self.importance[at] = row.importance
                self.stamp[at] = row.updated or row.created
                self.scope[at] = self._scope_code(row.scope)
                self._set_vector(at, row.vector if row.model == self.model else None)
                texts.append(key)
            self._elect(np.asarray(texts, dtype=np.int64), bulk=len(texts) > len(self.ids) // 8)
            self.version = max(self.version, version)
            self.changed += len(rows) + len(forgotten)
            if rows or forgotten:
                self._sample = None

    def _append(self, row: Row, key: int) -> int:
        at = self.keywords.add(self.keywords.analyze(row.text))
        self.ids.append(row.id)
        self.position[row.id] = at
        if at >= len(self.alive):
            self._grow(max(16, 2 * len(self.alive)))
        self.alive[at] = True
        self.key[at] = key
        return at

    def _drop(self, at: int) -> None:
        self.keywords.remove(at)
        self.alive[at] = self.embedded[at] = self.distinct[at] = self.distinct_in_scope[at] = False

    def _grow(self, size: int) -> None:
        def grown(a: np.ndarray) -> np.ndarray:
            out = np.zeros((size, *a.shape[1:]), dtype=a.dtype)
            out[: len(a)] = a
            return out

        self.alive, self.importance, self.stamp = grown(self.alive), grown(self.importance), grown(self.stamp)
        self.scope, self.key, self.embedded = grown(self.scope), grown(self.key), grown(self.embedded)
        self.distinct, self.distinct_in_scope = grown(self.distinct), grown(self.distinct_in_scope)
        if self.vectors is not None:
            self.vectors.grow(size)  # a block more: the vectors are not copied
        if self._codes is not None:
            self._codes = grown(self._codes)

    def _scope_code(self, scope: str) -> int:
        code = self._scope_codes.get(scope)
        if code is None:
            code = self._scope_codes[scope] = len(self.scopes)
            self.scopes.append(scope)
        return code

    def _set_vector(self, at: int, blob: bytes | None) -> None:
        if blob is None or len(blob) % 2:
            self.embedded[at] = False
            return
        vector = np.frombuffer(blob, dtype=np.float16).astype(np.float32)
        if self.vectors is None:
            self.vectors = Rows(len(vector))
            self.vectors.grow(len(self.alive))
        if len(vector) != self.vectors.dim:
            self.embedded[at] = False
            return
        self.vectors[at] = vector
        self.embedded[at] = True
        if self._codes is not None and self._centre is not None:
            self._codes[at] = _signs(vector[None, :], self._centre)[0]

    def _elect(self, texts: np.ndarray, *, bulk: bool = False) -> None:
        """Mark the latest record (then the most important; then the last stored) of each text among `texts`
        (every text with `bulk`) as its candidate, and of each text in each scope: one sort of their records."""
        n = len(self.ids)
        if not len(texts) or not n:
            return
        touched = np.arange(n) if bulk else np.flatnonzero(np.isin(self.key[:n], texts))
        self.distinct[touched] = self.distinct_in_scope[touched] = False
        live = touched[self.alive[touched]]
        key, scope = self.key[live], self.scope[live]
        for mask, within in ((self.distinct, None), (self.distinct_in_scope, scope)):
            columns = (live, self.importance[live], self.stamp[live]) + ((within,) if within is not None else ())
            order = np.lexsort((*columns, key))  # by text (and scope), then oldest to latest
            last = np.ones(len(order), dtype=bool)
            last[:-1] = key[order][1:] != key[order][:-1]
            if within is not None:
                last[:-1] |= within[order][1:] != within[order][:-1]
            mask[live[order[last]]] = True

    # ---- searching -----------------------------------------------------------------------------------------

    def search(
        self,
        query: str,
        vector: np.ndarray | None,
        k: int,
        weights: RecallWeights,
        scope: str | None = None,
        now: float | None = None,
    ) -> list[tuple[str, float]]:
        """The ids of the `k` best records for `query` (whose vector by this index's model is `vector`, None for
        keywords only), of `scope` when given, best first, with their scores."""
        with self.lock:
            n = len(self.ids)
            if not n or k <= 0:
                return []
            if scope is None:
                eligible = self.distinct[:n]
            else:
                code = self._scope_codes.get(scope)
                if code is None:
                    return []
                eligible = self.distinct_in_scope[:n] & (self.scope[:n] == code)
            if not eligible.any():
                return []
            positions, relevance = self._relevance(query, vector, eligible)
            size = max(weights.shortlist, 2 * k)
            if size < len(relevance):  # the `size` most relevant, then ordered: not a sort of every record
                top = np.argpartition(-relevance, size)[:size]
                order = top[np.lexsort((positions[top], -relevance[top]))]
            else:
                order = np.lexsort((positions, -relevance))
            now = time.time() if now is None else now
            chosen = positions[order]
            age_days = np.maximum(0.0, now - self.stamp[chosen]) / DAY
            recency = 0.5 ** (age_days / weights.half_life_days) if weights.half_life_days > 0 else 0.0 * age_days
            score = (
                weights.meaning * relevance[order]
                + weights.recency * recency
                + weights.importance * self.importance[chosen]
            )
            best = np.argsort(-score, kind="stable")[:k]
            return [(self.ids[int(chosen[i])], float(score[i])) for i in best]

    def _relevance(self, query: str, vector: np.ndarray | None, eligible: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions among the `eligible` and their relevance in [0, 1], scaled over every live record: all the
        eligible, or above EXACT records the candidates among them."""
        n = len(self.ids)
        bm25 = self.keywords.scores(query)
        live = np.flatnonzero(self.alive[:n])
        vectors = self.vectors if bool(self.embedded[:n].any()) else None
        if vectors is not None and vector is not None and len(live) > EXACT:
            return self._approximate(query, vectors, vector, bm25, live, eligible)
        if vectors is None or vector is None:
            scores = standardised(bm25[live])
        else:
            cosine = vectors.dot(vector, n)[live]
            embedded = self.embedded[live]
            if not embedded.all():
                dense_part = standardised(cosine[embedded]) if embedded.any() else cosine[:0]
                cosine = np.zeros(len(live))
                cosine[embedded] = dense_part  # a record with no vector yet: the crowd's mean, its keywords decide
            scores = fuse(bm25[live], cosine, self.keywords.coverage(query, bm25))
        low, high = float(scores.min()), float(scores.max())
        relevance = (scores - low) / (high - low) if high > low else np.zeros(len(scores))
        chosen = eligible[live]
        return live[chosen], relevance[chosen]

    def _approximate(
        self,
        query: str,
        vectors: Rows,
        vector: np.ndarray,
        bm25: np.ndarray,
        live: np.ndarray,
        eligible: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """`_relevance` above EXACT records (see the module docstring)."""
        n = len(self.ids)
        codes, centre = self._signs_now()
        pool = np.flatnonzero(eligible & self.embedded[:n])
        query_code = _signs(vector[None, :], centre)[0]
        distance = np.zeros(len(pool), dtype=np.int64)
        for word in range(codes.shape[1]):
            distance += _popcount(codes[pool, word] ^ query_code[word])
        near = pool[np.argpartition(distance, CANDIDATES)[:CANDIDATES]] if len(pool) > CANDIDATES else pool
        wanted = np.flatnonzero(eligible)
        best = wanted[np.argpartition(-bm25[wanted], KEYWORD_CANDIDATES)[:KEYWORD_CANDIDATES]]
        chosen = np.zeros(n, dtype=bool)  # their union, in order (np.union1d would sort, and import numpy.ma)
        chosen[near] = True
        chosen[best if len(wanted) > KEYWORD_CANDIDATES else wanted] = True
        candidates = np.flatnonzero(chosen)
        sample = self._sample_now(np.flatnonzero(self.alive[:n] & self.embedded[:n]))
        cosine = vectors.take(candidates) @ vector
        crowd = vectors.take(sample) @ vector
        mean, spread = float(crowd.mean()), float(crowd.std()) or 1.0
        live_bm25 = bm25[live]
        mean_bm25, spread_bm25 = float(live_bm25.mean()), float(live_bm25.std()) or 1.0
        w = dense_weight(self.keywords.coverage(query, bm25), separation(bm25))
        z_dense = np.where(self.embedded[candidates], (cosine - mean) / spread, 0.0)
        scores = (1.0 - w) * (bm25[candidates] - mean_bm25) / spread_bm25 + w * z_dense
        floor = (1.0 - w) * (bm25[sample] - mean_bm25) / spread_bm25 + w * (crowd - mean) / spread
        low, high = min(float(scores.min()), float(floor.min())), float(scores.max())
        return candidates, (scores - low) / (high - low) if high > low else np.zeros(len(scores))

    def _signs_now(self) -> tuple[np.ndarray, np.ndarray]:
        """The sign bits of every vector, made again about a new centre once the embedded records have doubled."""
        n = len(self.ids)
        count = int((self.alive[:n] & self.embedded[:n]).sum())
        if self._codes is None or self._centre is None or count > 2 * self._coded:
            vectors = self.vectors
            assert vectors is not None
            mask = self.alive[:n] & self.embedded[:n]
            total = np.zeros(vectors.dim, dtype=np.float64)
            for start, block in vectors.chunks(n):
                total += block[mask[start : start + len(block)]].sum(axis=0, dtype=np.float64)
            centre = (total / max(count, 1)).astype(np.float32)
            codes = np.zeros((len(self.alive), _words(vectors.dim)), dtype=np.uint64)
            for start, block in vectors.chunks(n):
                codes[start : start + len(block)] = _signs(block, centre)
            self._centre, self._codes, self._coded = centre, codes, count
            return codes, centre
        return self._codes, self._centre

    def signs(self) -> tuple[np.ndarray | None, np.ndarray | None, int]:
        """The sign bits (per position), their centre and the embedded records it was taken over: saved with the
        index (`chatagent.memories.snapshot`), so that a new process does not read every vector to make them; made
        now above EXACT records (where the search uses them)."""
        n = len(self.ids)
        if self.vectors is not None and len(self) > EXACT and bool((self.alive[:n] & self.embedded[:n]).any()):
            self._signs_now()
        return self._codes, self._centre, self._coded

    def set_signs(self, codes: np.ndarray, centre: np.ndarray, coded: int) -> None:
        """The saved sign bits of positions 0..len(codes)-1 (see `signs`)."""
        if codes.shape[1] != _words(len(centre)):
            raise ValueError("sign bits of another size")
        self._codes = np.zeros((len(self.alive), codes.shape[1]), dtype=np.uint64)
        self._codes[: len(codes)] = codes
        self._centre, self._coded = np.asarray(centre, dtype=np.float32), coded

    def _sample_now(self, embedded: np.ndarray) -> np.ndarray:
        """SAMPLE embedded records (drawn again after each change): the crowd the cosines are standardised over."""
        if self._sample is None:
            rng = np.random.default_rng(len(embedded))
            self._sample = embedded[rng.integers(0, len(embedded), min(SAMPLE, len(embedded)))]
        return self._sample


def _popcount(words: np.ndarray) -> np.ndarray:
    """The number of bits set in each 64-bit word (numpy 2's bitwise_count, else by bytes)."""
    count = getattr(np, "bitwise_count", None)
    if count is not None:
        return count(words)
    return _BYTE_BITS[words.view(np.uint8).reshape(len(words), 8)].sum(axis=1)


_BYTE_BITS = np.array([bin(i).count("1") for i in range(256)], dtype=np.int64)


def _words(dim: int) -> int:
    return (dim + 63) // 64


def _signs(vectors: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """The sign bits of `vectors - centre`, packed in 64-bit words (one row per vector)."""
    bits = np.packbits(vectors > centre, axis=1)
    padded = np.zeros((len(vectors), _words(vectors.shape[1]) * 8), dtype=np.uint8)
    padded[:, : bits.shape[1]] = bits
    return padded.view(np.uint64)

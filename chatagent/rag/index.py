"""A search index over short texts: BM25 keywords, joined by meaning (dense vectors) when an embedder is installed.

    from chatagent.rag import Index
    index = Index()
    index.add_texts(['a', 'b'], ['The cat sat on the mat.', 'Dogs chase cats.'], titles=['Cats', 'Dogs'])
    index.search('cat', top_k=5)      # [('a', 1.23), ('b', 0.98)]
    index.wait_for_vectors(60)        # True once every text is embedded: searches from then on are hybrid
    Index(embedder=None)              # keywords only

With an embedder (by default `chatagent.rag.embedders.default_embedder()`: multilingual-e5-small from the
`[embed]` extra), the first search starts embedding the texts on a low-priority background thread and answers
from BM25 at once; once every text has a vector, searches fuse both rankings (`chatagent.rag.fusion`).
`vector_cache` (a `VectorCache`) keeps vectors by text hash across processes; `to_bytes()` keeps them too.

Scoring is Okapi BM25 exactly as rank-bm25's BM25Okapi computes it (k1, b, and its floor for
negative idf at epsilon x the mean idf), vectorised with numpy: postings are stored per term with
their precomputed weights, so a query costs one scatter-add per query term. A title counts as
`title_weight` extra copies of its terms in the document, which lifts passages about what the query
names without letting a title alone outrank the text.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Callable, Hashable, Iterable, Sequence

from chatagent.rag.analysis import analyze, query_terms
from chatagent.utils.extras import missing_dependency

try:  # first: the modules below need it too
    import numpy as np
except ModuleNotFoundError as e:
    raise missing_dependency(e, "the search index (and so the Assistant's retrieval)") from None

from chatagent.rag.background import EmbeddingJob
from chatagent.rag.embedders import Embedder, cosines, default_embedder, query_vector
from chatagent.rag.fusion import coverage, fuse
from chatagent.rag.vector_cache import VectorCache

__all__ = ["Index"]

_LANGS = ("auto", "en", "zh")
MAX_TITLE_SHARERS = 3
COMMON_TERM_SHARE = 0.02
_DISAMBIGUATION = re.compile(r"\s*\([^()]*\)\s*$")  # "Mercury (planet)" -> "Mercury"


class Index:
    """BM25 index: `add_texts()` any number of times, then `search()`; the index is built on first search.

    `lang` is 'auto', 'en' or 'zh'. The analyser handles English and Chinese (and mixed text) in
    every mode: English words are stemmed with stop words removed, Chinese runs become character
    bigrams; 'zh' segments Chinese with jieba words instead (a dictionary load of about 1 s, once).

    `idf='lucene'` (default) uses ln(1 + (N - df + 0.5) / (df + 0.5)), which is never negative, so a
    term found in every document of a tiny collection still counts; `idf='okapi'` reproduces
    rank-bm25's BM25Okapi scores exactly.

    Titled documents get two boosts. A title counts as `title_weight` extra copies of its words in
    the document. And documents whose title is named in the text of the `link_depth` best hits are
    lifted by `link_boost` x (that hit's score): a passage that names another document's subject
    points at the second hop of a question (who directed the film shot in X: X's page names the film).
    """

    def __init__(
        self,
        lang: str = "auto",
        *,
        k1: float = 1.2,
        b: float = 0.75,
        idf: str = "lucene",
        epsilon: float = 0.25,
        title_weight: int = 2,
        link_depth: int = 3,
        link_boost: float = 0.3,
        analyzer: Callable[[str], list[str]] | None = None,
        embedder: Embedder | str | None = "default",
        vector_cache: VectorCache | None = None,
    ) -> None:
        if lang not in _LANGS:
            raise ValueError(f"lang must be one of {_LANGS}, got {lang!r}")
        if idf not in ("lucene", "okapi"):
            raise ValueError("idf must be 'lucene' or 'okapi'")
        self.lang = lang
        self.k1 = k1
        self.b = b
        self.idf = idf
        self.epsilon = epsilon
        self.title_weight = title_weight
        self.link_depth = link_depth
        self.link_boost = link_boost
        if analyzer is None:
            analyzer = _jieba_analyzer() if lang == "zh" else analyze
        self._analyze = analyzer
        self._ids: list[Hashable] = []
        self._vocab: dict[str, int] = {}
        self._text_terms: list[np.ndarray] = []  # per document: term ids of its text, in order
        self._title_terms: list[tuple[int, ...]] = []  # per document: term ids of its title ('' -> ())
        self._built: _Postings | None = None
        self._titles_by_first: dict[int, list[tuple[tuple[int, ...], int]]] | None = None
        self._frozen = False  # loaded by from_bytes: searchable, not extensible
        self._term_names: list[str] | None = None  # term id -> term, made when first needed
        if embedder == "default":
            embedder = default_embedder()
        elif isinstance(embedder, str):
            raise ValueError(f"embedder must be an Embedder, None or 'default', not {embedder!r}")
        self.embedder: Embedder | None = embedder
        self.vector_cache = vector_cache
        self._texts: list[str] | None = []  # what to embed; None once a document was added as terms only
        self._job: EmbeddingJob | None = None
        self._vectors: np.ndarray | None = None  # (documents, dim) once every document has one

    def __len__(self) -> int:
        return len(self._ids)

    def add_texts(
        self, ids: Sequence[Hashable], texts: Sequence[str], titles: Sequence[str | None] | None = None
    ) -> None:
        """Add documents: `ids[i]` names `texts[i]`, optionally titled `titles[i]`."""
        if len(ids) != len(texts) or (titles is not None and len(titles) != len(texts)):
            raise ValueError("ids, texts and titles must have the same length")
        analyze_text = self._analyze
        self._add(
            ids,
            (analyze_text(t) for t in texts),
            (analyze_text(_DISAMBIGUATION.sub("", t)) if t else [] for t in titles) if titles is not None else None,
        )
        if self._texts is not None:  # a title is embedded with its text: it says what the passage is about
            named = titles or [None] * len(texts)
            self._texts.extend(f"{title}\n{text}" if title else text for text, title in zip(texts, named, strict=True))

    def add_terms(
        self, ids: Sequence[Hashable], docs: Iterable[list[str]], titles: Iterable[list[str]] | None = None
    ) -> None:
        """Add documents already analysed into terms (callers that cache analysis use this); with no text to
        embed, the index then searches by keywords only."""
        self._add(ids, docs, titles)
        self._texts = None

    def _add(self, ids: Sequence[Hashable], docs: Iterable[list[str]], titles: Iterable[list[str]] | None) -> None:
        self._require_mutable()
        before = len(self._text_terms)
        title_iter = iter(titles) if titles is not None else None
        for terms in docs:
            self._text_terms.append(self._term_ids(terms))
            title = next(title_iter, []) if title_iter is not None else []
            self._title_terms.append(tuple(self._term_ids(title).tolist()))
        if len(self._text_terms) - before != len(ids):
            del self._text_terms[before:]
            del self._title_terms[before:]
            raise ValueError("ids and docs must have the same length")
        self._ids.extend(ids)
        self._built = None
        self._titles_by_first = None
        self._job = None
        self._vectors = None

    def analyze(self, text: str) -> list[str]:
        """The terms this index makes of `text`."""
        return self._analyze(text)

    def query_terms(self, query: str) -> list[str]:
        """The terms searched for `query`: its own, and with the default analyser the other spellings of its
        English compounds that the index holds (see `chatagent.rag.analysis.query_terms`)."""
        if self._analyze is analyze:
            return query_terms(query, self._vocab)
        return self._analyze(query)

    def search(self, query: str, top_k: int = 10, *, vector: np.ndarray | None = None) -> list[tuple[Hashable, float]]:
        """The `top_k` best documents for `query` as (id, score), best first.

        By keywords alone (documents matching no term are out) until every document has a vector; then by
        keywords and meaning fused (every document is a candidate). The first search starts the embedding.
        `vector`: the query's vector by this index's embedder, when the caller embedded it already."""
        if top_k <= 0 or not self._ids:
            return []
        scores, matched = self._bm25(query)
        vectors = self._dense_vectors()
        if vectors is not None:  # every document is a candidate; the links follow the best hits of both sides
            if vector is None:
                vector = query_vector(self.embedder, query)  # type: ignore[arg-type]
            scores = fuse(scores, cosines(vectors, vector), self.coverage(query, scores))
            matched = np.ones(len(self._ids), dtype=bool)
        if self.link_depth > 0 and self.link_boost > 0 and matched.any():
            self._add_links(scores, matched)
        candidates = np.flatnonzero(matched)
        if len(candidates) > top_k:
            part = np.argpartition(-scores[candidates], top_k - 1)[:top_k]
            candidates = candidates[part]
        order = candidates[np.lexsort((candidates, -scores[candidates]))]
        ids = self._ids
        return [(ids[i], float(scores[i])) for i in order]

    def scores(self, query: str) -> np.ndarray:
        """The plain BM25 score of every document for `query` (no link boost), in the order they were added."""
        return self._bm25(query)[0]

    def term_weights(self, query: str) -> dict[str, float]:
        """Each term searched for `query` with its idf here (Lucene's, whatever `idf`): how much finding it says. A
        term no document holds weighs as the rarest would (`chatagent.rag.highlight` weighs sentences by these)."""
        built = self._build()
        n_docs = len(self._ids)
        rarest = float(np.log1p((n_docs + 0.5) / 1.5))
        out: dict[str, float] = {}
        for term in self.query_terms(query):
            t = self._vocab.get(term)
            df = float(built.indptr[t + 1] - built.indptr[t]) if t is not None and t < len(built.indptr) - 1 else 0.0
            out[term] = float(np.log1p((n_docs - df + 0.5) / (df + 0.5))) if df else rarest
        return out

    def coverage(self, query: str, bm25: np.ndarray) -> float:
        """The share of `query`'s words found in the document `bm25` (plain scores) ranks first, text or title
        (`chatagent.rag.fusion.coverage`): how well the query's own words find something (0 when none do)."""
        if not len(bm25) or float(bm25.max()) <= 0:
            return 0.0
        best = int(np.argmax(bm25))
        if self._term_names is None or len(self._term_names) != len(self._vocab):
            self._term_names = list(self._vocab)  # id -> term (dicts keep insertion order)
        names = self._term_names
        doc = {names[t] for t in self._text_terms[best].tolist()} | {names[t] for t in self._title_terms[best]}
        return coverage(self._analyze(query), doc)

    def dense_scores(self, query: str, *, vector: np.ndarray | None = None) -> np.ndarray | None:
        """The cosine of `query` (or of its `vector`) with every document, in the order they were added; None until
        all are embedded."""
        vectors = self._dense_vectors()
        if vectors is None:
            return None
        return cosines(vectors, vector if vector is not None else query_vector(self.embedder, query))  # type: ignore[arg-type]

    # ---- the dense side -------------------------------------------------------------------------------------

    @property
    def dense_ready(self) -> bool:
        """Whether searches are hybrid now (every document has a vector)."""
        return self._dense_vectors() is not None

    @property
    def embedding_progress(self) -> tuple[int, int]:
        """(documents embedded, documents) of the embedding under way; (0, 0) without an embedder or texts."""
        if self._vectors is not None:
            return len(self._ids), len(self._ids)
        job = self._job
        return (job.done, job.total) if job is not None else (0, len(self._ids) if self._can_embed() else 0)

    @property
    def embedding_error(self) -> str | None:
        """Why the embedding failed (searches then stay on keywords), or None."""
        return self._job.error if self._job is not None else None

    def start_embedding(self) -> EmbeddingJob | None:
        """Take the vectors the cache has, queue the rest on the background thread; None if nothing can be
        embedded (no embedder, or documents added as terms only). Searching calls this."""
        if not self._can_embed() or self._vectors is not None:
            return None
        job = self._job
        if job is None:
            assert self.embedder is not None and self._texts is not None
            job = self._job = EmbeddingJob(self.embedder, self._texts, self.vector_cache)
        return job.start()

    def wait_for_vectors(self, timeout: float | None = None) -> bool:
        """Start the embedding if needed and wait for it; True once searches are hybrid."""
        job = self.start_embedding()
        if job is not None:
            job.wait(timeout)
        return self.dense_ready

    def embed_now(self) -> bool:
        """Embed what is missing on the calling thread (at its priority); True once searches are hybrid."""
        job = self.start_embedding()
        if job is not None:
            job.run_now()
        return self.dense_ready

    def _can_embed(self) -> bool:
        return self.embedder is not None and self._texts is not None and len(self._texts) == len(self._ids) > 0

    def _dense_vectors(self) -> np.ndarray | None:
        if self._vectors is None and self._can_embed():
            job = self.start_embedding()
            if job is not None and job.ready.is_set() and job.vectors is not None:
                self._vectors = job.vectors
        return self._vectors

    # ---- saving -------------------------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """The index, built, as bytes for a disk cache (numpy arrays and JSON; ids must be str or int): its
        texts too, and its vectors (float16) once they are all computed."""
        built = self._build()
        meta = {
            "v": 4,
            "params": [self.lang, self.k1, self.b, self.idf, self.epsilon, self.title_weight],
            "link": [self.link_depth, self.link_boost],
            "ids": self._ids,
            "vocab": list(self._vocab),  # in id order: dicts keep insertion order
            "texts": self._texts,
            "embedder": self.embedder.name if self._vectors is not None and self.embedder is not None else None,
        }
        titles = self._title_terms
        vectors = self._vectors if meta["embedder"] else np.zeros((0, 0))
        buffer = io.BytesIO()
        np.savez(
            buffer,
            meta=np.frombuffer(json.dumps(meta, ensure_ascii=False).encode("utf-8"), dtype=np.uint8),
            indptr=built.indptr,
            docs=built.docs,
            weights=built.weights,
            text_terms=np.concatenate(self._text_terms) if self._text_terms else np.zeros(0, np.int32),
            text_lengths=np.fromiter((len(t) for t in self._text_terms), dtype=np.int64, count=len(self._text_terms)),
            title_terms=np.fromiter((t for title in titles for t in title), dtype=np.int32),
            title_lengths=np.fromiter((len(t) for t in titles), dtype=np.int64, count=len(titles)),
            vectors=np.asarray(vectors, dtype=np.float16),
        )
        return buffer.getvalue()

    @classmethod
    def from_bytes(
        cls, data: bytes, *, embedder: Embedder | str | None = "default", vector_cache: VectorCache | None = None
    ) -> Index:
        """An index saved by `to_bytes`; it can be searched but not added to. Raise ValueError if unreadable.

        Its saved vectors are used when `embedder` is the one that made them; else its texts are embedded anew
        (through `vector_cache` when given)."""
        try:
            arrays = np.load(io.BytesIO(data), allow_pickle=False)
            meta = json.loads(arrays["meta"].tobytes().decode("utf-8"))
            if meta.get("v") != 4:
                raise ValueError("unknown index format version")
            lang, k1, b, idf, epsilon, title_weight = meta["params"]
            link_depth, link_boost = meta["link"]
            index = cls(
                lang, k1=k1, b=b, idf=idf, epsilon=epsilon, title_weight=title_weight, link_depth=link_depth,
                link_boost=link_boost, embedder=embedder, vector_cache=vector_cache,
            )  # fmt: skip
            index._ids = list(meta["ids"])
            index._vocab = {term: i for i, term in enumerate(meta["vocab"])}
            index._built = _Postings(arrays["indptr"], arrays["docs"], arrays["weights"])
            index._text_terms = _split(arrays["text_terms"], arrays["text_lengths"])
            index._title_terms = [tuple(t.tolist()) for t in _split(arrays["title_terms"], arrays["title_lengths"])]
            index._texts = meta["texts"]
            if meta["embedder"] and index.embedder is not None and meta["embedder"] == index.embedder.name:
                index._vectors = arrays["vectors"].astype(np.float32)
        except (OSError, KeyError, TypeError, ValueError, zipfile.BadZipFile) as e:
            raise ValueError(f"not a saved index: {e}") from e
        sizes = {len(index._text_terms), len(index._title_terms), len(index._ids)}
        if len(sizes) != 1 or (index._texts is not None and len(index._texts) != len(index._ids)):
            raise ValueError("not a saved index: inconsistent sizes")
        if index._vectors is not None and len(index._vectors) != len(index._ids):
            raise ValueError("not a saved index: inconsistent sizes")
        index._frozen = True
        return index

    def _require_mutable(self) -> None:
        if self._frozen:
            raise RuntimeError("an index loaded from bytes is read-only; build a new one to add documents")

    def _term_ids(self, terms: list[str]) -> np.ndarray:
        vocab = self._vocab
        setdefault = vocab.setdefault
        return np.fromiter((setdefault(t, len(vocab)) for t in terms), dtype=np.int32, count=len(terms))

    def _bm25(self, query: str) -> tuple[np.ndarray, np.ndarray]:
        built = self._build()
        n_docs = len(self._ids)
        scores = np.zeros(n_docs, dtype=np.float64)
        matched = np.zeros(n_docs, dtype=bool)
        vocab = self._vocab
        n_terms = len(built.indptr) - 1
        for term in self.query_terms(query):
            t = vocab.get(term)
            if t is None or t >= n_terms:
                continue
            start, end = built.indptr[t], built.indptr[t + 1]
            docs = built.docs[start:end]
            scores[docs] += built.weights[start:end]
            matched[docs] = True
        return scores, matched

    def _add_links(self, scores: np.ndarray, matched: np.ndarray) -> None:
        """Lift documents whose title appears in the text of the best hits (see the class docstring)."""
        titles = self._title_index()
        if not titles:
            return
        candidates = np.flatnonzero(matched)
        depth = min(self.link_depth, len(candidates))
        top = candidates[np.argsort(-scores[candidates], kind="stable")[:depth]]
        best = float(scores[top[0]])
        if best <= 0:
            return
        boost: dict[int, float] = {}
        for hit in top.tolist():
            weight = float(scores[hit]) / best
            terms = self._text_terms[hit].tolist()
            for i, term in enumerate(terms):
                for phrase, doc in titles.get(term, ()):
                    if doc != hit and tuple(terms[i : i + len(phrase)]) == phrase and boost.get(doc, 0.0) < weight:
                        boost[doc] = weight
        if boost:
            docs = np.fromiter(boost.keys(), dtype=np.int64, count=len(boost))
            scores[docs] += self.link_boost * best * np.fromiter(boost.values(), dtype=np.float64, count=len(boost))
            matched[docs] = True

    def _title_index(self) -> dict[int, list[tuple[tuple[int, ...], int]]]:
        """Title phrase's first term -> [(phrase, doc)], for titles specific enough to be a link.

        A title shared by more than MAX_TITLE_SHARERS documents ("Introduction") names none of them, and
        a one-word title found in more than COMMON_TERM_SHARE of the documents ("Water") is an ordinary word.
        """
        if self._titles_by_first is None:
            built = self._build()
            n_docs = len(self._ids)
            sharers: dict[tuple[int, ...], int] = {}
            for phrase in self._title_terms:
                if phrase:
                    sharers[phrase] = sharers.get(phrase, 0) + 1
            common = max(20, int(COMMON_TERM_SHARE * n_docs))
            by_first: dict[int, list[tuple[tuple[int, ...], int]]] = {}
            for doc, phrase in enumerate(self._title_terms):
                if not phrase or sharers[phrase] > MAX_TITLE_SHARERS:
                    continue
                if len(phrase) == 1 and built.indptr[phrase[0] + 1] - built.indptr[phrase[0]] > common:
                    continue
                by_first.setdefault(phrase[0], []).append((phrase, doc))
            self._titles_by_first = by_first
        return self._titles_by_first

    def _build(self) -> _Postings:
        if self._built is not None:
            return self._built
        n_docs = len(self._text_terms)
        n_terms = len(self._vocab)
        weight = self.title_weight
        docs_terms = [
            np.concatenate([text] + [np.asarray(title, dtype=np.int32)] * weight) if title and weight > 0 else text
            for text, title in zip(self._text_terms, self._title_terms, strict=True)
        ]
        lengths = np.fromiter((len(d) for d in docs_terms), dtype=np.float64, count=n_docs)
        if n_docs == 0 or n_terms == 0 or not lengths.any():
            self._built = _Postings(np.zeros(n_terms + 1, np.int64), np.zeros(0, np.int32), np.zeros(0))
            return self._built
        # One (term, doc) key per occurrence; unique keys give the postings and their term frequencies.
        doc_of = np.repeat(np.arange(n_docs, dtype=np.int64), lengths.astype(np.int64))
        terms = np.concatenate(docs_terms).astype(np.int64)
        keys, tf = np.unique(terms * n_docs + doc_of, return_counts=True)
        post_terms = keys // n_docs
        post_docs = (keys % n_docs).astype(np.int32)
        df = np.bincount(post_terms, minlength=n_terms)
        indptr = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(df, out=indptr[1:])
        if self.idf == "okapi":  # rank-bm25: ln(N - df + 0.5) - ln(df + 0.5), negatives -> epsilon x mean idf
            idf = np.log(n_docs - df + 0.5) - np.log(df + 0.5)
            idf = np.where(idf < 0, self.epsilon * (float(idf.sum()) / n_terms), idf)
        else:
            idf = np.log1p((n_docs - df + 0.5) / (df + 0.5))
        avgdl = float(lengths.sum()) / n_docs
        norm = self.k1 * (1 - self.b + self.b * lengths / avgdl)
        tf = tf.astype(np.float64)
        weights = idf[post_terms] * (tf * (self.k1 + 1) / (tf + norm[post_docs]))
        self._built = _Postings(indptr, post_docs, weights)
        return self._built


class _Postings:
    """Per term t: documents docs[indptr[t]:indptr[t+1]] with their BM25 weights."""

    __slots__ = ("indptr", "docs", "weights")

    def __init__(self, indptr: np.ndarray, docs: np.ndarray, weights: np.ndarray) -> None:
        self.indptr = indptr
        self.docs = docs
        self.weights = weights


def _jieba_analyzer() -> Callable[[str], list[str]]:
    from chatagent.rag.analysis import jieba_analyze  # jieba: for Chinese text only

    return jieba_analyze


def _split(flat: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    return [flat[offsets[i] : offsets[i + 1]] for i in range(len(lengths))]

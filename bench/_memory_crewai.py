"""CrewAI's side of bench/memory.py (see bench/_memory_peer.py): CrewAI's unified `Memory` on its default LanceDB
storage (in the run's temporary directory), the loopback e5 server as its embedder, a turn stored by
`remember(text, scope, categories=[], importance=0.5)` (its fast path: no field inference), recall by
`recall(query, scope, depth="shallow")` (embedding, vector search, CrewAI's composite score: semantic 0.5,
recency 0.3, importance 0.2).

Offline there is no LLM: `depth="deep"` (the LLM plans the recall) cannot run, and when a new turn is as similar to
a stored one as consolidation_threshold (0.85; a repeated turn is), CrewAI asks its LLM whether to merge them; the
LLM here is the loopback server, which has no chat model, so the call fails at once and CrewAI inserts the turn (its
documented fallback). The quality set's turns are written with their sessions' dates (`storage.save`, vectors from
the same embedder), so that recency means for CrewAI what it means for chatagent."""

from __future__ import annotations

from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from _memory_peer import PASSAGE_MODEL, QUERY_MODEL, Turn
from crewai import LLM
from crewai.memory.types import MemoryRecord, embed_texts
from crewai.memory.unified_memory import Memory
from openai import OpenAI

NOTES = "recall depth='shallow' (deep recall and consolidation need an LLM: none offline)"


def version() -> str:
    return f"crewai {metadata.version('crewai')} Memory (LanceDB, recall depth=shallow)"


class E5:
    """The embedder callable CrewAI takes; `model` says whether texts are questions or passages (e5 wants to know)."""

    def __init__(self, url: str) -> None:
        self.client = OpenAI(base_url=url, api_key="bench", max_retries=0)
        self.model = PASSAGE_MODEL

    def __call__(self, input: list[str]) -> list[list[float]]:
        data = self.client.embeddings.create(model=self.model, input=input, encoding_format="float").data
        return [d.embedding for d in sorted(data, key=lambda d: d.index)]


class Peer:
    def __init__(self, root: Path, url: str, durable: bool = True) -> None:  # LanceDB on disk either way
        self.embedder = E5(url)
        llm = LLM(model="openai/none", base_url=url, api_key="bench", max_retries=0)
        self.memory = Memory(llm=llm, storage=str(root / "lancedb"), embedder=self.embedder)

    def ingest(self, user: str, turns: list[Turn]) -> int:
        self.embedder.model = PASSAGE_MODEL
        for t in turns:
            meta = {"session": t.session, "message": t.message}
            self.memory.remember(t.text, scope=f"/{user}", categories=[], metadata=meta, importance=0.5)
        return len(turns)

    def ingest_dated(self, user: str, turns: list[Turn]) -> None:
        """The turns stored with their own dates (remember() dates a record now)."""
        self.embedder.model = PASSAGE_MODEL
        vectors = embed_texts(self.embedder, [t.text for t in turns])
        self.fill(
            user, [t.text for t in turns], vectors, [t.at for t in turns], [(t.session, t.message) for t in turns]
        )

    def recall(self, user: str, query: str, k: int) -> list[tuple[int, int]]:
        self.embedder.model = QUERY_MODEL
        hits = self.memory.recall(query, scope=f"/{user}", limit=k, depth="shallow")
        return [(int(m.record.metadata["session"]), int(m.record.metadata["message"])) for m in hits]

    def fill(self, user: str, texts: list[str], vectors: Any, ats: list[float],
             where: list[tuple[int, int]] | None = None) -> None:  # fmt: skip
        """Records with the given vectors written to CrewAI's storage as remember() writes them, dated `ats`."""
        where = where or [(-1, i) for i in range(len(texts))]
        records = [
            MemoryRecord(content=text, scope=f"/{user}", categories=[], metadata={"session": s, "message": m},
                         importance=0.5, created_at=datetime.utcfromtimestamp(at),
                         last_accessed=datetime.utcfromtimestamp(at), embedding=[float(x) for x in v])
            for text, v, at, (s, m) in zip(texts, vectors, ats, where, strict=True)
        ]  # fmt: skip
        self.memory._storage.save(records)

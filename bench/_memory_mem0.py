"""mem0's side of bench/memory.py (see bench/_memory_peer.py): mem0's open-source `Memory` with a local Qdrant
(qdrant-client's embedded mode, on disk in the run's temporary directory, as mem0's default config has it;
in memory for the latency stores), the loopback e5 server as its OpenAI embedder,
turns stored as they were said (`add(..., infer=False)`: no LLM), recall by `search(query, filters={"user_id"})`.

Offline, mem0 2.x searches by meaning only: its keyword side (BM25 sparse vectors) needs fastembed's Qdrant/bm25
files from the Hugging Face hub and its entity boost spaCy's en_core_web_sm (not on PyPI); without them it logs so
and ranks by the vectors alone. The LLM it is configured with is the loopback server, which has no chat model:
nothing here calls it (a call would fail the run)."""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from _memory_peer import PASSAGE_MODEL, QUERY_MODEL, Turn
from mem0 import Memory
from qdrant_client import QdrantClient

NOTES = (
    "searches by meaning only offline (BM25 needs fastembed's hub files, entities spaCy's en_core_web_sm); "
    "latency stores in an in-memory Qdrant (its local on-disk mode writes about 40 points/s here)"
)


def version() -> str:
    return f"mem0ai {metadata.version('mem0ai')} (local Qdrant, infer=False)"


class Peer:
    def __init__(self, root: Path, url: str, durable: bool = True) -> None:
        root.mkdir(parents=True, exist_ok=True)
        store: dict[str, Any] = {"collection_name": "bench", "embedding_model_dims": 384}
        store.update({"path": str(root / "qdrant")} if durable else {"client": QdrantClient(":memory:")})
        config = {
            "embedder": {
                "provider": "openai",
                "config": {"model": PASSAGE_MODEL, "openai_base_url": url, "api_key": "bench", "embedding_dims": 384},
            },
            "vector_store": {
                "provider": "qdrant",
                "config": store,
            },
            "llm": {"provider": "openai", "config": {"model": "none", "openai_base_url": url, "api_key": "bench"}},
            "history_db_path": str(root / "history.db"),
        }
        self.memory = Memory.from_config(config)
        embedder = self.memory.embedding_model
        embed = embedder.embed

        def by_action(text: str, memory_action: str | None = None) -> list[float]:
            # e5 embeds questions and passages differently: mem0 says which by memory_action
            embedder.config.model = QUERY_MODEL if memory_action == "search" else PASSAGE_MODEL
            return embed(text, memory_action)

        embedder.embed = by_action

    def ingest(self, user: str, turns: list[Turn]) -> int:
        for t in turns:
            created = datetime.fromtimestamp(t.at, timezone.utc).isoformat()
            meta = {"session": t.session, "message": t.message, "created_at": created}
            self.memory.add([{"role": t.role, "content": t.text}], user_id=user, metadata=meta, infer=False)
        return len(turns)

    ingest_dated = ingest  # mem0 takes a record's date from its metadata's created_at

    def recall(self, user: str, query: str, k: int) -> list[tuple[int, int]]:
        hits = self.memory.search(query, top_k=k, filters={"user_id": user})["results"]
        return [(int(h["metadata"]["session"]), int(h["metadata"]["message"])) for h in hits]

    def fill(self, user: str, texts: list[str], vectors: Any, ats: list[float]) -> None:
        """Records with the given vectors written as mem0's add writes them (payload and all), its embedder skipped."""
        payloads = []
        for i, (text, at) in enumerate(zip(texts, ats, strict=True)):
            created = datetime.fromtimestamp(at, timezone.utc).isoformat()
            payloads.append({"data": text, "hash": hashlib.md5(text.encode()).hexdigest(), "created_at": created,
                             "updated_at": created, "text_lemmatized": text, "user_id": user, "role": "user",
                             "session": -1, "message": i})  # fmt: skip
        ids = [str(uuid.uuid4()) for _ in texts]
        self.memory.vector_store.insert(vectors=[list(map(float, v)) for v in vectors], payloads=payloads, ids=ids)

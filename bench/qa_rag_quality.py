"""Qwen-Agent's side of bench/rag_quality.py; runs in the Qwen-Agent venv (see bench/_qwen_agent.py).

    python qa_rag_quality.py --data DIR --sets hotpotqa,cmrc2018 [--rebuilt-queries 3]

Its keyword search as it ranks: each passage becomes a one-page document (title and text as two paragraphs)
cut by its DocParser.split_doc_to_chunk (500-token chunks, '[page: 1]' marker); chunks are tokenised by
its split_text_into_keywords (jieba for Chinese, its regex for English, its stop list, snowball stemming)
and scored by rank-bm25's BM25Okapi against parse_keyword(question); a passage ranks at its best chunk.
KeywordSearch.sort_by_scores does exactly this but rebuilds BM25 for every query; here the index is built
once (as BASELINE.md's "query (index built once)"), and `--rebuilt-queries` questions are also run through
sort_by_scores itself, timed ("as Qwen-Agent runs it") and checked to rank the same chunks.
Prints one JSON line: per set recall@1/5/10, MRR, chunking, index build and query times.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import qa_common
from _measure import RankingScore

qa_common.guard()

from qwen_agent.tools.doc_parser import DocParser, Record  # noqa: E402
from qwen_agent.tools.search_tools.keyword_search import (  # noqa: E402
    KeywordSearch,
    parse_keyword,
    split_text_into_keywords,
)
from qwen_agent.utils.tokenization_qwen import count_tokens  # noqa: E402
from rank_bm25 import BM25Okapi  # noqa: E402


def load(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def evaluate(name: str, data: Path, rebuilt_queries: int) -> dict:
    passages = load(data / name / "passages.jsonl")
    queries = load(data / name / "queries.jsonl")
    parser = DocParser()
    start = time.perf_counter()
    records = []
    for p in passages:
        paras = [x for x in (p.get("title") or "", p["text"]) if x.strip()]
        page = {"page_num": 1, "content": [{"text": x, "token": count_tokens(x)} for x in paras]}
        chunks = parser.split_doc_to_chunk([page], p["id"], title=p.get("title") or "")
        records.append(Record(url=p["id"], raw=chunks, title=p.get("title") or ""))
    chunking = time.perf_counter() - start
    all_chunks = [c for r in records for c in r.raw]
    start = time.perf_counter()
    bm25 = BM25Okapi([split_text_into_keywords(c.content) for c in all_chunks])
    build = time.perf_counter() - start
    keys = [(c.metadata["source"], c.metadata["chunk_id"]) for c in all_chunks]

    def ranked_chunks(question: str) -> list[tuple[str, int, float]]:
        scores = bm25.get_scores(parse_keyword(question))
        found = [(src, cid, score) for (src, cid), score in zip(keys, scores, strict=True)]
        found.sort(key=lambda item: item[2], reverse=True)  # as sort_by_scores: stable, best first
        return found

    score = RankingScore()
    start = time.perf_counter()
    for q in queries:
        ranked: list[str] = []
        for src, _, _ in ranked_chunks(q["question"]):
            if src not in ranked:
                ranked.append(src)
                if len(ranked) == 10:
                    break
        score.add(set(q["gold_ids"]), ranked)
    query_ms = (time.perf_counter() - start) * 1000 / len(queries)
    search = KeywordSearch()
    rebuilt = []
    for q in queries[:rebuilt_queries]:
        start = time.perf_counter()
        theirs = search.sort_by_scores(query=q["question"], docs=records)
        rebuilt.append(time.perf_counter() - start)
        mine = ranked_chunks(q["question"])
        assert [(s, c) for s, c, _ in theirs[:10]] == [(s, c) for s, c, _ in mine[:10]], q["question"]
    return {
        **score.summary(),
        "chunking_s": chunking,
        "build_s": build,
        "query_ms": query_ms,
        "rebuilt_query_s": min(rebuilt) if rebuilt else None,
        "chunks": len(all_chunks),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--sets", default="hotpotqa,cmrc2018")
    parser.add_argument("--rebuilt-queries", type=int, default=2)
    args = parser.parse_args()
    qa_common.emit({name: evaluate(name, args.data, args.rebuilt_queries) for name in args.sets.split(",")})


if __name__ == "__main__":
    main()

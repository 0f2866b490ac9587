"""How the fusion of keywords and meaning was chosen: its weight and rule swept on our own paraphrase sets.

    .venv/bin/python bench/rag_fusion.py [--sets paraphrase_en,paraphrase_zh]

For each base weight of the meaning side and each rule (`fixed`: that weight for every query; `coverage`: raised
towards 1 as the query's words go missing from BM25's best document, as chatagent.rag.fusion does), recall@1 and
MRR on bench/data/paraphrase_en.json and paraphrase_zh.json (ours: half the questions in the passages' words,
half in other words), beside BM25 alone and meaning alone. The held-out sets are not used here: bench/rag_quality.py
checks the chosen fusion on them. Vectors come from the bench cache (made by rag_quality.py when missing).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import rag_quality  # noqa: E402
from _venv import CACHE  # noqa: E402

from chatagent.rag.embedders import default_embedder  # noqa: E402
from chatagent.rag.fusion import DENSE_WEIGHT, fuse  # noqa: E402
from chatagent.rag.index import Index  # noqa: E402
from chatagent.rag.vector_cache import VectorCache  # noqa: E402

WEIGHTS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def ranks(index: Index, ids: list[str], question: str, vector: np.ndarray, w: float | None, rule: str) -> list[str]:
    bm25 = index.scores(question)
    cosine = index.dense_scores(question, vector=vector)
    assert cosine is not None
    if w is None:  # one side alone
        scores = bm25 if rule == "bm25" else cosine
    else:
        scores = fuse(bm25, cosine, index.coverage(question, bm25) if rule == "coverage" else None, base=w)
        index._add_links(scores, np.ones(len(scores), dtype=bool))  # as Index.search does after fusing
    return [ids[i] for i in np.argsort(-scores, kind="stable")[:10]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default=",".join(rag_quality.OWN_SETS))
    args = parser.parse_args()
    embedder = default_embedder()
    if embedder is None:
        print("rag_fusion: skipped, no embedder installed (pip install 'chatagent[embed]')")
        return
    cache = VectorCache(CACHE / "rag_quality_vectors.sqlite3")
    for name in args.sets.split(","):
        passages, queries = rag_quality.load_set(name, rag_quality.DEFAULT_DATA)
        index = Index(embedder=embedder, vector_cache=cache)
        ids = [p["id"] for p in passages]
        index.add_texts(ids, [p["text"] for p in passages], [p.get("title") for p in passages])
        index.embed_now()
        vectors = rag_quality.embedded_queries(embedder, cache, [q["question"] for q in queries])
        runs: list[tuple[str, float | None, str]] = [("bm25 alone", None, "bm25"), ("dense alone", None, "dense")]
        runs += [(f"{rule} w={w}", w, rule) for rule in ("fixed", "coverage") for w in WEIGHTS]
        for label, w, rule in runs:
            score = rag_quality.RankingScore()
            for q, v in zip(queries, vectors, strict=True):
                score.add(set(q["gold_ids"]), ranks(index, ids, q["question"], v, w, rule))
            s = score.summary()
            chosen = "   <- chatagent's fusion" if rule == "coverage" and w == DENSE_WEIGHT else ""
            print(f"{name} {label}: recall@1 {s['recall@1']:.3f}  mrr {s['mrr']:.3f}{chosen}")


if __name__ == "__main__":
    main()

"""How the fusion of keywords and meaning was chosen: its values swept on the dev half of every set.

    .venv/bin/python bench/rag_fusion.py [--sets hotpotqa,cmrc2018,paraphrase_en,paraphrase_zh,web_zh]

For each choice of chatagent.rag.fusion's values (the meaning side's weight when the keywords are sure and when
they are not, the coverage and the separation halfway between, and the rank BM25's best is compared with), MRR
and nDCG@10 of the hybrid on the *dev* questions of each set (bench/rag_quality.py `split_of`: half of the held-out
sets' questions by a hash of their id; our paraphrase sets by passage, odd-numbered passages' questions; our web
set by topic, odd-numbered topics), beside
BM25 alone and meaning alone on the same questions. The choice: the values whose hybrid beats both parts by the
widest margin on its worst dev set (the goal is to beat both everywhere), per language and for all four.
The test questions are not looked at here: bench/rag_quality.py reports them. Vectors come from the bench cache
(made by rag_quality.py when missing).
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
from chatagent.rag.fusion import (  # noqa: E402
    COVERED,
    MATCHED_WEIGHT,
    RUNNER_UP,
    SEPARATED,
    UNMATCHED_WEIGHT,
    fuse,
)
from chatagent.rag.index import Index  # noqa: E402
from chatagent.rag.vector_cache import VectorCache  # noqa: E402

CHOICES = [
    (m, u, c, g, k)
    for m in (0.2, 0.3, 0.4)
    for u in (0.9, 0.95, 1.0)
    for c in (0.5, 0.7, 0.9)
    for g in (0.2, 0.3, 0.4, 0.5)
    for k in (2, 3)
]
CHATAGENT = (MATCHED_WEIGHT, UNMATCHED_WEIGHT, COVERED, SEPARATED, RUNNER_UP)
LABEL = "matched {} unmatched {} covered {} separated {} runner_up {}"
LANGUAGES = {"en": ("hotpotqa", "paraphrase_en"), "zh": ("cmrc2018", "paraphrase_zh", "web_zh")}


def dev_rankings(name: str, embedder, cache: VectorCache) -> dict[tuple, list[tuple[set, list[str]]]]:
    """(gold, top 10) of every dev question of `name`, by bm25 alone, dense alone and each choice of values."""
    passages, queries = rag_quality.load_set(name, rag_quality.DEFAULT_DATA)
    queries = [q for q in queries if q["split"] == "dev"]
    index = Index(embedder=embedder, vector_cache=cache)
    ids = [p["id"] for p in passages]
    index.add_texts(ids, [p["text"] for p in passages], [p.get("title") for p in passages])
    index.embed_now()
    vectors = rag_quality.embedded_queries(embedder, cache, [q["question"] for q in queries])
    out: dict[tuple, list[tuple[set, list[str]]]] = {}

    def add(key: tuple, gold: set, scores: np.ndarray, matched: np.ndarray | None) -> None:
        if matched is not None and matched.any():
            index._add_links(scores, matched)  # as Index.search does
        out.setdefault(key, []).append((gold, [ids[i] for i in np.argsort(-scores, kind="stable")[:10]]))

    for q, v in zip(queries, vectors, strict=True):
        gold = set(q["gold_ids"])
        bm25 = index.scores(q["question"])
        cosine = index.dense_scores(q["question"], vector=v)
        assert cosine is not None
        coverage = index.coverage(q["question"], bm25)
        add(("bm25",), gold, bm25.copy(), bm25 > 0)
        add(("dense",), gold, cosine, None)
        everything = np.ones(len(ids), dtype=bool)
        for key in CHOICES:
            matched, unmatched, covered, separated, runner_up = key
            fused = fuse(bm25, cosine, coverage, runner_up, matched=matched, unmatched=unmatched, covered=covered,
                         separated=separated)  # fmt: skip
            add(key, gold, fused, everything.copy())
    return out


def summary(rankings: list[tuple[set, list[str]]]) -> dict[str, float]:
    score = rag_quality.RankingScore()
    for gold, ranked in rankings:
        score.add(gold, ranked)
    return score.summary()


def margin(results: dict[tuple, dict[str, float]], key: tuple) -> float:
    """How far the hybrid `key` is above the better of its parts, on MRR and nDCG@10, whichever is smaller."""
    return min(results[key][m] - max(results[("bm25",)][m], results[("dense",)][m]) for m in ("mrr", "ndcg@10"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="hotpotqa,cmrc2018," + ",".join(rag_quality.OWN_SETS))
    parser.add_argument("--all", action="store_true", help="print every choice on every set (else the best ten)")
    args = parser.parse_args()
    embedder = default_embedder()
    if embedder is None:
        print("rag_fusion: skipped, no embedder installed (pip install 'chatagent[embed]')")
        return
    cache = VectorCache(CACHE / "rag_quality_vectors.sqlite3")
    names = args.sets.split(",")
    results = {n: {k: summary(r) for k, r in dev_rankings(n, embedder, cache).items()} for n in names}
    overall = sorted(CHOICES, key=lambda key: -min(margin(results[n], key) for n in names))
    shown = CHOICES if args.all else list(dict.fromkeys([CHATAGENT, *overall[:10]]))
    for name, r in results.items():
        for key in [("bm25",), ("dense",), *shown]:
            label = LABEL.format(*key) if len(key) > 1 else key[0]
            chosen = "   <- chatagent's fusion" if key == CHATAGENT else ""
            extra = f"   margin over both {margin(r, key):+.4f}" if len(key) > 1 else ""
            print(f"{name} dev {label}: mrr {r[key]['mrr']:.4f}  ndcg@10 {r[key]['ndcg@10']:.4f}{extra}{chosen}")
    groups = {lang: [n for n in sets if n in results] for lang, sets in LANGUAGES.items()} | {"all": names}
    for group, sets in groups.items():
        if not sets:
            continue
        best = max(CHOICES, key=lambda key: min(margin(results[n], key) for n in sets))
        worst = min(margin(results[n], best) for n in sets)
        print(f"rag_fusion best on dev ({group}: {', '.join(sets)}): {LABEL.format(*best)} "
              f"(worst-set margin over both parts {worst:+.4f})")  # fmt: skip
    print("rag_fusion chatagent: " + LABEL.format(*CHATAGENT))


if __name__ == "__main__":
    main()

"""Timing and scoring helpers shared by the benchmarks (standard library only: the Qwen-Agent side imports it too)."""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable
from typing import Any


def best(fn: Callable[[], object], repeats: int, clock: Callable[[], float] = time.perf_counter) -> float:
    """The lowest time of `repeats` calls of `fn`, in seconds, on `clock` (wall clock by default)."""
    times = []
    for _ in range(repeats):
        gc.collect()
        start = clock()
        fn()
        times.append(clock() - start)
    return min(times)


def lookup_functions(n: int, calls: list[str] | None = None) -> list[Callable[..., str]]:
    """The tool-loop benchmarks' tools: n typed functions `lookup_0` ... that return "ok" (appending their query to
    `calls` if given), with a docstring every framework can read."""
    functions = []
    for i in range(n):

        def fn(query: str, limit: int = 5, exact: bool = False) -> str:
            """Look something up.

            Args:
                query: What to look for.
                limit: How many results.
                exact: Exact match only.
            """
            if calls is not None:
                calls.append(query)
            return "ok"

        fn.__name__ = fn.__qualname__ = f"lookup_{i}"
        functions.append(fn)
    return functions


def show(name: str, value: str) -> None:
    """One `name: value` line of benchmark output."""
    print(f"{name}: {value}", flush=True)


def seconds_to_first_text(bot: Any, question: str) -> float:
    """Seconds from `bot.run([question])` to the first yield with answer text; the run is then closed."""
    start = time.perf_counter()
    run = bot.run([{"role": "user", "content": question}])
    for rsp in run:
        if rsp and rsp[-1].get("content"):
            break
    elapsed = time.perf_counter() - start
    run.close()
    return elapsed


class RankingScore:
    """Recall@1/5/10, MRR and nDCG@10 over queries, each ranking scored against its gold ids. nDCG@10 (binary gain,
    1/log2(rank + 1), over the best possible) still separates rankings where recall@5 saturates."""

    def __init__(self) -> None:
        self.recall = {1: 0.0, 5: 0.0, 10: 0.0}
        self.mrr = 0.0
        self.ndcg = 0.0
        self.n = 0
        self.reciprocal_ranks: list[float] = []  # per query, in order: for paired_interval

    def add(self, gold: set[str], ranked: list[str]) -> None:
        self.n += 1
        for k in self.recall:
            self.recall[k] += len(gold.intersection(ranked[:k])) / len(gold)
        self.reciprocal_ranks.append(next((1 / rank for rank, doc_id in enumerate(ranked, 1) if doc_id in gold), 0.0))
        self.mrr += self.reciprocal_ranks[-1]
        gained = sum(1 / math.log2(rank + 1) for rank, doc_id in enumerate(ranked[:10], 1) if doc_id in gold)
        self.ndcg += gained / sum(1 / math.log2(rank + 1) for rank in range(1, min(len(gold), 10) + 1))

    def summary(self) -> dict[str, float]:
        n = self.n or 1
        return {f"recall@{k}": v / n for k, v in self.recall.items()} | {"mrr": self.mrr / n, "ndcg@10": self.ndcg / n}


def paired_interval(a: RankingScore, b: RankingScore, rounds: int = 4000, seed: int = 0) -> tuple[float, float]:
    """The 95 % paired-bootstrap interval of MRR(a) - MRR(b), both scored on the same queries in the same order."""
    import numpy as np

    diff = np.asarray(a.reciprocal_ranks) - np.asarray(b.reciprocal_ranks)
    picks = np.random.default_rng(seed).integers(0, len(diff), size=(rounds, len(diff)))
    low, high = np.quantile(diff[picks].mean(axis=1), [0.025, 0.975])
    return float(low), float(high)


def timed_answer(bot: Any, messages: list[dict]) -> tuple[float, float, list[dict]]:
    """(seconds to the first answer text, seconds to the end, the final response) of `bot.run(messages)`."""
    start = time.perf_counter()
    first = None
    response: list[dict] = []
    for rsp in bot.run(messages):
        response = rsp
        if first is None and rsp and rsp[-1].get("role") == "assistant" and rsp[-1].get("content"):
            first = time.perf_counter() - start
    total = time.perf_counter() - start
    return (first if first is not None else total), total, list(response)


def distinct_ngram_ratio(text: str, n: int = 4) -> float:
    """Distinct word n-grams over all word n-grams of `text` (1.0 for a text too short to have one): a loop detector,
    a model repeating itself scores low."""
    words = text.split()
    grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 1.0

"""`KnowledgeConfig`: how many passages a query gives (`results_limit`) and how good they must be
(`score_threshold`, on chatagent's scores scaled so the best passage of the collection's scores is 1)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class KnowledgeConfig:
    results_limit: int = 3
    score_threshold: float = 0.35

    def __post_init__(self) -> None:
        if not isinstance(self.results_limit, int) or self.results_limit < 1:
            raise ValueError("results_limit must be a positive integer")
        if not 0.0 <= float(self.score_threshold) <= 1.0:
            raise ValueError("score_threshold must be between 0 and 1")


__all__ = ["KnowledgeConfig"]

"""`UsageMetrics`: CrewAI's token counts (`crewai.types.usage_metrics`), from chatagent's Usage."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class UsageMetrics(BaseModel):
    total_tokens: int = 0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    completion_tokens: int = 0
    successful_requests: int = 0

    def add_usage_metrics(self, other: UsageMetrics) -> None:
        for name in type(self).model_fields:
            setattr(self, name, getattr(self, name) + getattr(other, name))


def usage_metrics(usage: Any) -> UsageMetrics:
    """UsageMetrics of a chatagent Usage (None: zeros)."""
    if usage is None:
        return UsageMetrics()
    return UsageMetrics(total_tokens=usage.total_tokens, prompt_tokens=usage.prompt_tokens,
                        completion_tokens=usage.completion_tokens, successful_requests=usage.calls)  # fmt: skip


__all__ = ["UsageMetrics", "usage_metrics"]

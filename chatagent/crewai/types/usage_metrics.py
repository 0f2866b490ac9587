"""`crewai.types.usage_metrics.UsageMetrics`."""

from chatagent.crewai.usage import UsageMetrics

__all__ = ["UsageMetrics"]

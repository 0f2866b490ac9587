"""`OutputFormat`: how a task's answer is kept (TaskOutput.output_format compares equal to these)."""

from __future__ import annotations

from enum import Enum


class OutputFormat(str, Enum):
    JSON = "json"
    PYDANTIC = "pydantic"
    RAW = "raw"


__all__ = ["OutputFormat"]

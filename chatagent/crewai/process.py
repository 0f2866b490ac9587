"""`Process`: how a crew works through its tasks."""

from __future__ import annotations

from enum import Enum


class Process(str, Enum):
    sequential = "sequential"
    hierarchical = "hierarchical"


__all__ = ["Process"]

"""`ConditionalTask(condition=fn, ...)`: a task that runs only when `condition(previous task's output)` is True;
skipped, its output is empty."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chatagent.crewai.task import Task


class ConditionalTask(Task):
    def __init__(self, *args: Any, condition: Callable[[Any], bool] | None = None, **kwargs: Any) -> None:
        if condition is None or not callable(condition):
            raise ValueError("a ConditionalTask needs a condition: a function of the previous task's output")
        super().__init__(*args, condition=condition, **kwargs)

    def should_execute(self, context: Any) -> bool:
        return bool(self.condition(context)) if self.condition is not None else True


__all__ = ["ConditionalTask"]

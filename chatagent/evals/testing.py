"""A dataset as pytest tests: one test per case, failing with the case's reasons.

    # test_support.py
    from chatagent.evals import dataset_test
    from myapp import bot

    test_support = dataset_test(bot, "tests/cases.yaml")      # pytest runs test_support[refund-window], ...

Each test evaluates its case alone (`evaluate`'s options apply: `repeat=3, min_pass=2/3` lets a case pass when two
runs in three do), without writing traces or reports unless given `store=`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from chatagent.evals.cases import Case, Dataset
from chatagent.evals.running import as_dataset, evaluate


def dataset_test(
    task: Any, dataset: Dataset | str | os.PathLike[str] | list[Case], *, min_pass: float = 1.0, **options: Any
) -> Callable[..., None]:
    """A pytest test function, parametrized by the cases of `dataset` (by name), that evaluates `task` on each and
    fails when less than `min_pass` of its runs pass."""
    import pytest  # pytest: only where tests are collected

    ds = as_dataset(dataset)
    options.setdefault("store", False)
    options.setdefault("progress", False)

    @pytest.mark.parametrize("case", ds.cases, ids=[str(c.name) for c in ds.cases])
    def test_case(case: Case) -> None:
        report = evaluate(task, Dataset([case], name=ds.name, evaluators=ds.evaluators), **options)
        result = report.cases[0]
        if result.pass_rate < min_pass:
            pytest.fail(f"{case.name}: {result.reasons()} (output: {str(result.output)[:500]!r})", pytrace=False)

    return test_case


__all__ = ["dataset_test"]

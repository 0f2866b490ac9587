"""Evaluations: datasets of cases, evaluators, `evaluate`, reports and their comparison.

    from chatagent.evals import Case, Dataset, evaluate
    ds = Dataset([Case(inputs="2+2?", expected="4"), Case(inputs="capital of France?", expected="Paris")])
    report = evaluate(agent, ds)          # report.cases[i].passed, .score, .trace_id; report.pass_rate
    print(report.table())

In reading order: `evaluators` (Exact, Contains, Regex, JSONSchema, Pydantic, ToolCalls, Sources, the budgets, your
functions) and `judge` (Judge: a model's verdict on a rubric) < `cases` (Case, Dataset: Python, YAML, JSON) <
`report` (EvaluationReport, Comparison) < `running` (evaluate, aevaluate) < `testing` (dataset_test: a dataset as
pytest tests). `chatagent eval cases.yaml --agent module:object --min-pass 0.9` runs one from the command line.
"""

from chatagent.evals.cases import Case, Dataset
from chatagent.evals.evaluators import (
    Contains,
    Context,
    Evaluator,
    Exact,
    JSONSchema,
    MaxCost,
    MaxSeconds,
    MaxTokens,
    Pydantic,
    Regex,
    Result,
    Sources,
    ToolCalls,
)
from chatagent.evals.judge import Judge
from chatagent.evals.report import Attempt, CaseResult, Comparison, EvaluationReport
from chatagent.evals.running import aevaluate, evaluate
from chatagent.evals.testing import dataset_test

__all__ = [
    "Attempt",
    "Case",
    "CaseResult",
    "Comparison",
    "Contains",
    "Context",
    "Dataset",
    "EvaluationReport",
    "Evaluator",
    "Exact",
    "JSONSchema",
    "Judge",
    "MaxCost",
    "MaxSeconds",
    "MaxTokens",
    "Pydantic",
    "Regex",
    "Result",
    "Sources",
    "ToolCalls",
    "aevaluate",
    "dataset_test",
    "evaluate",
]

"""Cases and datasets: what to ask, what a right answer is, and how to tell.

    ds = Dataset([Case("2+2?", expected="4"), Case("capital of France?", expected="Paris")])
    ds = Dataset.load("cases.yaml")                    # or .json

A YAML (or JSON) dataset:

    name: support                       # optional
    evaluators: [contains]              # optional: for every case, beside its own
    cases:
      - name: refund-window             # optional (else the question)
        inputs: "How many days do I have to return a toaster?"
        expected: "30 days"             # without evaluators: the answer must contain it
        metadata: {topic: returns}
        evaluators:
          - regex: "\\\\b30\\\\b"
          - tools: [{name: search, arguments: {query: toaster}}]     # or {calls: [...], order: exact}
          - sources: {file: manual.pdf, pages: [4]}
          - judge: "States the window in days and is polite."        # or {rubric: ..., model: {...}}
          - max_seconds: 10
          - max_cost: 0.01
          - max_tokens: 4000
          - json_schema: {type: object, required: [days]}
          - pydantic: mypackage.models:Refund                        # a class, imported
          - function: mypackage.checks:polite                        # a function of the Context, imported

`inputs` is the user's question (a text), a conversation (a list of messages), or for a crew or a function, what
it takes (a crew's inputs dict). A case's `expected` is checked with `Contains(expected)` (by equality when it is
not a text) unless one of its evaluators judges the answer itself (exact, contains, regex, json_schema, pydantic,
judge: those read `expected` when they are given no value of their own).
"""

from __future__ import annotations

import importlib
import json
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chatagent.evals.evaluators import (
    Contains,
    Evaluator,
    Exact,
    FunctionEvaluator,
    JSONSchema,
    MaxCost,
    MaxSeconds,
    MaxTokens,
    Pydantic,
    Regex,
    Sources,
    ToolCalls,
    as_evaluator,
)
from chatagent.evals.judge import Judge
from chatagent.utils.extras import missing_dependency

_CASE_KEYS = {"name", "inputs", "expected", "metadata", "evaluators"}
_DATASET_KEYS = {"name", "cases", "evaluators"}


@dataclass
class Case:
    """One thing to ask: `inputs`, optionally the `expected` answer, `metadata` (kept in the report), its own
    `evaluators`, and a `name` (the question's start when not given)."""

    inputs: Any
    expected: Any = None
    name: str | None = None
    metadata: dict[str, Any] = field(default_factory=lambda: {})
    evaluators: list[Any] = field(default_factory=lambda: [])

    def __post_init__(self) -> None:
        if self.inputs is None or self.inputs == "" or self.inputs == []:
            raise ValueError("a Case needs inputs (the question, a conversation, or what the task takes)")
        if not isinstance(self.metadata, dict):
            raise TypeError(f"a Case's metadata is a dict, got {type(self.metadata).__name__}")
        self.evaluators = [as_evaluator(e) for e in self.evaluators]
        if self.name is None:
            self.name = _title(self.inputs)

    def checks(self, shared: Sequence[Evaluator] = ()) -> list[Evaluator]:
        """Its evaluators and the dataset's (`shared`), and with `expected`, when none of them judges the answer
        itself, `Contains(expected)` (`Exact` when it is not a text)."""
        found = [*shared, *self.evaluators]
        if self.expected is not None and not any(getattr(e, "checks_answer", False) for e in found):
            found.insert(0, Contains() if isinstance(self.expected, str) else Exact())
        return found

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "inputs": self.inputs, "expected": self.expected, "metadata": self.metadata}


class Dataset:
    """Cases to evaluate (each name once: a repeated one gets ' (2)', ...), and evaluators for all of them."""

    def __init__(self, cases: Iterable[Case], *, name: str = "dataset", evaluators: Iterable[Any] = ()) -> None:
        self.cases = list(cases)
        if not self.cases:
            raise ValueError("a Dataset needs cases")
        if not all(isinstance(c, Case) for c in self.cases):
            raise TypeError("a Dataset holds Case objects")
        self.name = name
        self.evaluators = [as_evaluator(e) for e in evaluators]
        seen: dict[str, int] = {}
        for case in self.cases:
            base = str(case.name)
            n = seen.get(base, 0) + 1
            seen[base] = n
            if n > 1:
                case.name = f"{base} ({n})"

    def __iter__(self) -> Iterator[Case]:
        return iter(self.cases)

    def __len__(self) -> int:
        return len(self.cases)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Dataset:
        """A dataset from a YAML (.yaml, .yml) or JSON file (see the module docstring)."""
        file = Path(path)
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as e:
            raise ValueError(f"cannot read the dataset {file}: {e.strerror or e}") from None
        if file.suffix.lower() in (".yaml", ".yml"):
            try:
                import yaml
            except ModuleNotFoundError as e:
                raise missing_dependency(e, "a YAML dataset") from None
            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError as e:
                raise ValueError(f"{file} is not valid YAML: {e}") from None
        else:
            try:
                data = json.loads(text)
            except ValueError as e:
                raise ValueError(f"{file} is not valid JSON: {e}") from None
        return cls.from_dict(data, where=str(file), default_name=file.stem)

    @classmethod
    def from_dict(cls, data: Any, *, where: str = "the dataset", default_name: str = "dataset") -> Dataset:
        """A dataset from its dict form (`{"cases": [...], "name": ..., "evaluators": [...]}`) or a list of cases."""
        if isinstance(data, list):
            data = {"cases": data}
        if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
            raise ValueError(f"{where}: expected 'cases:', a list of cases (each with 'inputs')")
        unknown = set(data) - _DATASET_KEYS
        if unknown:
            raise ValueError(
                f"{where}: unknown key {sorted(unknown)[0]!r} (expected: {', '.join(sorted(_DATASET_KEYS))})"
            )
        cases = []
        for i, raw in enumerate(data["cases"], 1):
            at = f"{where}, case {i}"
            if not isinstance(raw, dict) or "inputs" not in raw:
                raise ValueError(f"{at}: a case is a mapping with 'inputs'")
            unknown = set(raw) - _CASE_KEYS
            if unknown:
                raise ValueError(
                    f"{at}: unknown key {sorted(unknown)[0]!r} (expected: {', '.join(sorted(_CASE_KEYS))})"
                )
            try:
                cases.append(Case(raw["inputs"], raw.get("expected"), raw.get("name"), raw.get("metadata") or {},
                                  [evaluator_from(e, at) for e in raw.get("evaluators") or []]))  # fmt: skip
            except (TypeError, ValueError) as e:
                raise ValueError(f"{at}: {e}") from None
        shared = [evaluator_from(e, f"{where}, evaluators") for e in data.get("evaluators") or []]
        return cls(cases, name=str(data.get("name") or default_name), evaluators=shared)


def evaluator_from(spec: Any, where: str) -> Evaluator:
    """An evaluator from its YAML/JSON form: a name (`contains`, `exact`) or a one-key mapping (see the module
    docstring)."""
    if isinstance(spec, str):
        if spec in ("contains", "exact"):
            return Contains() if spec == "contains" else Exact()
        raise ValueError(f"{where}: unknown evaluator {spec!r} (a name is 'contains' or 'exact'; others take a value)")
    if not isinstance(spec, dict) or len(spec) != 1:
        raise ValueError(f"{where}: an evaluator is a name or a mapping with one key, got {spec!r:.80}")
    ((kind, value),) = spec.items()
    try:
        return _make(kind, value)
    except KeyError:
        raise ValueError(f"{where}: unknown evaluator {kind!r} (one of: {', '.join(sorted(_MAKERS))})") from None
    except (TypeError, ValueError, ImportError, AttributeError, re.error) as e:
        raise ValueError(f"{where}: {kind}: {e}") from None


def _make(kind: str, value: Any) -> Evaluator:
    maker = _MAKERS[kind]
    return maker(value)


def _tools(value: Any) -> Evaluator:
    if isinstance(value, dict):
        return ToolCalls(
            value["calls"], order=value.get("order", "in_order"), arguments=value.get("arguments", "subset")
        )
    return ToolCalls(value)


def _judge(value: Any) -> Evaluator:
    if isinstance(value, dict):
        return Judge(value["rubric"], value.get("model"))
    return Judge(value)


def _of(options: Any, make: Any) -> Evaluator:
    return make(**options) if isinstance(options, dict) else make(options)


_MAKERS: dict[str, Any] = {
    "contains": lambda v: Contains(v),
    "exact": lambda v: Exact(v),
    "regex": lambda v: Regex(v),
    "tools": _tools,
    "sources": lambda v: _of(v, Sources),
    "judge": _judge,
    "max_cost": lambda v: MaxCost(v),
    "max_seconds": lambda v: MaxSeconds(v),
    "max_tokens": lambda v: MaxTokens(v),
    "json_schema": lambda v: JSONSchema(v),
    "pydantic": lambda v: Pydantic(load_object(v)),
    "function": lambda v: FunctionEvaluator(load_object(v), name=str(v).rpartition(":")[2]),
}


def load_object(spec: Any) -> Any:
    """The object `module:name` names (the module imported)."""
    if not isinstance(spec, str) or ":" not in spec:
        raise ValueError(f"expected module:name, got {spec!r}")
    module, _, name = spec.partition(":")
    obj: Any = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _title(inputs: Any) -> str:
    if isinstance(inputs, str):
        text = inputs
    elif isinstance(inputs, list) and inputs and isinstance(inputs[-1], dict):
        content = inputs[-1].get("content")
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, default=str)
    else:
        text = json.dumps(inputs, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:59] + "…"


__all__ = ["Case", "Dataset", "evaluator_from", "load_object"]

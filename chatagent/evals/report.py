"""An evaluation's report: each case's runs and verdicts, the aggregate, as a terminal table and as JSON; and what
changed between two reports.

    report.pass_rate, report.score, report.cases[0].passed, .score, .trace_id, .results
    print(report.table())                   # one line per case, then the totals
    report.save("report.json"); EvaluationReport.load("report.json")
    print(report.compare(baseline).table())  # improved, regressed, unchanged, new, gone
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chatagent.evals.evaluators import Result

_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")  # never drives a terminal


@dataclass
class Attempt:
    """One run of a case: its output, verdicts, time, tokens, cost, trace, error."""

    output: Any
    results: list[Result]
    seconds: float
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    trace_id: str | None = None
    error: str | None = None

    @property
    def passed(self) -> bool:
        return self.error is None and all(r.passed is not False for r in self.results)

    @property
    def score(self) -> float:
        if self.error is not None:
            return 0.0
        scores = [r.score for r in self.results if r.score is not None]
        return sum(scores) / len(scores) if scores else 1.0

    def to_dict(self) -> dict[str, Any]:
        return {"output": _jsonable(self.output), "passed": self.passed, "score": self.score, "seconds": self.seconds,
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "cost": self.cost,
                "trace_id": self.trace_id, "error": self.error, "results": [r.to_dict() for r in self.results]}  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Attempt:
        results = [Result(r["name"], r.get("passed"), r.get("score"), r.get("reason") or "", r.get("data"))
                   for r in d["results"]]  # fmt: skip
        return cls(d.get("output"), results, float(d.get("seconds") or 0), int(d.get("input_tokens") or 0),
                   int(d.get("output_tokens") or 0), d.get("cost"), d.get("trace_id"), d.get("error"))  # fmt: skip


@dataclass
class CaseResult:
    """A case's runs (one per repeat): passed (every run did), pass_rate, score (the mean; `score_stdev` across
    runs), and the first run's output, verdicts, trace."""

    name: str
    inputs: Any
    expected: Any
    metadata: dict[str, Any]
    attempts: list[Attempt]

    @property
    def passed(self) -> bool:
        return all(a.passed for a in self.attempts)

    @property
    def pass_rate(self) -> float:
        return sum(a.passed for a in self.attempts) / len(self.attempts)

    @property
    def score(self) -> float:
        return sum(a.score for a in self.attempts) / len(self.attempts)

    @property
    def score_stdev(self) -> float:
        return statistics.pstdev([a.score for a in self.attempts]) if len(self.attempts) > 1 else 0.0

    @property
    def output(self) -> Any:
        return self.attempts[0].output

    @property
    def results(self) -> list[Result]:
        return self.attempts[0].results

    @property
    def trace_id(self) -> str | None:
        return self.attempts[0].trace_id

    @property
    def error(self) -> str | None:
        return next((a.error for a in self.attempts if a.error), None)

    @property
    def seconds(self) -> float:
        return sum(a.seconds for a in self.attempts) / len(self.attempts)

    @property
    def cost(self) -> float | None:
        costs = [a.cost for a in self.attempts if a.cost is not None]
        return sum(costs) if costs else None

    @property
    def tokens(self) -> int:
        return sum(a.input_tokens + a.output_tokens for a in self.attempts)

    def reasons(self) -> str:
        """Why it failed: the failed verdicts' reasons (or the error), of the first failed run."""
        failed = next((a for a in self.attempts if not a.passed), None)
        if failed is None:
            return ""
        if failed.error:
            return failed.error
        return "; ".join(f"{r.name}: {r.reason}" if r.reason else r.name for r in failed.results if r.passed is False)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "inputs": _jsonable(self.inputs), "expected": _jsonable(self.expected),
                "metadata": _jsonable(self.metadata), "passed": self.passed, "pass_rate": self.pass_rate,
                "score": self.score, "score_stdev": self.score_stdev, "trace_id": self.trace_id,
                "attempts": [a.to_dict() for a in self.attempts]}  # fmt: skip


@dataclass
class EvaluationReport:
    """What an evaluation found (see the module docstring). `pass_rate`: the share of runs that passed."""

    name: str
    cases: list[CaseResult]
    seconds: float = 0.0
    created: float = field(default_factory=time.time)
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    task: str = ""

    @property
    def runs(self) -> list[Attempt]:
        return [a for c in self.cases for a in c.attempts]

    @property
    def pass_rate(self) -> float:
        runs = self.runs
        return sum(a.passed for a in runs) / len(runs) if runs else 0.0

    @property
    def score(self) -> float:
        runs = self.runs
        return sum(a.score for a in runs) / len(runs) if runs else 0.0

    @property
    def passed(self) -> int:
        return sum(c.passed for c in self.cases)

    @property
    def input_tokens(self) -> int:
        return sum(a.input_tokens for a in self.runs)

    @property
    def output_tokens(self) -> int:
        return sum(a.output_tokens for a in self.runs)

    @property
    def cost(self) -> float | None:
        costs = [a.cost for a in self.runs if a.cost is not None]
        return sum(costs) if costs else None

    def evaluator_pass_rates(self) -> dict[str, float]:
        """Each evaluator's share of passed verdicts, by its name."""
        seen: dict[str, list[bool]] = {}
        for a in self.runs:
            for r in a.results:
                if r.passed is not None:
                    seen.setdefault(r.name, []).append(r.passed)
        return {name: sum(v) / len(v) for name, v in seen.items()}

    def latency(self) -> dict[str, float]:
        """Seconds per run: mean, median, 95th percentile, longest."""
        times = sorted(a.seconds for a in self.runs)
        if not times:
            return {"mean": 0.0, "p50": 0.0, "p95": 0.0, "max": 0.0}
        p95 = times[min(len(times) - 1, math.ceil(0.95 * len(times)) - 1)]
        return {"mean": statistics.fmean(times), "p50": statistics.median(times), "p95": p95, "max": times[-1]}

    # ---- output ---------------------------------------------------------------------------------------------

    def table(self, width: int = 120) -> str:
        """One line per case (passed, score, seconds, tokens, cost, trace, why it failed), then the totals."""
        rows = [["", "case", "score", "s", "tokens", "cost", "trace", "why"]]
        repeats = max(len(c.attempts) for c in self.cases) if self.cases else 1
        for c in self.cases:
            mark = "✓" if c.passed else "✗"
            if repeats > 1:
                mark += f" {sum(a.passed for a in c.attempts)}/{len(c.attempts)}"
            score = f"{c.score:.2f}" + (f"±{c.score_stdev:.2f}" if repeats > 1 else "")
            rows.append([mark, c.name, score, f"{c.seconds:.2f}", str(c.tokens), _money(c.cost),
                         (c.trace_id or "")[:8], c.reasons()])  # fmt: skip
        lines = _columns(rows, width)
        lat = self.latency()
        lines.append("")
        lines.append(
            f"{self.name}: {self.passed}/{len(self.cases)} cases passed, pass rate {self.pass_rate:.0%} "
            f"({len(self.runs)} runs), score {self.score:.2f}; {self.input_tokens + self.output_tokens} tokens, "
            f"cost {_money(self.cost)}; {lat['mean']:.2f} s a run (p95 {lat['p95']:.2f} s), {self.seconds:.1f} s in all"
        )
        rates = self.evaluator_pass_rates()
        if rates:
            lines.append("evaluators: " + ", ".join(f"{k} {v:.0%}" for k, v in sorted(rates.items())))
        return "\n".join(_printable(line) for line in lines)

    def to_dict(self) -> dict[str, Any]:
        return {"version": 1, "id": self.id, "name": self.name, "task": self.task, "created": self.created,
                "seconds": self.seconds, "pass_rate": self.pass_rate, "score": self.score, "passed": self.passed,
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "cost": self.cost,
                "latency": self.latency(), "evaluators": self.evaluator_pass_rates(),
                "cases": [c.to_dict() for c in self.cases]}  # fmt: skip

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=indent)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the report as JSON to `path`; the path."""
        out = Path(path)
        out.write_text(self.to_json() + "\n", encoding="utf-8")
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EvaluationReport:
        if not isinstance(d, dict) or not isinstance(d.get("cases"), list):
            raise ValueError("not an evaluation report: expected a JSON object with 'cases'")
        cases = [CaseResult(c["name"], c.get("inputs"), c.get("expected"), c.get("metadata") or {},
                            [Attempt.from_dict(a) for a in c["attempts"]]) for c in d["cases"]]  # fmt: skip
        return cls(d.get("name") or "report", cases, float(d.get("seconds") or 0), float(d.get("created") or 0),
                   d.get("id") or uuid.uuid4().hex, d.get("task") or "")  # fmt: skip

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> EvaluationReport:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ValueError(f"cannot read the report {path}: {e}") from None
        try:
            return cls.from_dict(data)
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{path} is not an evaluation report: {e}") from None

    def compare(self, baseline: EvaluationReport, *, tolerance: float = 0.05) -> Comparison:
        """What changed from `baseline` to this report, case by case (by name)."""
        return Comparison(baseline, self, tolerance)


class Comparison:
    """Two reports side by side: each case `improved` (it passes now, or its score rose by more than `tolerance`),
    `regressed` (the reverse), `unchanged`, `added` (only in the new) or `removed` (only in the baseline)."""

    def __init__(self, baseline: EvaluationReport, new: EvaluationReport, tolerance: float = 0.05) -> None:
        self.baseline, self.new, self.tolerance = baseline, new, tolerance
        before = {c.name: c for c in baseline.cases}
        after = {c.name: c for c in new.cases}
        self.rows: list[tuple[str, str, CaseResult | None, CaseResult | None]] = []
        for name, c in after.items():
            old = before.get(name)
            self.rows.append((self._change(old, c), name, old, c))
        self.rows += [("removed", name, c, None) for name, c in before.items() if name not in after]

    def _change(self, old: CaseResult | None, new: CaseResult) -> str:
        if old is None:
            return "added"
        if new.pass_rate > old.pass_rate or (new.pass_rate == old.pass_rate and new.score > old.score + self.tolerance):
            return "improved"
        if new.pass_rate < old.pass_rate or (new.pass_rate == old.pass_rate and new.score < old.score - self.tolerance):
            return "regressed"
        return "unchanged"

    def _named(self, change: str) -> list[str]:
        return [name for c, name, _, _ in self.rows if c == change]

    @property
    def improved(self) -> list[str]:
        return self._named("improved")

    @property
    def regressed(self) -> list[str]:
        return self._named("regressed")

    @property
    def unchanged(self) -> list[str]:
        return self._named("unchanged")

    def table(self, width: int = 120) -> str:
        rows = [["", "case", "before", "after", "why now"]]
        marks = {"improved": "↑", "regressed": "↓", "unchanged": "=", "added": "+", "removed": "-"}
        for change, name, old, new in sorted(self.rows, key=lambda r: ("regressed", "improved", "added", "removed",
                                                                          "unchanged").index(r[0])):  # fmt: skip
            rows.append([f"{marks[change]} {change}", name, _verdict(old), _verdict(new),
                         new.reasons() if new is not None else ""])  # fmt: skip
        lines = _columns(rows, width)
        b, n = self.baseline, self.new
        lines += ["", f"pass rate {b.pass_rate:.0%} -> {n.pass_rate:.0%}, score {b.score:.2f} -> {n.score:.2f}, "
                  f"cost {_money(b.cost)} -> {_money(n.cost)}, {b.latency()['mean']:.2f} s -> {n.latency()['mean']:.2f} s "
                  f"a run; {len(self.improved)} improved, {len(self.regressed)} regressed"]  # fmt: skip
        return "\n".join(_printable(line) for line in lines)

    def to_dict(self) -> dict[str, Any]:
        return {"baseline": self.baseline.id, "new": self.new.id, "improved": self.improved,
                "regressed": self.regressed, "unchanged": self.unchanged, "added": self._named("added"),
                "removed": self._named("removed"), "pass_rate": [self.baseline.pass_rate, self.new.pass_rate],
                "score": [self.baseline.score, self.new.score]}  # fmt: skip


def _verdict(c: CaseResult | None) -> str:
    if c is None:
        return ""
    return f"{'✓' if c.passed else '✗'} {c.score:.2f}"


def _money(cost: float | None) -> str:
    return "-" if cost is None else f"${cost:.4f}"


def _columns(rows: list[list[str]], width: int) -> list[str]:
    """Rows as aligned columns; the last column takes what is left of `width` (cut with …)."""
    rows = [[" ".join(str(cell).split()) for cell in row] for row in rows]
    sizes = [min(max(len(r[i]) for r in rows), 40) for i in range(len(rows[0]) - 1)]
    out = []
    for row in rows:
        cells = [_fit(cell, sizes[i]).ljust(sizes[i]) for i, cell in enumerate(row[:-1])]
        line = "  ".join(cells)
        room = max(width - len(line) - 2, 10)
        out.append((line + "  " + _fit(row[-1], room)).rstrip())
    return out


def _fit(text: str, size: int) -> str:
    return text if len(text) <= size else text[: max(size - 1, 0)] + "…"


def _printable(text: str) -> str:
    return _UNPRINTABLE.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256 else "?", text)


def _jsonable(value: Any) -> Any:
    """A value for the report's JSON: what json writes as it is, a model as its dump, the rest as its text."""
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        dump = getattr(value, "model_dump", None)
        if callable(dump):
            return dump(mode="json")
        return str(value)


__all__ = ["Attempt", "CaseResult", "Comparison", "EvaluationReport"]

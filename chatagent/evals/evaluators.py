"""Evaluators: what decides whether an answer to a case is right, each giving a pass or fail, a score and a reason.

    Exact("4") Contains("Paris") Regex(r"\\b4\\b")                  # the answer's text
    JSONSchema({...}) Pydantic(MyModel)                             # the answer as data
    ToolCalls([{"name": "weather", "arguments": {"city": "Oslo"}}])   # which tools, in which order, with what
    Sources(file="manual.pdf", pages=[12])                          # the gold passage among the sources
    Judge("Is it polite and correct?", llm=cfg)                     # a model's verdict on a rubric (judge.py)
    MaxCost(0.01) MaxSeconds(5) MaxTokens(2000)                     # budgets
    lambda ctx: "Oslo" in ctx.text                                  # your own: a function of the Context

An evaluator is an object with `name` and `evaluate(ctx) -> Result` (or a function of the `Context`, which may
return a Result, a bool, a score from 0 to 1, a text (a failure's reason) or None (a pass)). A case passes when all
its evaluators pass; its score is their scores' mean.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from chatagent.tools.validation import validate_arguments
from chatagent.utils.jsonlenient import ToolArgumentError, parse_json


@dataclass(slots=True)
class Result:
    """One evaluator's verdict on one answer: passed (None: it only scores), a score from 0 to 1, why, and what else
    it found (`data`)."""

    name: str
    passed: bool | None
    score: float | None = None
    reason: str = ""
    data: dict[str, Any] | None = None  # what else it found (kept in the report's JSON)

    def __post_init__(self) -> None:
        if self.score is None and self.passed is not None:
            self.score = 1.0 if self.passed else 0.0

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "passed": self.passed, "score": self.score, "reason": self.reason}
        if self.data is not None:
            d["data"] = self.data
        return d


@dataclass(slots=True)
class Context:
    """What an evaluator sees of one run of a case: the case, the answer (`output`: the final text, or the validated
    object with a response format, or what a function returned; `text`: it as text), the response's messages, the
    time it took, the tokens and cost, the tool calls made (name and arguments, in order, nested runs' too), the
    sources retrieved, the recorded trace (a dict, see `chatagent.run.trace_body`), and the error if it failed."""

    case: Any
    output: Any = None
    text: str = ""
    messages: list[dict[str, Any]] = field(default_factory=lambda: [])
    seconds: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=lambda: [])
    sources: list[dict[str, Any]] = field(default_factory=lambda: [])
    trace: dict[str, Any] | None = None
    error: str | None = None
    judge: Any = None  # the model a Judge without its own uses (evaluate(judge=...))

    @property
    def expected(self) -> Any:
        return self.case.expected

    @property
    def inputs(self) -> Any:
        return self.case.inputs


class Evaluator:
    """Base of the built-in evaluators: `evaluate(ctx)` gives a Result; `name` names it in reports."""

    name = "evaluator"
    checks_answer = False  # whether it judges the answer itself (then a case's expected is not checked beside it)

    def evaluate(self, ctx: Context) -> Result:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _expected_text(given: Any, ctx: Context, who: str) -> Any:
    value = ctx.case.expected if given is None else given
    if value is None:
        raise ValueError(f"{who} needs a value, or the case's expected")
    return value


class Exact(Evaluator):
    """The answer's text is `expected` (the case's when not given), leading and trailing spaces aside."""

    name = "exact"
    checks_answer = True

    def __init__(self, expected: Any = None, *, case_sensitive: bool = True) -> None:
        self.expected, self.case_sensitive = expected, case_sensitive

    def evaluate(self, ctx: Context) -> Result:
        want = _expected_text(self.expected, ctx, "Exact")
        if not isinstance(want, str):
            return Result(
                self.name, ctx.output == want, reason="" if ctx.output == want else f"got {_short(ctx.output)}"
            )
        got, wanted = ctx.text.strip(), want.strip()
        if not self.case_sensitive:
            got, wanted = got.lower(), wanted.lower()
        return Result(
            self.name, got == wanted, reason="" if got == wanted else f"expected {_short(want)}, got {_short(ctx.text)}"
        )


class Contains(Evaluator):
    """The answer's text holds `value` (the case's expected when not given; a list: each of them), any case unless
    `case_sensitive`."""

    name = "contains"
    checks_answer = True

    def __init__(self, value: str | Sequence[str] | None = None, *, case_sensitive: bool = False) -> None:
        self.value, self.case_sensitive = value, case_sensitive

    def evaluate(self, ctx: Context) -> Result:
        want = _expected_text(self.value, ctx, "Contains")
        wanted = [want] if isinstance(want, str) else [str(w) for w in want]
        got = ctx.text if self.case_sensitive else ctx.text.lower()
        missing = [w for w in wanted if (w if self.case_sensitive else w.lower()) not in got]
        score = 1 - len(missing) / len(wanted) if wanted else 1.0
        return Result(self.name, not missing, score, f"missing {', '.join(map(repr, missing))}" if missing else "")


class Regex(Evaluator):
    """The answer's text matches `pattern` somewhere (`re.search`)."""

    name = "regex"
    checks_answer = True

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = re.compile(pattern, flags)

    def evaluate(self, ctx: Context) -> Result:
        ok = self.pattern.search(ctx.text) is not None
        return Result(self.name, ok, reason="" if ok else f"no match for {self.pattern.pattern!r}")


def _as_data(ctx: Context) -> Any:
    """The answer as JSON data: the object it is, or its text parsed (a fenced block too)."""
    out = ctx.output
    if out is not None and not isinstance(out, str):
        dump = getattr(out, "model_dump", None)
        return dump(mode="json") if callable(dump) else out
    return parse_json(ctx.text)


class JSONSchema(Evaluator):
    """The answer is JSON that fits `schema` as it is (no coercion: "3" is not an integer)."""

    name = "json_schema"
    checks_answer = True

    def __init__(self, schema: dict[str, Any]) -> None:
        if not isinstance(schema, dict):
            raise TypeError("JSONSchema takes a JSON Schema (a dict)")
        self.schema = schema

    def evaluate(self, ctx: Context) -> Result:
        try:
            data = _as_data(ctx)
            checked = validate_arguments({"answer": data}, {"type": "object", "properties": {"answer": self.schema},
                                                            "required": ["answer"]})  # fmt: skip
        except ToolArgumentError as e:
            return Result(self.name, False, reason=str(e).replace("answer.", "").replace("'answer' ", ""))
        if checked["answer"] != data:
            return Result(self.name, False, reason="fits the schema only after converting values")
        return Result(self.name, True)


class Pydantic(Evaluator):
    """The answer is (or parses as) an instance of the pydantic model `model`."""

    name = "pydantic"
    checks_answer = True

    def __init__(self, model: type) -> None:
        if not hasattr(model, "model_validate"):
            raise TypeError("Pydantic takes a pydantic model class")
        self.model = model

    def evaluate(self, ctx: Context) -> Result:
        if isinstance(ctx.output, self.model):
            return Result(self.name, True)
        try:
            self.model.model_validate(_as_data(ctx))  # pyright: ignore[reportAttributeAccessIssue]
        except (ToolArgumentError, ValueError) as e:
            return Result(self.name, False, reason=" ".join(str(e).split())[:300])
        return Result(self.name, True)


class ToolCalls(Evaluator):
    """The tools called: `expected` is a list of tool names or `{"name", "arguments"}` dicts. `order`: 'in_order'
    (these calls in this order, others between them allowed), 'exact' (these and no others, in order) or 'any'
    (each made, in any order). Arguments given must match (`arguments='subset'`: the given keys; 'exact': all)."""

    name = "tool_calls"

    def __init__(self, expected: Sequence[str | dict[str, Any]], *, order: str = "in_order",
                 arguments: str = "subset") -> None:  # fmt: skip
        if order not in ("in_order", "exact", "any"):
            raise ValueError(f"order must be 'in_order', 'exact' or 'any', got {order!r}")
        if arguments not in ("subset", "exact"):
            raise ValueError(f"arguments must be 'subset' or 'exact', got {arguments!r}")
        self.expected = [{"name": e} if isinstance(e, str) else dict(e) for e in expected]
        if not all(isinstance(e.get("name"), str) for e in self.expected):
            raise ValueError("ToolCalls: each expected call is a tool name or a dict with 'name'")
        self.order, self.arguments = order, arguments

    def _fits(self, want: dict[str, Any], call: dict[str, Any]) -> bool:
        if want["name"] != call["name"]:
            return False
        args = want.get("arguments")
        if args is None:
            return True
        got = call.get("arguments") or {}
        if self.arguments == "exact":
            return got == args
        return all(k in got and got[k] == v for k, v in args.items())

    def evaluate(self, ctx: Context) -> Result:
        calls = ctx.tool_calls
        if self.order == "exact":
            ok = len(calls) == len(self.expected) and all(map(self._fits, self.expected, calls))
            matched = sum(map(self._fits, self.expected, calls))
        elif self.order == "in_order":
            matched, at = 0, 0
            for want in self.expected:
                while at < len(calls) and not self._fits(want, calls[at]):
                    at += 1
                if at == len(calls):
                    break
                matched, at = matched + 1, at + 1
            ok = matched == len(self.expected)
        else:
            left = list(calls)
            matched = 0
            for want in self.expected:
                hit = next((c for c in left if self._fits(want, c)), None)
                if hit is not None:
                    left.remove(hit)
                    matched += 1
            ok = matched == len(self.expected)
        score = matched / len(self.expected) if self.expected else float(not calls or self.order != "exact")
        made = ", ".join(f"{c['name']}({json.dumps(c.get('arguments'), ensure_ascii=False)})" for c in calls) or "none"
        return Result(self.name, ok, score, "" if ok else f"calls made: {_short(made, 300)}")


class Sources(Evaluator):
    """The gold passage is among the sources the answer came with: a source from `file` (its name, or the end of
    its path), on one of `pages`, holding `text` (what is given must all match), within the first `top` sources.
    Score: 1 over its rank (1 first, 0.5 second, ...)."""

    name = "sources"

    def __init__(self, file: str | None = None, pages: Sequence[int] | int | None = None, text: str | None = None,
                 *, top: int | None = None) -> None:  # fmt: skip
        if file is None and pages is None and text is None:
            raise ValueError("Sources needs the gold passage: file=, pages= or text=")
        self.file, self.text, self.top = file, text, top
        self.pages = {pages} if isinstance(pages, int) else set(pages) if pages is not None else None

    def _fits(self, source: dict[str, Any]) -> bool:
        name = str(source.get("file") or source.get("url") or "")
        if self.file is not None and not (name == self.file or name.endswith("/" + self.file)):
            return False
        if self.pages is not None and not self.pages & set(source.get("pages") or ()):
            return False
        return self.text is None or " ".join(self.text.lower().split()) in " ".join(
            str(source.get("text") or "").lower().split()
        )

    def evaluate(self, ctx: Context) -> Result:
        shown = ctx.sources[: self.top] if self.top else ctx.sources
        rank = next((i for i, s in enumerate(shown, 1) if self._fits(s)), None)
        if rank is None:
            got = "; ".join(f"{s.get('file')} p.{','.join(map(str, s.get('pages') or []))}" for s in shown[:5])
            return Result(self.name, False, 0.0, f"not among the sources ({got or 'none'})")
        return Result(self.name, True, 1 / rank, f"rank {rank}")


class _Budget(Evaluator):
    unit = ""

    def __init__(self, limit: float) -> None:
        if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not math.isfinite(limit) or limit < 0:
            raise ValueError(f"{type(self).__name__} takes a number >= 0, got {limit!r}")
        self.limit = float(limit)

    def used(self, ctx: Context) -> float | None:
        raise NotImplementedError

    def evaluate(self, ctx: Context) -> Result:
        used = self.used(ctx)
        if used is None:
            return Result(self.name, False, reason=f"not known (no price for the model): the budget is {self.limit:g}")
        ok = used <= self.limit
        return Result(self.name, ok, reason=f"{used:.6g} {self.unit} of {self.limit:g}")


class MaxCost(_Budget):
    """The run cost at most `limit` US dollars (its models' prices: `chatagent.llm.prices`)."""

    name, unit = "max_cost", "USD"

    def used(self, ctx: Context) -> float | None:
        return ctx.cost if ctx.cost is not None else (0.0 if not ctx.input_tokens + ctx.output_tokens else None)


class MaxSeconds(_Budget):
    """The run took at most `limit` seconds (wall time, from the start of the run to its last fragment)."""

    name, unit = "max_seconds", "s"

    def used(self, ctx: Context) -> float | None:
        return ctx.seconds


class MaxTokens(_Budget):
    """The run's model calls used at most `limit` tokens in all (input and output)."""

    name, unit = "max_tokens", "tokens"

    def used(self, ctx: Context) -> float | None:
        return float(ctx.input_tokens + ctx.output_tokens)


class FunctionEvaluator(Evaluator):
    """A function of the Context as an evaluator (see the module docstring for what it may return)."""

    def __init__(self, fn: Callable[[Context], Any], name: str | None = None) -> None:
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "") or "function"
        if self.name == "<lambda>":
            self.name = "function"

    def evaluate(self, ctx: Context) -> Result:
        return as_result(self.name, self.fn(ctx))


def as_result(name: str, value: Any) -> Result:
    """What an evaluator returned, as a Result."""
    if isinstance(value, Result):
        return value
    if value is None or value is True or value is False:
        return Result(name, value is not False)
    if isinstance(value, (int, float)):
        if not 0 <= value <= 1:
            raise ValueError(f"evaluator {name!r} returned the score {value!r}; a score is from 0 to 1")
        return Result(name, None, float(value))
    if isinstance(value, str):
        return Result(name, False, reason=value)
    raise TypeError(f"evaluator {name!r} returned {type(value).__name__}: return a Result, a bool, a score or a text")


def as_evaluator(value: Any) -> Evaluator:
    """An Evaluator, or a function of the Context as one."""
    if isinstance(value, Evaluator):
        return value
    if callable(getattr(value, "evaluate", None)):
        return value
    if callable(value):
        return FunctionEvaluator(value)
    raise TypeError(f"an evaluator is an Evaluator or a function of the Context, got {type(value).__name__}")


def _short(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, str) else repr(value)
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


__all__ = [
    "Contains",
    "Context",
    "Evaluator",
    "Exact",
    "FunctionEvaluator",
    "JSONSchema",
    "MaxCost",
    "MaxSeconds",
    "MaxTokens",
    "Pydantic",
    "Regex",
    "Result",
    "Sources",
    "ToolCalls",
    "as_evaluator",
    "as_result",
]

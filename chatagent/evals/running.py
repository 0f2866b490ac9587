"""Running an evaluation: each case (and each repeat) run on the task, at most `concurrency` at a time, recorded as a
trace, judged by its evaluators; a report.

    report = evaluate(bot, dataset)                       # an Agent: each case's inputs are its messages
    report = evaluate(crew, dataset)                      # a Crew: each case's inputs are the crew's inputs
    report = evaluate(my_function, dataset)               # a function (or coroutine function) of the inputs
    report = await aevaluate(bot, dataset, concurrency=8, repeat=3, judge={"model": "qwen-plus"})

Each run of a case is a 'case' step that the trace recorder keeps (`chatagent.run.traces`), with the runs it made
under it: the report links each case to its trace (`trace_id`), and the evaluators see the tool calls and sources
of every nested run. With `store=False` nothing is written (the traces are still made, for the evaluators). In a
terminal a progress line says how far it is.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from chatagent.evals.cases import Case, Dataset
from chatagent.evals.evaluators import Context, Result, as_result
from chatagent.evals.report import Attempt, CaseResult, EvaluationReport
from chatagent.run.context import current_trust
from chatagent.run.events import STEP, end_step, start_step
from chatagent.run.traces import owner_of, scoped, trace_store, unscoped
from chatagent.schema import to_messages
from chatagent.sessions.traces import expanded
from chatagent.utils.jsonlenient import ToolArgumentError, parse_json

TRACE_WAIT_S = 60.0  # how long a case waits for its trace to be written before it is judged without it


def evaluate(task: Any, dataset: Dataset | str | os.PathLike[str] | list[Case], **options: Any) -> EvaluationReport:
    """Evaluate `task` (an Agent, a Crew, or a function of a case's inputs) on `dataset` (a Dataset, a YAML or JSON
    file, or a list of Cases); the report. Takes `aevaluate`'s options. Not for a running event loop: await
    `aevaluate` there."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(aevaluate(task, dataset, **options))
    raise RuntimeError("evaluate() runs its own event loop: inside one (async code, Jupyter), await aevaluate()")


async def aevaluate(
    task: Any,
    dataset: Dataset | str | os.PathLike[str] | list[Case],
    *,
    concurrency: int = 4,
    repeat: int = 1,
    judge: Any = None,
    name: str | None = None,
    store: Any = None,
    owner: str | None = None,
    progress: bool | None = None,
    timeout: float | None = None,
) -> EvaluationReport:
    """`evaluate` on the running event loop.

    Args:
        concurrency: cases run at once. repeat: runs of each case (for variance: the report has each case's pass
            rate and the spread of its score).
        judge: the model (a config dict or a model) of the `Judge` evaluators that name none.
        name: the report's name (the dataset's by default).
        store: where the traces and the report go (a store URL or path; None: the default session store; False:
            nowhere). owner: whose they are (default: the surface's principal, else the local user).
        progress: a progress line on stderr (default: when stderr is a terminal).
        timeout: seconds a run of a case may take (then it fails, its run closed).
    """
    ds = as_dataset(dataset)
    for value, what in ((concurrency, "concurrency"), (repeat, "repeat")):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{what} must be a positive integer, got {value!r}")
    run = _runner(task)
    who = owner or owner_of(current_trust())
    recorder = scoped(store)
    bar = _Progress(len(ds) * repeat, sys.stderr.isatty() if progress is None else progress)
    limit = asyncio.Semaphore(concurrency)
    started = time.perf_counter()

    async def one(case: Case, attempt: int) -> Attempt:
        async with limit:
            got = await _attempt(run, case, ds, attempt, recorder, who, judge, timeout)
        bar.advance(got.passed)
        return got

    try:
        attempts = await asyncio.gather(*(one(c, k) for c in ds for k in range(repeat)))
    finally:
        unscoped(recorder)
        bar.close()
    cases = [CaseResult(str(c.name), c.inputs, c.expected, c.metadata, list(attempts[i * repeat : (i + 1) * repeat]))
             for i, c in enumerate(ds)]  # fmt: skip
    report = EvaluationReport(name or ds.name, cases, time.perf_counter() - started, task=_task_name(task))
    if store is not False:
        await asyncio.to_thread(lambda: trace_store(store).save_report(who, report.to_dict()))
    return report


async def _attempt(
    run: Callable[[Case], Any], case: Case, ds: Dataset, attempt: int, recorder: Any, owner: str, judge: Any,
    timeout: float | None,
) -> Attempt:  # fmt: skip
    loop = asyncio.get_running_loop()
    traced: asyncio.Future[dict[str, Any] | None] = loop.create_future()

    def on_trace(body: dict[str, Any] | None) -> None:  # in the trace writer's thread (as stored: its shape to read)
        shown = expanded(body) if body is not None else None
        loop.call_soon_threadsafe(lambda: traced.done() or traced.set_result(shown))

    about = {"record": True, "recorder": recorder, "owner": owner, "title": case.name, "on_trace": on_trace,
             "dataset": ds.name, "attempt": attempt + 1, "inputs": case.inputs, "expected": case.expected}  # fmt: skip
    step = start_step(None, "case", str(case.name), data=about)
    token = STEP.set(step)
    begun = time.perf_counter()
    output: Any = None
    messages: list[dict[str, Any]] = []
    usage: Any = None
    error = None
    try:
        output, messages, usage = await asyncio.wait_for(run(case), timeout)
    except Exception as e:  # the case fails, saying why; the others go on
        error = f"TimeoutError: the run took more than {timeout:g} s" if isinstance(e, asyncio.TimeoutError) else (
            f"{type(e).__name__}: {e}")  # fmt: skip
    finally:
        STEP.reset(token)
    seconds = time.perf_counter() - begun
    end_step(None, step, error, {"output": output if isinstance(output, str) else str(output)})
    trace = None
    if step is not None:
        try:
            trace = await asyncio.wait_for(traced, TRACE_WAIT_S)
        except asyncio.TimeoutError:
            trace = None
    ctx = _context(case, output, messages, seconds, usage, trace, error, judge)
    results = [] if error is not None else [await _verdict(ev, ctx) for ev in case.checks(ds.evaluators)]
    kept = trace["id"] if trace is not None and recorder.store is not False else None  # (a trace not written: none)
    return Attempt(output, results, seconds, ctx.input_tokens, ctx.output_tokens, ctx.cost, kept, error)


async def _verdict(evaluator: Any, ctx: Context) -> Result:
    """`evaluator`'s verdict, run in a worker thread (a judge calls a model); one that raises fails, saying why."""
    name = str(getattr(evaluator, "name", "") or type(evaluator).__name__)
    try:
        return as_result(name, await asyncio.to_thread(evaluator.evaluate, ctx))
    except Exception as e:
        return Result(name, False, reason=f"the evaluator failed: {type(e).__name__}: {e}")


def _context(case: Case, output: Any, messages: list[dict[str, Any]], seconds: float, usage: Any,
             trace: dict[str, Any] | None, error: str | None, judge: Any) -> Context:  # fmt: skip
    text = (
        output if isinstance(output, str) else _answer(messages) if messages else "" if output is None else str(output)
    )
    ctx = Context(case, output, text, messages, seconds, error=error, trace=trace, judge=judge)
    if usage is not None:
        ctx.input_tokens, ctx.output_tokens, ctx.cost = usage.prompt_tokens, usage.completion_tokens, usage.cost
    elif trace is not None:
        u = trace.get("usage") or {}
        ctx.input_tokens, ctx.output_tokens, ctx.cost = (
            u.get("input_tokens", 0),
            u.get("output_tokens", 0),
            u.get("cost"),
        )
    if trace is not None:
        ctx.tool_calls = [{"name": s["name"], "arguments": _arguments(s.get("arguments"))}
                          for s in trace["steps"] if s["kind"] == "tool"]  # fmt: skip
        found = [s for s in trace["steps"] if s["kind"] == "retrieval"]
        if found:
            ctx.sources = list((found[-1].get("data") or {}).get("sources") or [])
    else:
        ctx.tool_calls = [{"name": m["function_call"]["name"], "arguments": _arguments(m["function_call"].get("arguments"))}
                          for m in messages if m.get("function_call")]  # fmt: skip
    if not ctx.sources and messages:
        ctx.sources = list((messages[-1].get("extra") or {}).get("sources") or [])
    return ctx


def _arguments(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        return parse_json(raw) if raw.strip() else {}
    except ToolArgumentError:
        return raw


def _answer(messages: list[dict[str, Any]]) -> str:
    """The final answer's text: the last assistant message that calls no tool."""
    for m in reversed(messages):
        if m.get("role") == "assistant" and not m.get("function_call"):
            return to_messages([m])[0].text
    return ""


def as_dataset(value: Any) -> Dataset:
    """A Dataset, a YAML or JSON file's, or a list of Cases as a Dataset."""
    if isinstance(value, Dataset):
        return value
    if isinstance(value, (str, os.PathLike)):
        return Dataset.load(value)
    if isinstance(value, (list, tuple)):
        return Dataset(value)
    raise TypeError(f"a dataset is a Dataset, a YAML or JSON file, or a list of Cases, got {type(value).__name__}")


def _runner(task: Any) -> Callable[[Case], Any]:
    """How to run one case on `task`: a coroutine function giving (output, messages as dicts, usage or None)."""
    if hasattr(task, "akickoff") and hasattr(task, "arun"):  # a Crew: its inputs

        async def crew(case: Case) -> tuple[Any, list[dict[str, Any]], Any]:
            inputs = case.inputs if isinstance(case.inputs, dict) else {"input": case.inputs}
            run = task.arun(inputs)
            response: list[dict[str, Any]] = []
            async for response in run:  # noqa: B007 (the last one is the whole response)
                pass
            out = run.context.output
            answer = out.pydantic if getattr(out, "pydantic", None) is not None else getattr(out, "raw", out)
            return answer, list(response), run.context.usage

        return crew
    if hasattr(task, "arun") and hasattr(task, "run_nonstream"):  # an Agent: the case's messages

        async def agent(case: Case) -> tuple[Any, list[dict[str, Any]], Any]:
            given = case.inputs
            messages = [{"role": "user", "content": given}] if isinstance(given, str) else given
            if isinstance(messages, dict):
                messages = [messages]
            run = task.arun([m if isinstance(m, dict) else m.model_dump() for m in messages])
            response: list[dict[str, Any]] = []
            async for response in run:  # noqa: B007 (the last one is the whole response)
                pass
            ctx = run.context
            return (ctx.output if ctx.output is not None else _answer(response)), list(response), ctx.usage

        return agent
    if callable(task):

        async def function(case: Case) -> tuple[Any, list[dict[str, Any]], Any]:
            if inspect.iscoroutinefunction(task):
                out = await task(case.inputs)
            else:
                out = await asyncio.to_thread(task, case.inputs)
                if inspect.isawaitable(out):
                    out = await out
            return out, [], None

        return function
    raise TypeError(f"evaluate() takes an Agent, a Crew or a function of the inputs, got {type(task).__name__}")


def _task_name(task: Any) -> str:
    return str(getattr(task, "name", None) or getattr(task, "__name__", None) or type(task).__name__)


class _Progress:
    """`done/total ▕████░░░▏ n passed` on stderr, rewritten in place (only when asked: a terminal)."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.enabled, self.done, self.passed = total, enabled, 0, 0
        self.started = time.perf_counter()
        self.show()

    def advance(self, passed: bool) -> None:
        self.done += 1
        self.passed += passed
        self.show()

    def show(self) -> None:
        if not self.enabled:
            return
        filled = int(20 * self.done / self.total) if self.total else 20
        line = (f"\r  {self.done}/{self.total} ▕{'█' * filled}{'░' * (20 - filled)}▏ {self.passed} passed  "
                f"{time.perf_counter() - self.started:.1f} s")  # fmt: skip
        sys.stderr.write(line)
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()


__all__ = ["aevaluate", "as_dataset", "evaluate"]

"""`chatagent eval` (a dataset file run against an agent, its report, a non-zero exit under a threshold) and
`chatagent traces` (the recorded traces of a user: listed, one shown as a tree, deleted)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from chatagent.cli.build import load_object
from chatagent.cli.errors import CliError
from chatagent.cli.terminal import printable
from chatagent.errors import MissingDependencyError
from chatagent.evals import EvaluationReport, evaluate
from chatagent.evals.cases import load_object as load_function
from chatagent.run.trace_body import summary, walk
from chatagent.sessions import SessionStoreError
from chatagent.sessions.traces import TraceStore


def add_eval_parsers(sub: argparse._SubParsersAction) -> None:  # pyright: ignore[reportPrivateUsage]
    p = sub.add_parser("eval", help="evaluate an agent on a dataset (YAML or JSON); exit 1 under --min-pass")
    p.add_argument("dataset", help="the cases: a YAML or JSON file (see chatagent.evals.cases)")
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--agent", metavar="MODULE:OBJECT", help="an Agent or a Crew (or a function making one)")
    who.add_argument("--task", metavar="MODULE:FUNCTION", help="a function called with each case's inputs")
    p.add_argument("--min-pass", type=float, default=None, metavar="RATE", help="fail (exit 1) under this pass rate")
    p.add_argument("--concurrency", type=int, default=4, help="cases at once (default 4)")
    p.add_argument("--repeat", type=int, default=1, help="runs of each case (default 1)")
    p.add_argument("--timeout", type=float, default=None, help="seconds a run of a case may take")
    p.add_argument("--judge-model", metavar="MODEL", help="the model of the judge evaluators that name none")
    p.add_argument("--judge-server", metavar="URL", help="its OpenAI-compatible server ('dashscope' for DashScope)")
    p.add_argument("--json", metavar="PATH", help="also write the report as JSON here")
    p.add_argument("--compare", metavar="PATH", help="a report (JSON) to compare with: what improved, regressed")
    p.add_argument("--name", help="the report's name (default: the dataset's)")
    p.add_argument("--user", default="local", help="whose traces and report (default: local)")
    p.add_argument("--store", metavar="URL", help="where traces and the report go (default: the session store)")
    p.add_argument("--no-store", action="store_true", help="write no traces and no report to a store")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("traces", help="list recorded traces (CHATAGENT_TRACES=1); show or delete one")
    p.add_argument("--user", default="local", help="whose traces (a web UI login name; default: local)")
    p.add_argument("--store", metavar="URL", help="the store (default: $CHATAGENT_SESSION_STORE or the workspace's)")
    p.add_argument("--name", help="only this agent's (or flow's) runs")
    p.add_argument("--status", choices=["ok", "error"], help="only these")
    p.add_argument("--kind", choices=["run", "flow", "case"], help="only runs, flows or evaluation cases")
    p.add_argument("--search", metavar="TEXT", help="only those whose question holds TEXT")
    p.add_argument("--limit", type=int, default=30, help="how many (newest first; default 30)")
    p.add_argument("--show", metavar="ID", help="print this trace as a tree (an id's first characters will do)")
    p.add_argument("--json", action="store_true", help="with --show: the whole trace as JSON")
    p.add_argument("--delete", metavar="ID", help="delete this trace")
    p.add_argument("--reports", action="store_true", help="list the evaluation reports instead")
    p.set_defaults(func=cmd_traces)


def cmd_eval(args: argparse.Namespace) -> int:
    if args.min_pass is not None and not 0 <= args.min_pass <= 1:
        raise CliError(f"--min-pass is a share of runs from 0 to 1, got {args.min_pass}")
    if args.agent:
        task: Any = load_object(args.agent)
    else:
        try:
            task = load_function(args.task)
        except (ValueError, ImportError, AttributeError) as e:
            raise CliError(f"--task {args.task!r}: {e}") from None
    judge = None
    if args.judge_model or args.judge_server:
        judge = {"model": args.judge_model or "", "model_server": args.judge_server or "dashscope"}
    baseline = _report(args.compare) if args.compare else None
    try:
        report = evaluate(task, args.dataset, concurrency=args.concurrency, repeat=args.repeat, judge=judge,
                          name=args.name, store=False if args.no_store else args.store, owner=args.user,
                          timeout=args.timeout)  # fmt: skip
    except (ValueError, TypeError, MissingDependencyError, SessionStoreError) as e:
        raise CliError(str(e)) from None
    print(report.table())
    if args.json:
        try:
            report.save(args.json)
        except OSError as e:
            raise CliError(f"cannot write {args.json}: {e.strerror or e}") from None
    if baseline is not None:
        print()
        print(report.compare(baseline).table())
    if not args.no_store:
        print(f"\nreport {report.id} (chatagent gui --traces shows it, each case linked to its trace)")
    if args.min_pass is not None and report.pass_rate < args.min_pass:
        print(f"chatagent: pass rate {report.pass_rate:.0%} is under --min-pass {args.min_pass:.0%}", file=sys.stderr)
        return 1
    return 0


def _report(path: str) -> EvaluationReport:
    try:
        return EvaluationReport.load(path)
    except ValueError as e:
        raise CliError(str(e)) from None


def cmd_traces(args: argparse.Namespace) -> int:
    try:
        store = TraceStore(args.store)
        if args.reports:
            for r in store.reports(args.user, args.limit):
                rate = "-" if r.pass_rate is None else f"{r.pass_rate:.0%}"
                print(f"{r.id}\t{_when(r.created)}\t{r.cases} cases\t{rate}\t{printable(r.name)}")
            return 0
        if args.delete:
            found = _find(store, args.user, args.delete)
            store.delete(args.user, found)
            print(f"deleted trace {found}")
            return 0
        if args.show:
            trace = store.get(args.user, _find(store, args.user, args.show))
            assert trace is not None  # _find found it
            print(json.dumps(trace, ensure_ascii=False, indent=1) if args.json else show_trace(trace))
            return 0
        found = store.list(args.user, name=args.name, status=args.status, kind=args.kind, text=args.search,
                           limit=args.limit)  # fmt: skip
    except SessionStoreError as e:
        raise CliError(str(e)) from None
    for t in found:
        cost = "-" if t.cost is None else f"${t.cost:.4f}"
        seconds = "-" if t.duration is None else f"{t.duration:.2f}s"
        print(printable(f"{t.id}\t{_when(t.started)}\t{t.kind}\t{t.name}\t{t.status}\t{seconds}\t"
                        f"{t.input_tokens + t.output_tokens} tokens\t{cost}\t{t.steps} steps\t{t.title}"))  # fmt: skip
    if not found:
        print(f"no traces for user {args.user!r} (record them with CHATAGENT_TRACES=1 or traces=True)", file=sys.stderr)
    return 0


def _find(store: TraceStore, user: str, given: str) -> str:
    """The id of the user's trace that `given` is (or starts): exactly one, else CliError."""
    if store.get(user, given) is not None:
        return given
    matches = [t.id for t in store.list(user, limit=10_000) if t.id.startswith(given)]
    if len(matches) != 1:
        why = "no trace" if not matches else f"{len(matches)} traces"
        raise CliError(f"{why} of user {user!r} with an id starting {given!r}")
    return matches[0]


def show_trace(trace: dict[str, Any]) -> str:
    """A trace as a tree: one line per step (its kind, name, time, what it did), then the totals."""
    usage = trace.get("usage") or {}
    cost = usage.get("cost")
    head = (f"{trace.get('kind')} {trace.get('name')}  {trace.get('status')}  {trace.get('duration') or 0:.2f}s  "
            f"{usage.get('input_tokens', 0)} in / {usage.get('output_tokens', 0)} out tokens, "
            f"{usage.get('calls', 0)} model calls, cost {'-' if cost is None else f'${cost:.4f}'}")  # fmt: skip
    lines = [head]
    for depth, step in walk(trace):
        took = step.get("duration")
        line = f"{'  ' * depth}{step['kind']} {step['name']}" + (f"  {took * 1000:.0f} ms" if took else "")
        about = summary(step, trace)
        if about:
            line += f"  {about}"
        if step.get("error"):
            line += f"  ERROR {' '.join(str(step['error']).split())[:200]}"
        lines.append(line)
    return printable("\n".join(lines))


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


__all__ = ["add_eval_parsers", "cmd_eval", "cmd_traces", "show_trace"]

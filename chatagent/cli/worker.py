"""`chatagent worker`: this process as a DBOS worker for background jobs (`chatagent.workers`), on a PostgreSQL store.

    chatagent worker --agent myapp.jobs:registry --store postgresql://app@db/chat --worker-concurrency 4

`--agent` names an Agent, a Crew, or a dict of name -> Agent | Crew | Flow class | function (a function making one
of these is called first): agents and crews run turn jobs, Flow classes flow jobs, functions task jobs (batch
work). The worker takes jobs until SIGTERM or Ctrl-C, then lets the jobs in flight finish (within --grace).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import Any

from chatagent import workers as jobs_workers  # lazy: dbos is imported when the command runs
from chatagent.agent import Agent
from chatagent.agents.teams.crew import Crew
from chatagent.cli.build import load_object
from chatagent.cli.errors import CliError
from chatagent.flows.flow import Flow


def add_parser(sub: Any) -> None:
    p = sub.add_parser("worker", help="run background jobs (turns, crews, flows, batch tasks) on DBOS queues")
    p.add_argument("--agent", required=True, metavar="MODULE:OBJECT",
                   help="an Agent, a Crew, or a dict of name -> Agent | Crew | Flow class | function")  # fmt: skip
    p.add_argument("--store", metavar="URL", help="the postgresql:// store (default: $CHATAGENT_SESSION_STORE)")
    p.add_argument("--queue", default="chatagent", help="the DBOS queue to take jobs from")
    p.add_argument("--concurrency", type=int, help="jobs of the queue at once, across every worker")
    p.add_argument("--worker-concurrency", type=int, default=4, help="jobs at once in this worker")
    p.add_argument("--per-principal", type=int, help="jobs of one principal at once, across every worker")
    p.add_argument("--rate", metavar="N/SECONDS", help="at most N jobs of the queue start per SECONDS")
    p.add_argument("--dbos-schema", default="dbos", help="the schema of DBOS's tables")
    p.add_argument("--executor-id", help="this worker's DBOS executor id (default: unique per process)")
    p.add_argument("--grace", type=float, default=30.0, help="seconds the jobs in flight may take on stop")
    p.set_defaults(func=cmd_worker)


def registry(obj: Any) -> dict[str, dict[str, Any]]:
    """What `--agent` gave, sorted into agents, flows and tasks by name."""
    found: dict[str, dict[str, Any]] = {"agents": {}, "flows": {}, "tasks": {}}
    named = obj if isinstance(obj, Mapping) else {getattr(obj, "name", None) or "chatagent": obj}
    for name, value in named.items():
        if isinstance(value, Crew):
            found["agents"][name] = value.as_agent()
        elif isinstance(value, Agent):
            found["agents"][name] = value
        elif isinstance(value, type) and issubclass(value, Flow):
            found["flows"][name] = value
        elif callable(value):
            found["tasks"][name] = value
        else:
            raise CliError(f"--agent: {name!r} is a {type(value).__name__}, not an Agent, Crew, Flow class or function")
    return found


def cmd_worker(args: argparse.Namespace) -> int:
    store = args.store or os.environ.get("CHATAGENT_SESSION_STORE") or ""
    if not store.startswith(("postgresql://", "postgres://")):
        raise CliError("a worker needs a postgresql:// store (--store, or $CHATAGENT_SESSION_STORE)")
    rate = None
    if args.rate:
        n, _, seconds = args.rate.partition("/")
        try:
            rate = (int(n), float(seconds))
        except ValueError:
            raise CliError(f"--rate {args.rate!r}: expected N/SECONDS, as 100/60") from None
    found = registry(load_object(args.agent))
    queue = jobs_workers.QueueLimits(args.queue, args.concurrency, args.worker_concurrency, rate,
                                     per_principal=args.per_principal)  # fmt: skip
    try:
        workers = jobs_workers.Workers(
            store, agents=found["agents"], flows=found["flows"], tasks=found["tasks"], queues=[queue],
            executor_id=args.executor_id, dbos_schema=args.dbos_schema, grace=args.grace,
        )  # fmt: skip
    except (TypeError, ValueError) as e:
        raise CliError(str(e)) from None
    workers.launch()
    names = ", ".join(sorted(found["agents"]) + sorted(found["flows"]) + sorted(found["tasks"]))
    print(f"chatagent: worker {workers.executor_id} takes jobs from {args.queue} ({names})", flush=True)
    workers.serve_forever()
    return 0

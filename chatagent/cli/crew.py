"""The project commands of CrewAI's CLI: `chatagent create crew|flow NAME`, `run`, `flow kickoff|plot`, `replay -t
ID`, `log-tasks-outputs`, `train -n N -f FILE`, `test -n N -m MODEL`, `reset-memories` (see chatagent.crewai.projects)."""

from __future__ import annotations

import argparse
from typing import Any

from chatagent.cli.errors import CliError
from chatagent.crewai.projects import (
    ProjectError,
    create_project,
    find_project,
    reset_project_memories,
    run_project,
    stored_tasks,
)

COMMANDS = ("create", "run", "flow", "replay", "log-tasks-outputs", "train", "test", "reset-memories")


def add_crew_parsers(sub: Any) -> None:
    """Add the project commands to the `chatagent` command's subparsers."""
    p = sub.add_parser("create", help="make a new crew or flow project (CrewAI's layout)")
    p.add_argument("kind", choices=["crew", "flow"])
    p.add_argument("name", help="the project's name (its folder)")
    p.add_argument("--dir", default=".", help="where to make the project's folder (default: here)")
    p.set_defaults(func=cmd_create)

    p = sub.add_parser("run", help="run the crew or flow project of this folder")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("flow", help="kick off the flow project of this folder, or draw it")
    p.add_argument("action", choices=["kickoff", "plot"])
    p.set_defaults(func=cmd_flow)

    p = sub.add_parser("replay", help="run the last kickoff again from one of its tasks")
    p.add_argument("-t", "--task_id", "--task-id", dest="task_id", required=True, help="the task's id")
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser("log-tasks-outputs", help="list the tasks of the last kickoff (their ids for replay)")
    p.set_defaults(func=cmd_log_tasks)

    p = sub.add_parser("train", help="train the crew of this folder")
    p.add_argument("-n", "--n_iterations", "--n-iterations", dest="n", type=int, default=5)
    p.add_argument("-f", "--filename", default="trained_agents_data.pkl")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("test", help="test the crew of this folder and score its tasks")
    p.add_argument("-n", "--n_iterations", "--n-iterations", dest="n", type=int, default=3)
    p.add_argument("-m", "--model", default="gpt-4o-mini", help="the model that scores the answers")
    p.set_defaults(func=cmd_test)

    p = sub.add_parser("reset-memories", help="forget what the crews of this folder remembered")
    p.add_argument("-a", "--all", action="store_true", help="memory, knowledge and the last kickoff's outputs")
    p.add_argument("-m", "--memory", action="store_true")
    p.add_argument("-kn", "--knowledge", action="store_true")
    p.add_argument("-akn", "--agent-knowledge", action="store_true")
    p.add_argument("-k", "--kickoff-outputs", action="store_true")
    p.set_defaults(func=cmd_reset_memories)


def _project_call(function: str, *args: str) -> int:
    try:
        run_project(function, args)
    except ProjectError as e:
        raise CliError(str(e)) from None
    return 0


def cmd_create(args: argparse.Namespace) -> int:
    try:
        root = create_project(args.kind, args.name, args.dir)
    except ProjectError as e:
        raise CliError(str(e)) from None
    print(f"made the {args.kind} project {root}: cd there, set MODEL in .env, then `chatagent run`")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    try:
        kind = find_project()[1]
    except ProjectError as e:
        raise CliError(str(e)) from None
    return _project_call("run" if kind == "crew" else "kickoff")


def cmd_flow(args: argparse.Namespace) -> int:
    return _project_call(args.action)


def cmd_replay(args: argparse.Namespace) -> int:
    return _project_call("replay", args.task_id)


def cmd_train(args: argparse.Namespace) -> int:
    return _project_call("train", str(args.n), args.filename)


def cmd_test(args: argparse.Namespace) -> int:
    return _project_call("test", str(args.n), args.model)


def cmd_log_tasks(args: argparse.Namespace) -> int:
    try:
        tasks = stored_tasks()
    except ProjectError as e:
        raise CliError(str(e)) from None
    if not tasks:
        print("no kickoff is stored: run the crew first")
        return 0
    for k, t in enumerate(tasks, 1):
        print(f"Task {k}: {t['task_id']}\n  {' '.join(str(t['description']).split())[:100]}")
    return 0


def cmd_reset_memories(args: argparse.Namespace) -> int:
    chosen = [k for k, on in (("memory", args.memory), ("knowledge", args.knowledge),
                              ("agent_knowledge", args.agent_knowledge), ("kickoff_outputs", args.kickoff_outputs))
              if on]  # fmt: skip
    if args.all:
        chosen = ["all"]
    if not chosen:
        raise CliError("say what to forget: -a (all), -m (memory), -kn (knowledge), -akn, -k (kickoff outputs)")
    try:
        for kind in chosen:
            reset_project_memories(kind)
    except ProjectError as e:
        raise CliError(str(e)) from None
    print(f"forgot: {', '.join(chosen)}")
    return 0


__all__ = ["COMMANDS", "add_crew_parsers"]

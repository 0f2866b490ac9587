"""`chatagent memory list|forget`: what long-term memory keeps about a user, and deleting it."""

from __future__ import annotations

import argparse
import sys
import time

from chatagent.cli.errors import CliError
from chatagent.cli.terminal import printable
from chatagent.memories.store import MemoryStoreError


def add_memory_parser(sub: argparse._SubParsersAction) -> None:  # pyright: ignore[reportPrivateUsage]
    p = sub.add_parser("memory", help="list what long-term memory keeps about a user; forget some of it")
    p.add_argument("action", choices=["list", "forget"])
    p.add_argument("ids", nargs="*", metavar="ID", help="forget: the records to delete (see list)")
    p.add_argument("--all", action="store_true", help="forget: every record of the user")
    p.add_argument("--user", default="local", help="whose memories (a web UI login name; default: local)")
    p.add_argument("--scope", help="list: only this scope")
    p.add_argument(
        "--store", metavar="URL", help="the memory store (default: $CHATAGENT_MEMORY_STORE or the workspace's)"
    )
    p.set_defaults(func=cmd_memory)


def cmd_memory(args: argparse.Namespace) -> int:
    """List a user's memories, newest first, or delete some (by id) or all of them."""
    from chatagent.memories.longterm import LongTermMemory  # numpy (the rag extra): on first use

    try:
        mem = LongTermMemory(args.user, args.store, embedder=None)
        if args.action == "forget":
            if args.all == bool(args.ids):
                raise CliError("forget: give record ids, or --all (not both)")
            if args.all:
                print(f"forgot {mem.forget_all()} memories of {args.user!r}")
                return 0
            missing = [rid for rid in args.ids if not mem.forget(rid)]
            if missing:
                raise CliError(f"no memory {', '.join(map(repr, missing))} for user {args.user!r}")
            print(f"forgot {len(args.ids)} memor{'y' if len(args.ids) == 1 else 'ies'}")
            return 0
        records = mem.list(args.scope)
    except (MemoryStoreError, ValueError) as e:
        raise CliError(str(e)) from None
    for r in records:
        when = time.strftime("%Y-%m-%d", time.localtime(r.updated))
        where = f"session {r.source['session']}" if r.source.get("session") else "remembered"
        line = f"{r.id}\t{when}\t{r.importance:.1f}\t{' '.join(r.scope.split()) or '-'}\t{where}\t{' '.join(r.text.split())}"
        print(printable(line))  # a stored text never drives the terminal, nor shows reversed or hidden
    if not records:
        print(f"no memories for user {args.user!r}", file=sys.stderr)
    return 0

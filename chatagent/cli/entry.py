"""The entry point of the `chatagent` command: parse the command line, log to stderr, take the stop signals, run
the subcommand."""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys
import threading
from collections.abc import Iterator, Sequence

from chatagent import __version__
from chatagent.cli.commands import cmd_chat, cmd_gui, cmd_mcp, cmd_serve, cmd_sessions
from chatagent.cli.crew import COMMANDS as CREW_COMMANDS
from chatagent.cli.crew import add_crew_parsers
from chatagent.cli.errors import CliError
from chatagent.cli.evals import add_eval_parsers
from chatagent.cli.memory import add_memory_parser
from chatagent.cli.terminal import printable
from chatagent.cli.worker import add_parser as add_worker_parser
from chatagent.log import BackgroundHandler
from chatagent.server.conversations import DEFAULT_MAX_PRINCIPAL_BYTES, DEFAULT_MAX_SESSION_BYTES, DEFAULT_MAX_SESSIONS
from chatagent.server.runner import DEFAULT_GRACE, DEFAULT_MAX_CONCURRENCY, DEFAULT_MAX_REQUEST_BYTES
from chatagent.utils.keys import MaskSecretsFilter


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `chatagent` command."""
    parser = argparse.ArgumentParser(prog="chatagent", description="Chat with agents: terminal, web UI, API server.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log more")
    parser.add_argument("--version", action="version", version=f"chatagent {__version__}")
    listed = ",".join(("chat", "gui", "serve", "worker", "mcp", "sessions", "memory", "eval", "traces", *CREW_COMMANDS))
    sub = parser.add_subparsers(dest="command", required=True, metavar="{" + listed + "}")

    def model_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--model", help="model name (default: the configured or embedded model)")
        p.add_argument("--server", help="'dashscope', or the URL of an OpenAI-compatible server")
        p.add_argument("--agent", metavar="MODULE:OBJECT", help="use this agent (an Agent, or a function making one)")

    def store_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--store", metavar="URL", help="the session store (default: $CHATAGENT_SESSION_STORE or the workspace's)"
        )

    def names_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--server-name", action="append", default=[], metavar="NAME",
            help="a name clients reach this server by (the Host header; loopback names and the bound address always "
            "work; '*' any): other Hosts are refused, against DNS rebinding (repeatable)",
        )  # fmt: skip

    p = sub.add_parser("chat", help="chat in the terminal")
    model_args(p)
    p.add_argument("--file", action="append", default=[], metavar="F", help="a file for the agent (repeatable)")
    p.add_argument(
        "--session", metavar="NAME", help="keep this conversation in the session store; resume it if it exists"
    )
    store_arg(p)
    p.set_defaults(func=cmd_chat)

    p = sub.add_parser("sessions", help="list the stored conversations; show or delete one")
    store_arg(p)
    p.add_argument("--user", default="local", help="whose conversations (a web UI login name; default: local)")
    p.add_argument("--show", metavar="ID", help="print this conversation")
    p.add_argument("--delete", metavar="ID", help="delete this conversation")
    p.set_defaults(func=cmd_sessions)
    add_memory_parser(sub)
    add_eval_parsers(sub)

    p = sub.add_parser("gui", help="open the web UI")
    model_args(p)
    p.add_argument("--file", action="append", default=[], metavar="F", help="a file for the Assistant (repeatable)")
    p.add_argument("--dir", metavar="D", help="every file under this directory, for the Assistant")
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: %(default)s)")
    p.add_argument("--port", type=int, default=7860, help="the port to listen on (default: %(default)s)")
    p.add_argument("--title", help="the page title")
    p.add_argument("--auth", action="append", default=[], metavar="USER:PASS", help="require a login (repeatable)")
    p.add_argument(
        "--allow-no-auth", action="store_true",
        help="serve an address other than loopback without --auth (anyone who reaches it can use the agent)",
    )  # fmt: skip
    names_arg(p)
    p.add_argument(
        "--memory", action="store_true", help="the Assistant remembers each user across conversations (see the panel)"
    )
    p.add_argument(
        "--traces", action="store_true", help="record each run and show them on a page of their own (/traces)"
    )
    store_arg(p)
    p.set_defaults(func=cmd_gui)

    p = sub.add_parser("serve", help="serve an agent with the OpenAI chat completions API")
    model_args(p)
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: %(default)s)")
    p.add_argument("--port", type=int, default=8000, help="the port to listen on (default: %(default)s)")
    p.add_argument(
        "--api-key-file", metavar="PATH", help="require the key in this file from clients (default: $CHATAGENT_API_KEY)"
    )
    p.add_argument("--api-key", help="the key on the command line: visible to other users, prefer the two above")
    names_arg(p)
    p.add_argument("--model-name", help="the model id clients see (default: the agent's name)")
    p.add_argument(
        "--max-request-bytes",
        type=int,
        default=DEFAULT_MAX_REQUEST_BYTES,
        help="a request's largest body (default: %(default)s)",
    )
    p.add_argument(
        "--max-concurrency",
        type=int,
        default=DEFAULT_MAX_CONCURRENCY,
        help="runs at once, more get 429 (default: %(default)s)",
    )
    p.add_argument("--max-session-bytes", type=int, default=DEFAULT_MAX_SESSION_BYTES,
                   help="how large one stored conversation may grow (then 413)")  # fmt: skip
    p.add_argument("--max-sessions", type=int, default=DEFAULT_MAX_SESSIONS,
                   help="conversations one client (API key) may keep (then 429)")  # fmt: skip
    p.add_argument("--max-principal-bytes", type=int, default=DEFAULT_MAX_PRINCIPAL_BYTES,
                   help="how much one client's conversations may store in all (then 413)")  # fmt: skip
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="HOST",
        help="let clients' URLs reach this host although it is local or private: a name, address or network (repeatable)",
    )
    p.add_argument(
        "--grace",
        type=float,
        default=DEFAULT_GRACE,
        help="seconds the streams in flight may take to finish on stop (default: %(default)s)",
    )
    p.add_argument(
        "--drain-delay",
        type=float,
        default=0.0,
        metavar="S",
        help="on SIGTERM, /readyz says 503 for S seconds before the server stops taking connections",
    )
    p.add_argument(
        "--jobs", action="store_true", help="also take background jobs at /v1/jobs (chatagent worker runs them)"
    )
    p.add_argument("--job-flow", action="append", default=[], metavar="NAME", help="a flow jobs may name (repeatable)")
    p.add_argument("--dbos-schema", default="dbos", help="with --jobs: the schema of DBOS's tables")
    p.add_argument("--mcp", action="store_true", help="also serve the agent over MCP (streamable HTTP) at /mcp")
    p.add_argument(
        "--expose-tools",
        nargs="*",
        metavar="AGENT",
        help="with --mcp: the agents' own tools are MCP tools "
        "too, through their agents' checks (naming agents: only theirs, checks a call cannot reach or not)",
    )
    p.add_argument("--a2a", action="store_true", help="also serve the agent over A2A (agent card, tasks at /a2a/NAME)")
    p.add_argument("--ag-ui", action="store_true",
                   help="also serve the agent over AG-UI: POST /ag-ui/NAME, events as SSE (needs --api-key)")  # fmt: skip
    p.add_argument("--traces", action="store_true",
                   help="record each run, its client's own: GET /v1/traces, /v1/traces/ID (needs --api-key)")  # fmt: skip
    store_arg(p)
    p.set_defaults(func=cmd_serve)

    add_worker_parser(sub)

    p = sub.add_parser("mcp", help="serve an agent over MCP on stdin/stdout (for desktop and IDE clients)")
    model_args(p)
    p.add_argument(
        "--expose-tools",
        nargs="*",
        metavar="AGENT",
        help="the agents' own tools are MCP tools too, "
        "through their agents' checks (naming agents: only theirs, checks a call cannot reach or not)",
    )
    store_arg(p)
    p.set_defaults(func=cmd_mcp)
    add_crew_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `chatagent` command; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        with log_to_stderr(args), stop_signals():
            return args.func(args)
    except CliError as e:
        print(f"chatagent: error: {printable(str(e))}", file=sys.stderr)  # (it may quote a stored text)
        return 2


@contextlib.contextmanager
def log_to_stderr(args: argparse.Namespace) -> Iterator[None]:
    """Log lines to stderr while the command runs (DEBUG with -v; the chat shows warnings only); the root logger is
    as it was afterwards, so that calling `main()` in a process (tests, notebooks) leaves no handler behind."""
    level = logging.DEBUG if args.verbose else logging.WARNING if args.command == "chat" else logging.INFO
    handler = BackgroundHandler()  # a line never waits for stderr: a serve nobody reads keeps serving
    handler.setFormatter(logging.Formatter("chatagent: %(message)s"))
    handler.addFilter(MaskSecretsFilter())  # no key in any line, ours or a library's
    if not args.verbose:  # other libraries' INFO is per request (HTTP clients log every model call): -v shows it
        handler.addFilter(lambda r: r.levelno >= logging.WARNING or r.name.partition(".")[0] == "chatagent")
    root = logging.getLogger()
    previous = root.level
    root.addHandler(handler)
    root.setLevel(level)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(previous)
        handler.close()  # what is left is written (if stderr takes it within a few seconds)


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(0)


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """Ctrl-C (SIGINT) raises KeyboardInterrupt and SIGTERM exits cleanly, whatever handling this process inherited
    (a background job starts with SIGINT ignored, and an ignored signal stays ignored across exec); the previous
    handlers are restored afterwards. SIGINT stops the answer in the terminal chat and stops `serve` and `gui`;
    SIGTERM stops any of them, closing the run, the server and its connections on the way out."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)

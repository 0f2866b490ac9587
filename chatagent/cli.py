"""The `chatagent` command: chat in the terminal, open the web UI, or serve an agent over the OpenAI API.

    chatagent chat  [--model M] [--server URL] [--agent module:object] [--file F ...] [--session NAME]
    chatagent gui   [--file F ...] [--dir D] [--host H] [--port P] [--agent module:object] [--auth USER:PASS ...]
    chatagent serve [--agent module:object] [--host H] [--port P] [--api-key-file PATH]  (or $CHATAGENT_API_KEY)
                    [--allow-host HOST ...] [--store URL] [--grace SECONDS]
    chatagent sessions [--user U] [--show ID | --delete ID]

Conversations are kept in the session store: --store URL, else $CHATAGENT_SESSION_STORE, else a SQLite file in
the workspace (see `chatagent.sessions`). `chat --session NAME` resumes one; the web UI keeps every user's.

Without --agent the command builds the default agent: the Assistant when it is available, else the
function-calling agent, else the basic chat agent, on the model given by --model/--server or, without
them, on the default model (see `chatagent.llm.registry.default_llm_config`).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from chatagent.agent import Agent
from chatagent.errors import MissingDependencyError
from chatagent.keys import MaskSecretsFilter, clean_api_key, mask_secrets

if TYPE_CHECKING:
    from chatagent.schema import Message
    from chatagent.sessions import Session

logger = logging.getLogger("chatagent.cli")


class CliError(Exception):
    """A mistake in the command line or its inputs: printed without a traceback."""


# ---- building the agent ---------------------------------------------------------------------------------


def llm_config(model: str | None, server: str | None) -> dict | None:
    """The model config from --model/--server; None (the default model) when neither is given."""
    if not model and not server:
        return None
    cfg: dict[str, Any] = {}
    if model:
        cfg["model"] = model
    if server:
        cfg["model_server"] = server
        if server.startswith(("http://", "https://")):
            cfg["api_key"] = os.environ.get("OPENAI_API_KEY") or "EMPTY"
    return cfg


def default_agent(llm: dict | None, files: Sequence[str] = ()) -> Agent:
    """The Assistant if it is available, else FnCallAgent, else BasicAgent (the choice is logged)."""
    try:
        from chatagent.agents.assistant import Assistant
    except ImportError as e:
        logger.info("the Assistant is not available (%s)", e)
    else:
        logger.info("agent: Assistant (%d files)", len(files))
        return Assistant(llm=llm, files=list(files), name="Assistant")
    try:
        from chatagent.agents.fncall import FnCallAgent
    except ImportError as e:
        logger.info("FnCallAgent is not available (%s)", e)
    else:
        logger.info("agent: FnCallAgent (the Assistant is not available)")
        return FnCallAgent(llm=llm, name="Assistant")
    from chatagent.agents.basic import BasicAgent

    logger.info("agent: BasicAgent (neither the Assistant nor FnCallAgent is available)")
    return BasicAgent(llm=llm, name="Assistant")


def load_object(spec: str) -> Any:
    """`module:object` or `path/to/file.py:object`; a class or function found there is called (no arguments)."""
    where, _, attr = spec.rpartition(":")
    if not where or not attr:
        raise CliError(f"--agent {spec!r}: expected module:object or path/to/file.py:object")
    try:
        if where.endswith(".py") or os.sep in where:
            path = Path(where)
            if not path.is_file():
                raise CliError(f"--agent {spec!r}: no such file {where}")
            mod_spec = importlib.util.spec_from_file_location(f"_chatagent_agent_{path.stem}", path)
            if mod_spec is None or mod_spec.loader is None:
                raise CliError(f"--agent {spec!r}: cannot load {where}")
            module = importlib.util.module_from_spec(mod_spec)
            sys.modules[mod_spec.name] = module
            mod_spec.loader.exec_module(module)
        else:
            if os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(where)
    except ImportError as e:
        raise CliError(f"--agent {spec!r}: cannot import {where}: {e}") from None
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise CliError(f"--agent {spec!r}: {where} has no {attr!r}") from None
    if not isinstance(obj, (Agent, list, tuple)) and callable(obj):
        obj = obj()
    return obj


def load_agent(spec: str) -> Agent:
    """A single Agent from `module:object` (for chat and serve)."""
    obj = load_object(spec)
    if not isinstance(obj, Agent):
        raise CliError(f"--agent {spec!r} gave a {type(obj).__name__}, not an Agent")
    return obj


def _check_agent_args(args: argparse.Namespace) -> None:
    if args.agent and (args.model or args.server):
        raise CliError("--agent cannot be combined with --model/--server (the agent brings its own model)")


def _agent_from_args(args: argparse.Namespace, files: Sequence[str] = ()) -> Agent:
    _check_agent_args(args)
    if args.agent:
        return load_agent(args.agent)
    return default_agent(llm_config(args.model, args.server), files)


def collect_files(files: Sequence[str], directory: str | None) -> list[str]:
    """The --file paths (checked to exist) and every readable file under --dir (sorted; others are skipped)."""
    from chatagent.rag.parsers import SUPPORTED_EXTENSIONS

    out = []
    for f in files:
        if not Path(f).is_file():
            raise CliError(f"--file {f}: no such file")
        out.append(str(Path(f).resolve()))
    if directory:
        root = Path(directory)
        if not root.is_dir():
            raise CliError(f"--dir {directory}: no such directory")
        found = sorted(p.resolve() for p in root.rglob("*") if p.is_file() and not p.name.startswith("."))
        readable = [str(p) for p in found if p.suffix.lower().lstrip(".") in SUPPORTED_EXTENSIONS]
        if len(readable) < len(found):
            logger.info(
                "--dir %s: skipping %d files of types that cannot be read", directory, len(found) - len(readable)
            )
        out += readable
    return out


# ---- chat in the terminal -------------------------------------------------------------------------------


class TerminalPrinter:
    """Prints an agent's incremental output: text as it streams, reasoning dimmed, tool calls and results."""

    def __init__(self, out: TextIO, color: bool) -> None:
        self.out = out
        self.dim, self.bold, self.reset = ("\033[2m", "\033[1m", "\033[0m") if color else ("", "", "")
        self.current: tuple[int, str] | None = None  # (index, what) being printed

    def _switch(self, index: int, what: str) -> None:
        if self.current != (index, what):
            if self.current is not None:
                self.out.write(self.reset + "\n")
            self.current = (index, what)
            if what == "reasoning":
                self.out.write(self.dim + "[thinking] ")

    def feed(self, fragments: list) -> None:
        w = self.out.write
        for f in fragments:
            i = f.extra["index"]
            if f.extra.get("replace"):  # what was shown is replaced (a plugin blocked or rewrote the answer)
                self._switch(i, "replaced")
                blocked = f.extra.get("blocked_by")
                w(
                    f"{self.bold}[blocked by {blocked}]{self.reset} "
                    if blocked
                    else f"{self.dim}[replaced]{self.reset} "
                )
                w(f.text)
                continue
            if f.role == "function":
                self._switch(i, "result")
                text = f.text
                w(f"{self.dim}[result of {f.name}] {text[:500]}{' …' if len(text) > 500 else ''}{self.reset}")
                continue
            if f.reasoning_content:
                self._switch(i, "reasoning")
                w(f.reasoning_content)
            if f.text:
                self._switch(i, "text")
                w(f.text)
            if f.function_call is not None:
                self._switch(i, "call")
                w(f"{self.bold}[tool] {f.function_call.name}({f.function_call.arguments}){self.reset}")
        self.out.flush()

    def end(self, note: str = "") -> None:
        self.out.write(self.reset + (f"\n{note}" if note else "") + "\n")
        self.out.flush()
        self.current = None

    def footer(self, answer: list) -> None:
        """After an answer: a note if the token limit cut it, and the sources it came with."""
        final = next((m for m in reversed(answer) if m.role == "assistant" and m.function_call is None), None)
        extra = (final.extra if final is not None else None) or {}
        w = self.out.write
        if extra.get("stop_reason") == "length":
            w(f"{self.dim}[cut off: the answer reached its token limit (max_tokens)]{self.reset}\n")
        elif extra.get("stop_reason") == "repetition":
            w(f"{self.dim}[ended: the model began to repeat itself]{self.reset}\n")
        sources = extra.get("sources")
        if sources:
            from chatagent.rag.chunking import source_label

            w(f"{self.dim}Sources:\n")
            for n, src in enumerate(sources, 1):
                snippet = str(src.get("text", ""))
                w(f"  {n}. {source_label(src)}: {snippet[:100]}{' …' if len(snippet) > 100 else ''}\n")
            w(self.reset)
        self.out.flush()


def ask_approval(waiting: list[dict], read: Callable[[str], str], out: TextIO) -> Message:
    """Ask the user about each tool call waiting for approval (y/N); the approval message that resumes the run."""
    from chatagent.approval import approval_message
    from chatagent.schema import to_message

    decisions: dict[str, bool] = {}
    for call in waiting:
        out.write(f"The agent wants to run {call['name']}({call['arguments']}).\n")
        try:
            answer = read("allow? [y/N] ")
        except (EOFError, KeyboardInterrupt):
            answer = ""
        decisions[call["id"]] = answer.strip().lower() in ("y", "yes")
    reason = ""
    if not all(decisions.values()):
        try:
            reason = read("why not (optional, told to the agent)? ").strip()
        except (EOFError, KeyboardInterrupt):
            reason = ""
    return to_message(approval_message(decisions, reason))


def chat_loop(
    agent: Agent,
    files: Sequence[str] = (),
    *,
    read: Callable[[str], str] = input,
    out: TextIO | None = None,
    color: bool | None = None,
    session: Session | None = None,
) -> None:
    """A terminal chat: each answer streams; Ctrl-C stops the answer (and the model's stream), not the chat.

    A tool call that needs approval is asked about (y/N) before the run goes on.
    /clear starts over, /exit (or Ctrl-D) leaves. `files` are attached to the first message. With `session`, the
    conversation is the stored one and each turn is stored (a stopped answer too, marked interrupted).
    """
    from chatagent.approval import pending_approval
    from chatagent.schema import USER, ContentItem, Message, drop_unanswered_calls
    from chatagent.stream import Response

    if out is None:
        stdout: TextIO = sys.stdout
        out = stdout
    printer = TerminalPrinter(out, out.isatty() if color is None else color)
    history: list[Message] = []
    pending_files = list(files)
    while True:
        try:
            line = read("you> ")
        except (EOFError, KeyboardInterrupt):  # Ctrl-D or Ctrl-C at the prompt: leave
            out.write("\n")
            return
        text = line.strip()
        if not text:
            continue
        if text in ("/exit", "/quit"):
            return
        if text == "/clear":
            history, pending_files = [], list(files)
            if session is not None:
                session.clear()
            out.write("(conversation cleared)\n")
            continue
        if pending_files:
            history.append(Message(USER, [ContentItem(text=text)] + [ContentItem(file=f) for f in pending_files]))
            pending_files = []
        else:
            history.append(Message(USER, text))
        while True:  # a turn, and its resumptions while tool calls wait for the user's approval
            response = Response()
            # with a session, `history` holds only what the store does not have yet
            run = agent.run(history, delta_stream=True, session=session)
            note = ""
            try:
                for fragments in run:
                    response.add(fragments)
                    printer.feed(fragments)
            except KeyboardInterrupt:
                note = "[stopped]"
            except Exception as e:  # shown, and the chat goes on
                logger.debug("the agent failed", exc_info=True)
                note = mask_secrets(f"[error] {type(e).__name__}: {e}")
            finally:
                run.close()
            printer.end(note)
            printer.footer(response.messages)
            if session is not None:
                if not note.startswith("[error]"):  # stored: completed, or stopped (a failed turn is not stored)
                    history = []
            else:
                answer = response.messages
                history.extend(drop_unanswered_calls(answer) if note else answer)
            waiting = None if note else pending_approval(response.messages)
            if not waiting:
                break
            history.append(ask_approval(waiting, read, out))


# ---- the commands ---------------------------------------------------------------------------------------


def cmd_chat(args: argparse.Namespace) -> int:
    files = collect_files(args.file, None)
    agent = _agent_from_args(args, files)
    took_files = not args.agent and _is_assistant(agent)  # the default Assistant was built with the files
    if files and not took_files:
        logger.info("attaching %d files to the first message", len(files))
    try:
        import readline  # noqa: F401  (line editing and history for input())
    except ImportError:
        pass
    session = None
    if args.session:
        session = _session(args.session, args.store)
        count = len(session.messages())
        if count:
            print(f"(resuming {args.session!r}: {count} messages so far; /clear starts it over)")
    chat_loop(agent, () if took_files else files, session=session)
    return 0


def _session(name: str | None, store: str | None) -> Session:
    from chatagent.sessions import Session, SessionStoreError

    try:
        return Session(name, store)
    except (SessionStoreError, ValueError) as e:
        raise CliError(str(e)) from None


def cmd_sessions(args: argparse.Namespace) -> int:
    """List the stored conversations of a user; show or delete one."""
    import time

    from chatagent.sessions import Session, SessionStoreError

    try:
        if args.show or args.delete:
            s = Session(args.show or args.delete, args.store, user=args.user)
            if s.info() is None:
                raise CliError(f"no session {s.id!r} for user {s.user!r} in {s.store.url}")
            if args.delete:
                s.delete()
                print(f"deleted {s.id!r}")
                return 0
            for m in s.messages():
                print(f"{m['role']}: {_text(m)}")
            return 0
        found = Session.list(args.store, user=args.user)
    except (SessionStoreError, ValueError) as e:
        raise CliError(str(e)) from None
    for info in found:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(info.updated))
        print(f"{info.id}\t{info.messages} messages\t{when}\t{info.title}")
    if not found:
        print(f"no sessions for user {args.user!r}", file=sys.stderr)
    return 0


def _text(message: dict) -> str:
    from chatagent.schema import to_message

    m = to_message(message)
    files = [item.value for item in m.content if item.kind != "text"] if isinstance(m.content, list) else []
    call = f" [calls {m.function_call.name}({m.function_call.arguments})]" if m.function_call else ""
    return m.text + "".join(f" [file {f}]" for f in files) + call


def _is_assistant(agent: Agent) -> bool:
    """Whether `agent` is the Assistant (which takes files itself)."""
    try:
        from chatagent.agents.assistant import Assistant
    except ImportError:
        return False
    return isinstance(agent, Assistant)


def cmd_gui(args: argparse.Namespace) -> int:
    try:
        from gui import WebUI
    except ImportError as e:
        raise CliError(f"the web UI needs gradio: pip install 'chatagent[gui]' ({e})") from None
    auth = [_user_and_password(a) for a in args.auth] or None
    files = collect_files(args.file, args.dir)
    _check_agent_args(args)
    if args.agent:
        if files:
            raise CliError("--file/--dir build the default Assistant: give them to your agent instead of --agent")
        agent: Any = load_object(args.agent)
    else:
        agent = default_agent(llm_config(args.model, args.server), files)
        if files and not _is_assistant(agent):
            logger.warning("the Assistant is not available: the web UI's agent does not read --file/--dir")
    config = {"title": args.title} if args.title else {}
    if files:
        names = ", ".join(Path(f).name for f in files[:5]) + (" …" if len(files) > 5 else "")
        config["description"] = f"Files: {names}"
    from chatagent.sessions import SessionStoreError

    try:
        ui = WebUI(agent, chatbot_config=config, conversations=args.store or True)
        ui.run(server_name=args.host, server_port=args.port, auth=auth)
    except (MissingDependencyError, SessionStoreError) as e:
        raise CliError(str(e)) from None
    return 0


def _user_and_password(value: str) -> tuple[str, str]:
    user, sep, password = value.partition(":")
    if not sep or not user or not password:
        raise CliError(f"--auth {value.split(':')[0]}:…: expected USER:PASSWORD")
    return user, password


def cmd_serve(args: argparse.Namespace) -> int:
    from chatagent.server import AgentServer
    from chatagent.sessions import SessionStoreError

    agent = _agent_from_args(args)
    api_key = serve_api_key(args.api_key, args.api_key_file)
    try:
        server = AgentServer(
            agent,
            args.host,
            args.port,
            api_key=api_key,
            model_name=args.model_name,
            max_request_bytes=args.max_request_bytes,
            max_concurrency=args.max_concurrency,
            store=args.store,
            allow_hosts=args.allow_host,
            grace=args.grace,
        )
    except (SessionStoreError, ValueError, OSError) as e:
        raise CliError(str(e)) from None
    print(f"chatagent: serving {server.model_name} on {server.url} (API key {'required' if api_key else 'off'})")
    sys.stdout.flush()
    try:
        server.serve_forever()  # SIGTERM/SIGINT: the streams in flight finish (within --grace), then it returns
    finally:
        server.close()
        agent.close()
    return 0


def serve_api_key(given: str | None, path: str | None) -> str | None:
    """The key clients must send: --api-key-file's content, else --api-key (with a warning: a command line is
    readable by every user of the machine), else $CHATAGENT_API_KEY, else none."""
    if given is not None and path is not None:
        raise CliError("give --api-key or --api-key-file, not both")
    try:
        if path is not None:
            try:
                text = Path(path).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise CliError(f"--api-key-file {path}: cannot read it ({type(e).__name__})") from None
            key = clean_api_key(text, f"the key in {path}")
            if key is None:
                raise CliError(f"--api-key-file {path} is empty")
            return key
        if given is not None:
            logger.warning(
                "--api-key on the command line is visible to every user of this machine (ps, /proc/<pid>/cmdline); "
                "use CHATAGENT_API_KEY or --api-key-file instead"
            )
            return clean_api_key(given, "--api-key")
        return clean_api_key(os.environ.get("CHATAGENT_API_KEY"), "CHATAGENT_API_KEY")
    except ValueError as e:
        raise CliError(str(e)) from None


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `chatagent` command."""
    from chatagent.server import DEFAULT_GRACE, DEFAULT_MAX_CONCURRENCY, DEFAULT_MAX_REQUEST_BYTES

    parser = argparse.ArgumentParser(prog="chatagent", description="Chat with agents: terminal, web UI, API server.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log more")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{chat,gui,serve,sessions}")

    def model_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--model", help="model name (default: the configured or embedded model)")
        p.add_argument("--server", help="'dashscope', or the URL of an OpenAI-compatible server")
        p.add_argument("--agent", metavar="MODULE:OBJECT", help="use this agent (an Agent, or a function making one)")

    def store_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--store", metavar="URL", help="the session store (default: $CHATAGENT_SESSION_STORE or the workspace's)"
        )

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

    p = sub.add_parser("gui", help="open the web UI")
    model_args(p)
    p.add_argument("--file", action="append", default=[], metavar="F", help="a file for the Assistant (repeatable)")
    p.add_argument("--dir", metavar="D", help="every file under this directory, for the Assistant")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=7860)
    p.add_argument("--title", help="the page title")
    p.add_argument("--auth", action="append", default=[], metavar="USER:PASS", help="require a login (repeatable)")
    store_arg(p)
    p.set_defaults(func=cmd_gui)

    p = sub.add_parser("serve", help="serve an agent with the OpenAI chat completions API")
    model_args(p)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument(
        "--api-key-file", metavar="PATH", help="require the key in this file from clients (default: $CHATAGENT_API_KEY)"
    )
    p.add_argument("--api-key", help="the key on the command line: visible to other users, prefer the two above")
    p.add_argument("--model-name", help="the model id clients see (default: the agent's name)")
    p.add_argument("--max-request-bytes", type=int, default=DEFAULT_MAX_REQUEST_BYTES)
    p.add_argument("--max-concurrency", type=int, default=DEFAULT_MAX_CONCURRENCY, help="runs at once (more get 429)")
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="HOST",
        help="let clients' URLs reach this host although it is local or private: a name, address or network (repeatable)",
    )
    p.add_argument(
        "--grace", type=float, default=DEFAULT_GRACE, help="seconds the streams in flight may take to finish on stop"
    )
    store_arg(p)
    p.set_defaults(func=cmd_serve)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `chatagent` command; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        with log_to_stderr(args), stop_signals():
            return args.func(args)
    except CliError as e:
        print(f"chatagent: error: {e}", file=sys.stderr)
        return 2


@contextlib.contextmanager
def log_to_stderr(args: argparse.Namespace) -> Iterator[None]:
    """Log lines to stderr while the command runs (DEBUG with -v; the chat shows warnings only); the root logger is
    as it was afterwards, so that calling `main()` in a process (tests, notebooks) leaves no handler behind."""
    level = logging.DEBUG if args.verbose else logging.WARNING if args.command == "chat" else logging.INFO
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("chatagent: %(message)s"))
    handler.addFilter(MaskSecretsFilter())  # no key in any line, ours or a library's
    if not args.verbose:  # other libraries' INFO is per request (HTTP clients log every model call): -v shows it
        handler.addFilter(lambda r: r.levelno >= logging.WARNING or r.name.partition(".")[0] in ("chatagent", "gui"))
    root = logging.getLogger()
    previous = root.level
    root.addHandler(handler)
    root.setLevel(level)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(previous)


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

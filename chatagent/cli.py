"""The `chatagent` command: chat in the terminal, open the web UI, or serve an agent over the OpenAI API.

    chatagent chat  [--model M] [--server URL] [--agent module:object] [--file F ...]
    chatagent gui   [--file F ...] [--dir D] [--host H] [--port P] [--agent module:object]
    chatagent serve [--agent module:object] [--host H] [--port P] [--api-key K]

Without --agent the command builds the default agent: the Assistant when it is available, else the
function-calling agent, else the basic chat agent, on the model given by --model/--server or, without
them, on the default model (see `chatagent.llm.base.default_llm_config`).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from chatagent.agent import Agent

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


def chat_loop(
    agent: Agent,
    files: Sequence[str] = (),
    *,
    read: Callable[[str], str] = input,
    out: TextIO | None = None,
    color: bool | None = None,
) -> None:
    """A terminal chat: each answer streams; Ctrl-C stops the answer (and the model's stream), not the chat.

    /clear starts over, /exit (or Ctrl-D) leaves. `files` are attached to the first message.
    """
    from chatagent.schema import USER, ContentItem, Message, drop_unanswered_calls
    from chatagent.stream import Response

    out = out or sys.stdout
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
            out.write("(conversation cleared)\n")
            continue
        if pending_files:
            history.append(Message(USER, [ContentItem(text=text)] + [ContentItem(file=f) for f in pending_files]))
            pending_files = []
        else:
            history.append(Message(USER, text))
        response = Response()
        run = agent.run(history, delta_stream=True)
        note = ""
        try:
            for fragments in run:
                response.add(fragments)
                printer.feed(fragments)
        except KeyboardInterrupt:
            note = "[stopped]"
        except Exception as e:  # shown, and the chat goes on
            logger.debug("the agent failed", exc_info=True)
            note = f"[error] {type(e).__name__}: {e}"
        finally:
            run.close()
        printer.end(note)
        answer = response.messages
        printer.footer(answer)
        history.extend(drop_unanswered_calls(answer) if note else answer)


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
    chat_loop(agent, () if took_files else files)
    return 0


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
    WebUI(agent, chatbot_config=config).run(server_name=args.host, server_port=args.port)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from chatagent.server import AgentServer

    agent = _agent_from_args(args)
    api_key = args.api_key or os.environ.get("CHATAGENT_API_KEY") or None
    server = AgentServer(
        agent,
        args.host,
        args.port,
        api_key=api_key,
        model_name=args.model_name,
        max_request_bytes=args.max_request_bytes,
        max_concurrency=args.max_concurrency,
    )
    print(f"chatagent: serving {server.model_name} on {server.url} (API key {'required' if api_key else 'off'})")
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `chatagent` command."""
    from chatagent.server import DEFAULT_MAX_REQUEST_BYTES

    parser = argparse.ArgumentParser(prog="chatagent", description="Chat with agents: terminal, web UI, API server.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log more")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{chat,gui,serve}")

    def model_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--model", help="model name (default: the configured or embedded model)")
        p.add_argument("--server", help="'dashscope', or the URL of an OpenAI-compatible server")
        p.add_argument("--agent", metavar="MODULE:OBJECT", help="use this agent (an Agent, or a function making one)")

    p = sub.add_parser("chat", help="chat in the terminal")
    model_args(p)
    p.add_argument("--file", action="append", default=[], metavar="F", help="a file for the agent (repeatable)")
    p.set_defaults(func=cmd_chat)

    p = sub.add_parser("gui", help="open the web UI")
    model_args(p)
    p.add_argument("--file", action="append", default=[], metavar="F", help="a file for the Assistant (repeatable)")
    p.add_argument("--dir", metavar="D", help="every file under this directory, for the Assistant")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=7860)
    p.add_argument("--title", help="the page title")
    p.set_defaults(func=cmd_gui)

    p = sub.add_parser("serve", help="serve an agent with the OpenAI chat completions API")
    model_args(p)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--api-key", help="require this key from clients (default: $CHATAGENT_API_KEY, else none)")
    p.add_argument("--model-name", help="the model id clients see (default: the agent's name)")
    p.add_argument("--max-request-bytes", type=int, default=DEFAULT_MAX_REQUEST_BYTES)
    p.add_argument("--max-concurrency", type=int, default=32)
    p.set_defaults(func=cmd_serve)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `chatagent` command; returns the exit status."""
    args = build_parser().parse_args(argv)
    level = logging.DEBUG if args.verbose else logging.WARNING if args.command == "chat" else logging.INFO
    logging.basicConfig(level=level, format="chatagent: %(message)s")
    if not args.verbose:
        for noisy in ("httpx", "httpcore", "urllib3"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        return args.func(args)
    except CliError as e:
        print(f"chatagent: error: {e}", file=sys.stderr)
        return 2

"""What each subcommand of `chatagent` does: chat, sessions, gui, serve."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chatagent.cli.build import (
    agent_from_args,
    check_agent_args,
    collect_files,
    default_agent,
    is_assistant,
    llm_config,
    load_object,
)
from chatagent.cli.errors import CliError
from chatagent.cli.terminal import chat_loop, printable
from chatagent.errors import MissingDependencyError
from chatagent.schema import to_message, to_messages
from chatagent.server.runner import AgentServer, serve_mcp_stdio
from chatagent.sessions import Session, SessionStoreError
from chatagent.tools.retrieval import message_files
from chatagent.utils.keys import clean_api_key

if TYPE_CHECKING:
    from chatagent.sessions import Session

logger = logging.getLogger(__name__)


def cmd_chat(args: argparse.Namespace) -> int:
    files = collect_files(args.file, None)
    # with a session the files go with the first message, and so are stored with the conversation
    agent = agent_from_args(args, () if args.session else files)
    took_files = not args.session and not args.agent and is_assistant(agent)  # the Assistant was built with them
    if files and not took_files:
        logger.info("attaching %d files to the first message", len(files))
    try:
        import readline  # noqa: F401  (line editing and history for input())
    except ImportError:
        pass
    session = None
    if args.session:
        session = _session(args.session, args.store)
        stored = session.messages()
        if stored:
            print(f"(resuming {args.session!r}: {len(stored)} messages so far{_files_note(stored)}; "
                  "/clear starts it over)")  # fmt: skip
    chat_loop(agent, () if took_files else files, session=session)
    return 0


def _files_note(stored: list[dict]) -> str:
    """', with its files a.pdf, b.docx' for a stored conversation that has files (they are read again)."""
    names = list(dict.fromkeys(Path(f).name for f in message_files(to_messages(stored))))
    return f", with its files {', '.join(names)}" if names else ", no files"


def _session(name: str | None, store: str | None) -> Session:
    try:
        return Session(name, store)
    except (SessionStoreError, ValueError) as e:
        raise CliError(str(e)) from None


def cmd_sessions(args: argparse.Namespace) -> int:
    """List the stored conversations of a user; show or delete one."""
    import time

    try:
        if args.show or args.delete:
            s = Session(args.show or args.delete, args.store, user=args.user)
            if s.info() is None:
                raise CliError(f"no session {s.id!r} for user {s.user!r} in {s.store.url}")
            if args.delete:
                s.delete()
                print(f"deleted {s.id!r}")
                return 0
            for m in s.messages():  # stored text is shown, never written raw to the terminal
                print(printable(f"{m['role']}: {_text(m)}"))
            return 0
        found = Session.list(args.store, user=args.user)
    except (SessionStoreError, ValueError) as e:
        raise CliError(str(e)) from None
    for info in found:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(info.updated))
        print(printable(f"{info.id}\t{info.messages} messages\t{when}\t{info.title}"))
    if not found:
        print(f"no sessions for user {args.user!r}", file=sys.stderr)
    return 0


def _text(message: dict) -> str:
    m = to_message(message)
    files = [item.value for item in m.content if item.kind != "text"] if isinstance(m.content, list) else []
    call = f" [calls {m.function_call.name}({m.function_call.arguments})]" if m.function_call else ""
    return m.text + "".join(f" [file {f}]" for f in files) + call


def port_taken(host: str, port: int, command: str, make_target: str) -> CliError | None:
    """The error to give when `host:port` cannot be listened on (checked before anything slow is started): it
    says how to choose another port, with this command and with `make`. None when the port is free (or 0)."""
    import errno
    import socket

    if not port:
        return None
    try:
        with socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET):
            return None
    except OSError as e:
        taken = e.errno == errno.EADDRINUSE
        why = "is already in use (another program, or another chatagent)" if taken else f"cannot be used ({e.strerror})"
        other = port + 1 if port < 65535 else 8000
        return CliError(
            f"port {port} on {host} {why}; choose another: chatagent {command} --port {other}"
            f" (with make: make {make_target} ARGS='--port {other}')"
        )


def cmd_gui(args: argparse.Namespace) -> int:
    try:
        from chatagent.gui import WebUI  # gradio: the gui extra, optional
    except ImportError as e:
        raise CliError(f"the web UI needs gradio: pip install 'chatagent[gui]' ({e})") from None
    taken = port_taken(args.host, args.port, "gui", "run")
    if taken is not None:
        raise taken
    auth = [_user_and_password(a) for a in args.auth] or None
    files = collect_files(args.file, args.dir)
    check_agent_args(args)
    if args.agent:
        if files:
            raise CliError("--file/--dir build the default Assistant: give them to your agent instead of --agent")
        if args.memory:
            raise CliError("--memory gives the default Assistant a memory: give your agent memory= instead")
        agent: Any = load_object(args.agent)
    else:
        agent = default_agent(llm_config(args.model, args.server), files, memory=args.memory)
        if (files or args.memory) and not is_assistant(agent):
            logger.warning("the Assistant is not available: the web UI's agent does not read --file/--dir nor remember")
    config = {"title": args.title} if args.title else {}
    if files:
        names = ", ".join(Path(f).name for f in files[:5]) + (" …" if len(files) > 5 else "")
        config["description"] = f"Files: {names}"

    try:
        ui = WebUI(agent, chatbot_config=config, conversations=args.store or True, traces=bool(args.traces))
        ui.run(server_name=args.host, server_port=args.port, auth=auth, server_names=args.server_name,
               allow_unauthenticated=args.allow_no_auth)  # fmt: skip
    except (MissingDependencyError, SessionStoreError, ValueError) as e:
        raise CliError(str(e)) from None
    except OSError as e:  # the port was taken meanwhile (Gradio: 'Cannot find empty port in range: ...')
        raise port_taken(args.host, args.port, "gui", "run") or CliError(str(e)) from None
    return 0


def _user_and_password(value: str) -> tuple[str, str]:
    user, sep, password = value.partition(":")
    if not sep or not user or not password:
        raise CliError(f"--auth {value.split(':')[0]}:…: expected USER:PASSWORD")
    return user, password


def cmd_serve(args: argparse.Namespace) -> int:
    taken = port_taken(args.host, args.port, "serve", "serve")
    if taken is not None:
        raise taken
    agent = agent_from_args(args)
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
            max_session_bytes=args.max_session_bytes,
            max_sessions=args.max_sessions,
            max_principal_bytes=args.max_principal_bytes,
            store=args.store,
            allow_hosts=args.allow_host,
            grace=args.grace,
            drain_delay=args.drain_delay,
            server_names=args.server_name,
            mcp=args.mcp,
            expose_tools=exposed(args.expose_tools),
            a2a=args.a2a,
            ag_ui=args.ag_ui,
            jobs=args.jobs,
            job_flows=args.job_flow,
            dbos_schema=args.dbos_schema,
            traces=args.traces,
        )
    except (SessionStoreError, ValueError, OSError) as e:
        raise CliError(str(e)) from None
    print(f"chatagent: serving {server.model_name} on {server.url} (API key {'required' if api_key else 'off'})"
          + (f", MCP on {server.mcp_url}" if args.mcp else "")
          + (f", A2A on {server.a2a_url}" if args.a2a else "")
          + (f", AG-UI on {server.a2a_url}/ag-ui/NAME" if args.ag_ui else ""))  # fmt: skip
    sys.stdout.flush()
    try:
        server.serve_forever()  # SIGTERM/SIGINT: the streams in flight finish (within --grace), then it returns
    finally:
        server.close()
        agent.close()
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    """MCP over stdio: stdout is the protocol's, so nothing else is printed there (the log goes to stderr)."""
    agent = agent_from_args(args)
    try:
        serve_mcp_stdio(agent, expose_tools=exposed(args.expose_tools), store=args.store)
    except (SessionStoreError, ValueError) as e:
        raise CliError(str(e)) from None
    finally:
        agent.close()
    return 0


def serve_api_key(given: str | None, path: str | None) -> str | list[str] | None:
    """The key clients must send: --api-key-file's content (one key per line: several clients, each its own
    principal), else --api-key (with a warning: a command line is readable by every user of the machine), else
    $CHATAGENT_API_KEY, else none."""
    if given is not None and path is not None:
        raise CliError("give --api-key or --api-key-file, not both")
    try:
        if path is not None:
            try:
                text = Path(path).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise CliError(f"--api-key-file {path}: cannot read it ({type(e).__name__})") from None
            keys = [
                k for n, line in enumerate(text.splitlines(), 1) if (k := clean_api_key(line, f"line {n} of {path}"))
            ]
            if not keys:
                raise CliError(f"--api-key-file {path} is empty")
            return keys[0] if len(keys) == 1 else keys
        if given is not None:
            logger.warning(
                "--api-key on the command line is visible to every user of this machine (ps, /proc/<pid>/cmdline); "
                "use CHATAGENT_API_KEY or --api-key-file instead"
            )
            return clean_api_key(given, "--api-key")
        return clean_api_key(os.environ.get("CHATAGENT_API_KEY"), "CHATAGENT_API_KEY")
    except ValueError as e:
        raise CliError(str(e)) from None


def exposed(names: list[str] | None) -> bool | list[str]:
    """`--expose-tools` (every agent's tools: True), `--expose-tools a b` (those agents'), or absent (False)."""
    return False if names is None else names or True

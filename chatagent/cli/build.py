"""The agent a command runs, from its options: --agent, else the default agent on --model/--server; and the
--file/--dir paths it reads."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chatagent.agent import Agent
from chatagent.agents.fncall import FnCallAgent
from chatagent.cli.errors import CliError

logger = logging.getLogger(__name__)


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


def default_agent(llm: dict | None, files: Sequence[str] = (), memory: bool = False) -> Agent:
    """The Assistant if it is available (with long-term memory in the workspace when `memory`), else FnCallAgent
    (the choice is logged)."""
    assistant = assistant_class()
    if assistant is not None:
        logger.info("agent: Assistant (%d files%s)", len(files), ", long-term memory" if memory else "")
        if memory:
            from chatagent.memories.longterm import LongTermMemory  # numpy, sqlite: on first use

            return assistant(llm=llm, files=list(files), name="Assistant", memory=LongTermMemory())
        return assistant(llm=llm, files=list(files), name="Assistant")
    logger.info("agent: FnCallAgent (the Assistant is not available)")
    return FnCallAgent(llm=llm, name="Assistant")


def assistant_class() -> type[Agent] | None:
    """The Assistant, or None when it cannot be imported (it needs the rag extra; why is logged)."""
    try:
        from chatagent.agents.assistant import Assistant  # the rag extra, optional
    except ImportError as e:
        logger.info("the Assistant is not available (%s)", e)
        return None
    return Assistant


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


def check_agent_args(args: argparse.Namespace) -> None:
    if args.agent and (args.model or args.server):
        raise CliError("--agent cannot be combined with --model/--server (the agent brings its own model)")


def agent_from_args(args: argparse.Namespace, files: Sequence[str] = ()) -> Agent:
    check_agent_args(args)
    if args.agent:
        return load_agent(args.agent)
    return default_agent(llm_config(args.model, args.server), files)


def collect_files(files: Sequence[str], directory: str | None) -> list[str]:
    """The --file paths (checked to exist) and every readable file under --dir (sorted; others are skipped)."""
    from chatagent.rag.parsers import SUPPORTED_EXTENSIONS  # the rag extra, optional

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


def is_assistant(agent: Agent) -> bool:
    """Whether `agent` is the Assistant (which takes files itself)."""
    assistant = assistant_class()
    return assistant is not None and isinstance(agent, assistant)

"""One root for every chatagent error: each exception class the package defines is a `ChatAgentError` (read with
`ast`, so a module whose optional dependency is missing is checked too), keeping the built-in base it had."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import pytest

import chatagent
from chatagent import Blocked, ChatAgentError, LoopExit, MessageError, Retry
from chatagent.errors import MissingDependencyError
from chatagent.rag.embedders import EmbedderError
from chatagent.tools.mcp import MCPServerError
from chatagent.tools.storage import KeyNotExistsError
from chatagent.utils.url_fetch import BlockedURLError, FetchError

PACKAGE = Path(chatagent.__file__).parent
STANDALONE = {"tools/_sandbox_kernel.py"}  # runs inside the sandbox on the standard library alone
# private signals that never leave the module that raises them, outside the root on purpose
PRIVATE_SIGNALS = {
    "flows/flow.py:_Asked",  # a BaseException: a flow method's own `except Exception` must not stop it
    "utils/current_call.py:PendingQuestion",  # a BaseException: a tool's own `except Exception` must not take it
    "run/interrupts.py:Asked",  # a BaseException: a loop's own `except Exception` lets the pause through
    "tools/_reaper.py:_Stop",  # ends the reaper thread's wait
    "tools/validation.py:_Invalid",  # one failed check inside the validator, turned into a ToolArgumentError
}
BUILTIN_EXCEPTIONS = {n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)}


def _base_name(node: ast.expr) -> str:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


def exception_classes() -> dict[str, list[str]]:
    """`file:Class` of every exception class defined in chatagent -> its direct bases' names ("root" appended when
    it descends from ChatAgentError)."""
    classes: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        if where in STANDALONE:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                classes[f"{where}:{node.name}"] = [_base_name(b) for b in node.bases]
    bases_of = {key.rpartition(":")[2]: bases for key, bases in classes.items()}
    return _rooted(classes, bases_of)


def _rooted(classes: dict[str, list[str]], bases_of: dict[str, list[str]]) -> dict[str, list[str]]:
    """The exception classes among `classes`, each with "root" appended when it descends from ChatAgentError."""

    def leads_to(name: str, targets: set[str], seen: frozenset[str]) -> bool:
        if name in targets:
            return True
        return name not in seen and any(leads_to(b, targets, seen | {name}) for b in bases_of.get(name, []))

    out: dict[str, list[str]] = {}
    for key, bases in classes.items():
        name = key.rpartition(":")[2]
        if name == "ChatAgentError" or not any(leads_to(b, BUILTIN_EXCEPTIONS, frozenset()) for b in bases):
            continue
        out[key] = [*bases, "root"] if any(leads_to(b, {"ChatAgentError"}, frozenset()) for b in bases) else bases
    return out


def test_every_exception_chatagent_defines_is_under_chatagent_error() -> None:
    classes = exception_classes()
    assert len(classes) >= 30 and "errors.py:ModelServiceError" in classes  # the scan sees them
    outside = {key for key, bases in classes.items() if "root" not in bases}
    assert outside - PRIVATE_SIGNALS == set(), "make these ChatAgentErrors (keep their built-in base beside it)"
    assert PRIVATE_SIGNALS - outside == set(), "gone or rooted now: remove them from PRIVATE_SIGNALS"


@pytest.mark.parametrize(
    ("error", "builtin"),
    [
        (MessageError, ValueError),
        (KeyNotExistsError, ValueError),
        (EmbedderError, RuntimeError),
        (MCPServerError, RuntimeError),
        (MissingDependencyError, ImportError),
        (BlockedURLError, Exception),
    ],
)
def test_a_rooted_error_is_still_caught_as_it_was(error: type[Exception], builtin: type[Exception]) -> None:
    assert issubclass(error, ChatAgentError) and issubclass(error, builtin)
    with pytest.raises(builtin):
        raise error("x")


def test_the_exits_of_the_loop_are_loop_exits() -> None:
    assert issubclass(LoopExit, ChatAgentError) and issubclass(FetchError, ChatAgentError)
    assert issubclass(Blocked, LoopExit) and issubclass(Retry, LoopExit)
    assert Blocked("no", "policy").message == "no" and Retry("again").feedback == "again"

"""Every test starts its child processes with default signal handling (tests/support/processes.py), so that the
suite behaves the same in the foreground and as a background job (which inherits SIGINT ignored)."""

from __future__ import annotations

import ast
import signal
import sys
from pathlib import Path

import pytest

from tests.support import processes

TESTS = Path(__file__).resolve().parent
STARTERS = {("subprocess", name) for name in ("run", "Popen", "call", "check_call", "check_output", "getoutput")} | {
    ("os", name) for name in ("system", "popen", "spawnv", "spawnvp", "spawnl", "spawnlp", "posix_spawn")
}
STARTERS |= {("asyncio", "create_subprocess_exec"), ("asyncio", "create_subprocess_shell")}


def _resets_signals(call: ast.Call) -> bool:
    for kw in call.keywords:
        if kw.arg == "preexec_fn":
            return True
        if kw.arg is None and isinstance(kw.value, ast.Call) and ast.unparse(kw.value.func).endswith("default_signals"):
            return True
    return False


def test_children_are_started_through_the_helper() -> None:
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        if path == TESTS / "support" / "processes.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            func = node.func
            if (
                isinstance(func.value, ast.Name)
                and (func.value.id, func.attr) in STARTERS
                and not _resets_signals(node)
            ):
                offenders.append(f"{path.relative_to(TESTS)}:{node.lineno}: {ast.unparse(node.func)}")
    assert not offenders, "start children with tests.support.processes.popen/run:\n" + "\n".join(offenders)


SHOW = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"


@pytest.mark.timeout(60)
def test_a_child_gets_default_sigint_even_when_the_suite_ignores_it() -> None:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as in a background job
    try:
        helper = processes.run([sys.executable, "-c", SHOW], capture_output=True, text=True, timeout=30)
        plain = processes.run(
            [sys.executable, "-c", SHOW], capture_output=True, text=True, timeout=30, ignore=[signal.SIGINT]
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    assert helper.stdout.strip() == "True"  # Python installs its KeyboardInterrupt handler only over SIG_DFL
    assert plain.stdout.strip() == "False"  # what the child would get without the reset

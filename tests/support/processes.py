"""Start child processes with default signal handling, whatever the test run inherited.

    from tests.support import processes
    proc = processes.popen([sys.executable, "-m", "chatagent", "serve"], stdout=subprocess.PIPE)
    out = processes.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

A test suite started as a background job (`make test &`, CI runners) inherits SIGINT (and SIGQUIT) as
*ignored*, and an ignored signal stays ignored across exec: a child we then send Ctrl-C to would not
notice. Every test that starts a process goes through `popen`/`run` (or passes `**default_signals()` to
subprocess), which restores SIGINT, SIGTERM and SIGQUIT to their defaults and unblocks every signal in
the child before it executes the program.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterable
from typing import Any

RESET = (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT)


def default_signals(ignore: Iterable[signal.Signals] = ()) -> dict[str, Any]:
    """Keyword arguments for subprocess.Popen/run that start the child with default signal handling (but with the
    signals in `ignore` ignored, to test a program's own handling of what a background job inherits)."""
    ignored = tuple(ignore)

    def restore() -> None:
        for sig in RESET:
            signal.signal(sig, signal.SIG_IGN if sig in ignored else signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, ())

    return {"preexec_fn": restore}


def popen(args: Any, *, ignore: Iterable[signal.Signals] = (), **kwargs: Any) -> subprocess.Popen:
    """subprocess.Popen, the child starting with default signal handling (but `ignore`d signals)."""
    return subprocess.Popen(args, **default_signals(ignore), **kwargs)


def run(args: Any, *, ignore: Iterable[signal.Signals] = (), **kwargs: Any) -> subprocess.CompletedProcess:
    """subprocess.run, the child starting with default signal handling (but `ignore`d signals)."""
    return subprocess.run(args, **default_signals(ignore), **kwargs)


def alive(pid: int) -> bool:
    """Whether `pid` is a live process (not gone, not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False

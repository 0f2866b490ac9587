"""What the user and the model are told when a sandbox cannot start, or when a session's kernel dies."""

from __future__ import annotations

import signal

from chatagent.errors import ChatAgentError
from chatagent.tools._sandbox_limits import Limits
from chatagent.tools._sandbox_protocol import ProtocolError, RunReply

HOW_TO_ISOLATE = (
    "The code interpreter does not run model code without isolation. Install bubblewrap "
    "(Debian/Ubuntu: apt-get install bubblewrap) where it can create namespaces (in a container: allow user "
    "namespaces, or run it with --privileged / a seccomp profile that permits unshare), or opt in to the weaker "
    "process mode with {'sandbox': 'process'} (root only: the code runs as a uid of its own but is not "
    "confined to its directory)."
)


class SandboxError(ChatAgentError, RuntimeError):
    """The sandbox could not be started (a message the user can act on)."""


def startup_failure(bwrap: bool, err: str) -> str:
    """Why a kernel did not start (`err`: what it wrote to stderr) and what to do about it."""
    err = err or "no message"
    if bwrap:
        return f"bubblewrap cannot create a sandbox here ({err}). {HOW_TO_ISOLATE}"
    return (
        f"the sandbox did not start ({err}). Process mode runs the code as a uid of its own: the interpreter "
        "and the work directory must be reachable by other users (pass 'python': '/usr/bin/python3' and a "
        "'work_dir' under /tmp), or use bubblewrap."
    )


def death_reply(
    e: BaseException,
    timeout: float,
    limits: Limits,
    files_lost: bool,
    limit_hit: str | None,
    oom: int,
    returncode: int | None,
) -> RunReply:
    """The reply for a call whose kernel died, hung (`TimeoutError`) or broke the protocol, saying why.

    `limit_hit`: the limit the watchdog stopped the session for; `oom`: the cgroup's OOM kills; `returncode`:
    the kernel's exit code, if it ended.
    """
    lost = "all variables are lost" + (", and the files too" if files_lost else "")
    kind = "crashed"
    if limit_hit:
        error = f"The session went over its {limit_hit}; it was stopped and restarted, so {lost}."
        kind = "memory" if limit_hit.startswith("memory") else "crashed"
    elif isinstance(e, TimeoutError):
        error = (
            f"Timeout: the code did not stop within {timeout:g} seconds and did not answer the interrupt; "
            f"the sandbox was killed and restarted, so {lost}."
        )
        kind = "timeout"
    elif oom:
        error = f"The session ran out of its {limits.memory_mb} MB of memory; it was restarted, so {lost}."
        kind = "memory"
    elif isinstance(e, ProtocolError) and "ended" not in str(e):
        error = f"The sandbox broke its protocol ({e}); it was restarted, so {lost}."
    else:
        why = _death_reason(returncode)
        cause = "the sandbox's memory, CPU-time or process limit, or a crash"
        if why == " (SIGXCPU)":
            cause = f"it used up the CPU time limit of {limits.cpu_seconds} s"
        error = f"The Python process died{why} ({cause}); it was restarted, so {lost}."
    return {"stdout": "", "stderr": "", "result": None, "error": error, "error_kind": kind, "figures": [],
            "dropped": 0, "restarted": True}  # fmt: skip


def _death_reason(returncode: int | None) -> str:
    """' (SIGNAME)' for a process killed by a signal (bubblewrap and the reaper report 128 + n), else ''."""
    if returncode is None or 0 <= returncode <= 128:
        return ""
    num = -returncode if returncode < 0 else returncode - 128
    try:
        return f" ({signal.Signals(num).name})"
    except ValueError:
        return f" (signal {num})"

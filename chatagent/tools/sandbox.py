"""A sandboxed, persistent Python process for the code interpreter.

`Sandbox()` starts `_sandbox_kernel.py` in an isolated process and runs cells in it (`run(code, timeout)`);
variables persist until `close()`, which also ends every process of the session and removes its files.
Two modes, and no silent fallback between them (`SandboxError` says how to get a working one):

- **bubblewrap** (`'auto'`, the default, or `'bwrap'`): no network (own network namespace), own pid namespace,
  a read-only view of only the system and Python directories, and a private work directory: a tmpfs of
  `max_disk_mb` inside the sandbox (the host never reads or writes the session's files by path). As root the
  code runs as a uid of its own, leased so that no other live session has it; otherwise in a user namespace.
- **process** (`'process'`, an explicit opt-in, root only): a plain child process under a reaper, running as a
  leased uid of its own, in a work directory on the host. The filesystem is not confined (the code reads what
  any user can and writes world-writable directories), host processes are visible (not their memory or
  environment), and the work directory has no size limit.

In both modes: no inherited environment, no new privileges (setuid programs give none), limits set before
any model code runs, memory and CPU time limited per session (`chatagent.tools._sandbox_limits`), every
process a call started ended when it returns (unless `keep_processes`), a wall-clock limit per cell, and a
kernel that nothing the host receives from is trusted (`chatagent.tools._sandbox_protocol`).

This module is the public face. The pieces: `_sandbox_session` (the `Sandbox` class), `_sandbox_command` (the
kernel's command line, environment and configuration), `_sandbox_processes` (starting and waiting for processes),
`_sandbox_errors` (what a failed start or a dead kernel is reported as), `_sandbox_limits`, `_sandbox_uids`,
`_sandbox_fs`, `_sandbox_protocol`, and `_sandbox_kernel` (the program that runs inside).
"""

from __future__ import annotations

from chatagent.tools._sandbox_command import bwrap_path
from chatagent.tools._sandbox_errors import SandboxError
from chatagent.tools._sandbox_limits import Limits
from chatagent.tools._sandbox_session import Sandbox, close_all


def isolation_summary(sandbox: Sandbox) -> str:
    """Plain sentences on what the sandbox's isolation guarantees (and, in process mode, what it does not)."""
    lim = sandbox.limits
    who = f"uid {sandbox.uid} (not root, not the agent's user)" if sandbox.uid is not None else None
    memory = "no memory limit"
    if lim.memory_mb is not None:
        how = "enforced by a cgroup" if sandbox.cgroup_limits_memory else "checked every 0.2 s"
        memory = f"{lim.memory_mb} MB of memory for the session ({how})"
    cpu = f"{lim.cpu_seconds} s of CPU for the session" if lim.cpu_seconds is not None else "no CPU limit"
    procs = f"{lim.max_processes} processes" if lim.max_processes is not None else "no process limit"
    ends = "processes a call starts run on until the session ends" if lim.keep_processes else (
        "processes a call starts end with it")  # fmt: skip
    common = f"{memory}, {cpu}, {procs}; no inherited environment, no new privileges; {ends}."
    if sandbox.mode == "bwrap":
        disk = f"{lim.max_disk_mb} MB" if lim.max_disk_mb else "an unlimited"
        return (
            f"Sandbox: bubblewrap — no network, host processes and files hidden (only the system and Python "
            f"directories, read-only), {disk} private work directory, running as "
            f"{who or 'the agent user inside a user namespace'}; {common}"
        )
    net = sandbox.status.get("network")
    net_text = f"no network ({net})" if net else "network NOT blocked"
    return (
        f"Sandbox: plain process (opted in with sandbox='process'), running as {who} — {net_text}; the filesystem "
        "is NOT confined (the code reads what any user may and writes world-writable directories such as /tmp); "
        f"host processes are visible (not their memory or environment); no disk quota; {common}"
    )


__all__ = ["Limits", "Sandbox", "SandboxError", "bwrap_path", "close_all", "isolation_summary"]

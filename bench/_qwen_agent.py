"""Qwen-Agent as the benchmarks' reference: its own virtualenv, made once, and bench/qa_*.py scripts run in it.

    .venv/bin/python bench/_qwen_agent.py            # create the venv if missing, print where it is

The venv lives under the bench cache (CHATAGENT_BENCH_CACHE, default ~/.cache/chatagent-bench) and holds
qwen-agent (pinned) with its [rag] extra, plus the packages its `import qwen_agent.agents` needs but does not
declare (numpy, soundfile, tqdm). Nothing of chatagent is importable there. The qa_*.py scripts run with a
clean, offline environment and a guard (qa_common.py) that refuses any connection that is not loopback; they
print one JSON object as their last line. When the venv cannot be made, `reference()` says why, so that a
bench prints our figures and that reason instead of failing.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

QWEN_AGENT_VERSION = "0.0.34"
REQUIREMENTS = [f"qwen-agent[rag]=={QWEN_AGENT_VERSION}", "numpy", "soundfile", "tqdm"]
BENCH_DIR = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("CHATAGENT_BENCH_CACHE", Path.home() / ".cache" / "chatagent-bench"))
VENV = CACHE / "qwen-agent-venv"
_STAMP = VENV / "chatagent-bench-requirements.json"
_INSTALL_TIMEOUT = 1200.0


class QwenAgentUnavailable(RuntimeError):
    """The Qwen-Agent venv could not be made or a reference script failed; the message says why."""


_failure: list[QwenAgentUnavailable] = []  # a failed setup is not retried within one process


def python() -> Path:
    """The interpreter of the Qwen-Agent venv (it may not exist yet: see ensure_venv)."""
    return VENV / "bin" / "python"


def ensure_venv() -> Path:
    """Create the venv once (a lock guards concurrent benches) and return its interpreter."""
    if _ready():
        return python()
    if _failure:
        raise _failure[0]
    try:
        return _create()
    except QwenAgentUnavailable as exc:
        _failure.append(exc)
        raise


def _create() -> Path:
    """Make the venv: python -m venv, pip install REQUIREMENTS, then check that Qwen-Agent imports offline."""
    CACHE.mkdir(parents=True, exist_ok=True)
    log_path = CACHE / "qwen-agent-venv.log"
    with open(CACHE / "qwen-agent-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _ready():
            return python()
        print(f"creating the Qwen-Agent reference venv in {VENV} (once; log: {log_path}) ...", file=sys.stderr)
        with open(log_path, "w") as log:
            steps = [
                [sys.executable, "-m", "venv", "--clear", str(VENV)],
                [str(python()), "-m", "pip", "install", "--disable-pip-version-check", *REQUIREMENTS],
            ]
            for cmd in steps:
                try:
                    done = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=_INSTALL_TIMEOUT)
                except (OSError, subprocess.TimeoutExpired) as exc:
                    raise QwenAgentUnavailable(f"`{' '.join(cmd)}` failed: {exc}") from exc
                if done.returncode != 0:
                    raise QwenAgentUnavailable(
                        f"`{' '.join(cmd)}` exited {done.returncode}; last lines of {log_path}:\n{_tail(log_path)}"
                    )
        check = _run_python(["-c", "import qa_common; qa_common.guard(); import qwen_agent.agents"], 300)
        if check.returncode != 0:
            raise QwenAgentUnavailable(f"`import qwen_agent.agents` fails in {VENV}:\n{check.stderr[-2000:]}")
        _STAMP.write_text(json.dumps(REQUIREMENTS))
    return python()


def run(script: str, *args: str, timeout: float = 1800.0, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run bench/<script> in the Qwen-Agent venv and return the JSON object it prints last."""
    ensure_venv()
    done = _run_python([str(BENCH_DIR / script), *args], timeout, env)
    if done.returncode != 0:
        raise QwenAgentUnavailable(f"{script} {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    lines = done.stdout.strip().splitlines()
    if not lines:
        raise QwenAgentUnavailable(f"{script} printed nothing; stderr:\n{done.stderr[-3000:]}")
    result = json.loads(lines[-1])
    if result.get("blocked_network"):
        print(f"note: Qwen-Agent tried to reach the network (refused): {result['blocked_network']}", flush=True)
    return result


def reference(script: str, *args: str, timeout: float = 1800.0, env: dict[str, str] | None = None) -> dict | str:
    """Like run(), but never raises: the result, or a one-line reason why Qwen-Agent's figures are missing."""
    try:
        return run(script, *args, timeout=timeout, env=env)
    except (QwenAgentUnavailable, subprocess.TimeoutExpired, OSError, ValueError) as exc:
        return f"Qwen-Agent reference missing: {str(exc).strip()}".replace("\n", "\n    ")


def offline_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a reference run: no proxies, no keys, no user site, hubs offline."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TERM")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    empty = CACHE / "qwen-agent-empty-cache"
    empty.mkdir(parents=True, exist_ok=True)
    env.update(
        {
            "PYTHONNOUSERSITE": "1",
            "NO_PROXY": "*",
            "no_proxy": "*",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TIKTOKEN_CACHE_DIR": str(empty),  # Qwen-Agent ships qwen.tiktoken; a download would be refused
            "OPENAI_API_KEY": "EMPTY",
            "QWEN_AGENT_DEFAULT_WORKSPACE": str(Path(tempfile.gettempdir()) / "qwen-agent-bench-workspace"),
        }
    )
    env.update(extra or {})
    return env


def _run_python(args: list[str], timeout: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(python()), *args],
        cwd=BENCH_DIR,
        env=offline_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _ready() -> bool:
    try:
        return python().exists() and json.loads(_STAMP.read_text()) == REQUIREMENTS
    except (OSError, ValueError):
        return False


def _tail(path: Path, lines: int = 15) -> str:
    text = [line for line in path.read_text(errors="replace").splitlines() if "is ignored" not in line]
    return "\n".join(text[-lines:])


if __name__ == "__main__":
    try:
        print(f"Qwen-Agent {QWEN_AGENT_VERSION} reference venv: {ensure_venv()}")
    except QwenAgentUnavailable as exc:
        sys.exit(f"Qwen-Agent reference missing: {exc}")

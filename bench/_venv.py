"""A reference framework in its own virtualenv, made once, and bench scripts run in it offline.

    QWEN_AGENT = ReferenceVenv("qwen-agent", "Qwen-Agent", ["qwen-agent[rag]==0.0.34", ...], "import qwen_agent.agents")
    result = QWEN_AGENT.reference("qa_stream.py", "e2e", "--url", url)   # a dict, or a one-line reason

The venv lives under the bench cache (CHATAGENT_BENCH_CACHE, default ~/.cache/chatagent-bench) as
`<name>-venv`, holding only the pinned requirements: nothing of chatagent is importable there. Scripts run
there with a clean, offline environment (`offline_env`) and the guard of qa_common.py, which refuses any
connection that is not loopback; they print one JSON object as their last line. When the venv cannot be made,
`reference()` says why, so that a bench prints our figures and that reason instead of failing.
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

BENCH_DIR = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("CHATAGENT_BENCH_CACHE", Path.home() / ".cache" / "chatagent-bench"))
_INSTALL_TIMEOUT = 1200.0


class ReferenceUnavailable(RuntimeError):
    """A reference venv could not be made or a script in it failed; the message says why."""


class ReferenceVenv:
    """One framework's venv: `ensure()` makes it (once, under a lock), `run()` / `reference()` run scripts in it."""

    def __init__(
        self, name: str, label: str, requirements: list[str], check: str, env: dict[str, str] | None = None
    ) -> None:
        self.name = name
        self.label = label  # how figures and messages name the framework
        self.requirements = requirements
        self.check = check  # Python that must run offline in the new venv (e.g. the framework's import)
        self.env = env or {}  # added to the offline environment of every run
        self.venv = CACHE / f"{name}-venv"
        self._stamp = self.venv / "chatagent-bench-requirements.json"
        self._failure: ReferenceUnavailable | None = None  # a failed setup is not retried within one process

    def python(self) -> Path:
        """The venv's interpreter (it may not exist yet: see ensure)."""
        return self.venv / "bin" / "python"

    def ensure(self) -> Path:
        """Create the venv once (a lock guards concurrent benches) and return its interpreter."""
        if self._ready():
            return self.python()
        if self._failure is not None:
            raise self._failure
        try:
            return self._create()
        except ReferenceUnavailable as exc:
            self._failure = exc
            raise

    def _create(self) -> Path:
        """python -m venv, pip install the requirements, then check that the framework works offline."""
        CACHE.mkdir(parents=True, exist_ok=True)
        log_path = CACHE / f"{self.name}-venv.log"
        with open(CACHE / f"{self.name}-venv.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self._ready():
                return self.python()
            print(
                f"creating the {self.label} reference venv in {self.venv} (once; log: {log_path}) ...", file=sys.stderr
            )
            with open(log_path, "w") as log:
                steps = [
                    [sys.executable, "-m", "venv", "--clear", str(self.venv)],
                    [str(self.python()), "-m", "pip", "install", "--disable-pip-version-check", *self.requirements],
                ]
                for cmd in steps:
                    try:
                        done = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=_INSTALL_TIMEOUT)
                    except (OSError, subprocess.TimeoutExpired) as exc:
                        raise ReferenceUnavailable(f"`{' '.join(cmd)}` failed: {exc}") from exc
                    if done.returncode != 0:
                        raise ReferenceUnavailable(
                            f"`{' '.join(cmd)}` exited {done.returncode}; last lines of {log_path}:\n{_tail(log_path)}"
                        )
            check = self._run_python(["-c", f"import qa_common; qa_common.guard(); {self.check}"], 300)
            if check.returncode != 0:
                raise ReferenceUnavailable(f"`{self.check}` fails offline in {self.venv}:\n{check.stderr[-2000:]}")
            self._stamp.write_text(json.dumps(self.requirements))
        return self.python()

    def run(self, script: str, *args: str, timeout: float = 1800.0, env: dict[str, str] | None = None) -> dict:
        """Run bench/<script> in the venv and return the JSON object it prints last."""
        self.ensure()
        return run_script(self.python(), script, *args, timeout=timeout, env={**self.env, **(env or {})})

    def reference(
        self, script: str, *args: str, timeout: float = 1800.0, env: dict[str, str] | None = None
    ) -> dict | str:
        """Like run(), but never raises: the result, or a one-line reason why the figures are missing."""
        try:
            return self.run(script, *args, timeout=timeout, env=env)
        except (ReferenceUnavailable, subprocess.TimeoutExpired, OSError, ValueError) as exc:
            return f"{self.label} reference missing: {str(exc).strip()}".replace("\n", "\n    ")

    def _run_python(self, args: list[str], timeout: float) -> subprocess.CompletedProcess:
        return _python(self.python(), args, timeout, self.env)

    def _ready(self) -> bool:
        try:
            return self.python().exists() and json.loads(self._stamp.read_text()) == self.requirements
        except (OSError, ValueError):
            return False


def run_script(
    python: Path | str, script: str, *args: str, timeout: float = 1800.0, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Run bench/<script> with `python` in the offline environment; the JSON object it prints last."""
    done = _python(python, [str(BENCH_DIR / script), *args], timeout, env)
    if done.returncode != 0:
        raise ReferenceUnavailable(f"{script} {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    lines = done.stdout.strip().splitlines()
    if not lines:
        raise ReferenceUnavailable(f"{script} printed nothing; stderr:\n{done.stderr[-3000:]}")
    result = json.loads(lines[-1])
    if result.get("blocked_network"):
        print(f"note: {script} tried to reach the network (refused): {result['blocked_network']}", flush=True)
    return result


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


def _python(
    python: Path | str, args: list[str], timeout: float, env: dict[str, str] | None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(python), *args], cwd=BENCH_DIR, env=offline_env(env), capture_output=True, text=True, timeout=timeout
    )


def _tail(path: Path, lines: int = 15) -> str:
    text = [line for line in path.read_text(errors="replace").splitlines() if "is ignored" not in line]
    return "\n".join(text[-lines:])


def instructions(python: Path | str, script: str, *args: str, env: dict[str, str] | None = None) -> int:
    """CPU instructions (cachegrind's `I refs`) of bench/<script> run by `python` in the offline environment, which a
    busy machine does not change; ReferenceUnavailable without valgrind or when the script fails."""
    import re
    import shutil

    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise ReferenceUnavailable("valgrind is not installed (apt-get install valgrind)")
    cmd = [valgrind, "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null", str(python),
           str(BENCH_DIR / script), *args]  # fmt: skip
    done = subprocess.run(
        cmd, cwd=BENCH_DIR, env=offline_env({"PYTHONHASHSEED": "0", **(env or {})}), capture_output=True, text=True,
        timeout=3600,
    )  # fmt: skip
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise ReferenceUnavailable(f"{script} {' '.join(args)} under cachegrind exited {done.returncode}:\n"
                                   f"{done.stderr[-2000:]}")  # fmt: skip
    return int(found.group(1).replace(",", ""))

"""Helpers for the attack tests: code interpreters in each mode, and what the host can see of a session."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from chatagent.schema import content_text
from chatagent.tools.code_interpreter import CodeInterpreter
from chatagent.tools.sandbox import bwrap_path

needs_bwrap = pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap is not installed")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox runs as a uid of its own only as root")


def system_python() -> str | None:
    """An interpreter every user can run (process mode needs one): Debian's, when it is reachable."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        real = os.path.realpath(candidate)
        if os.path.exists(real) and all(
            os.stat(p).st_mode & stat.S_IXOTH for p in [real, *map(str, Path(real).parents)]
        ):
            return candidate
    return None


needs_system_python = pytest.mark.skipif(system_python() is None, reason="no interpreter all users can run")


def text(content: str | list) -> str:
    return content if isinstance(content, str) else content_text(content)


@pytest.fixture
def ci(tmp_path: Path) -> Iterator[CodeInterpreter]:
    tool = CodeInterpreter({"timeout": 5, "work_dir": str(tmp_path / "ci"), "sandbox": "bwrap"})
    yield tool
    tool.close()


@pytest.fixture
def ci_process() -> Iterator[CodeInterpreter]:
    """Process mode (its work directory must be reachable by the sandbox's uid: the default, under /tmp)."""
    cfg = {"timeout": 5, "sandbox": "process", "python": system_python()}
    tool = CodeInterpreter(cfg)
    yield tool
    tool.close()


def run(tool: CodeInterpreter, code: str, session: str = "default", **kwargs: object) -> str:
    return text(tool.call({"code": code}, session_id=session, **kwargs))

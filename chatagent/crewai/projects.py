"""Projects in CrewAI's layout: made by `chatagent create crew|flow NAME`, run by `chatagent run` (and `flow kickoff`,
`flow plot`, `replay -t ID`, `train`, `test`, `reset-memories`) from the project's folder.

A project is a folder with a `pyproject.toml` whose `[tool.crewai] type` is 'crew' or 'flow', and its code in
`src/<name>/main.py`; the commands import that module (with `src/` on the path) and call its function of the same
name (`run`, `kickoff`, `plot`, `replay`, `train`, `test`), the command's arguments in `sys.argv[1:]` as CrewAI's
generated scripts read them. `.env` in the folder sets variables the environment does not already have.
"""

from __future__ import annotations

import importlib
import keyword
import os
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from chatagent.crewai.storage import load_kickoff, save_kickoff
from chatagent.crewai.templates import files
from chatagent.errors import ChatAgentError

_NAME = re.compile(r"[^a-z0-9_]+")


class ProjectError(ChatAgentError):
    """A project that cannot be made or run as asked; the message says why."""


def folder_name(name: str) -> str:
    """A project's name as a Python package name: 'My Crew' -> 'my_crew'."""
    made = _NAME.sub("_", name.strip().lower().replace("-", "_")).strip("_")
    if not made or made[0].isdigit() or keyword.iskeyword(made):
        raise ProjectError(f"{name!r} makes no valid project name (letters, digits and _, not starting with a digit)")
    return made


def create_project(kind: str, name: str, parent: str | os.PathLike[str] = ".") -> Path:
    """Write a new `kind` ('crew' or 'flow') project named `name` into a new folder under `parent`; its path."""
    if kind not in ("crew", "flow"):
        raise ProjectError(f"create makes a 'crew' or a 'flow', not {kind!r}")
    folder = folder_name(name)
    root = Path(parent) / folder
    if root.exists():
        raise ProjectError(f"{root} exists already: choose another name or remove it")
    class_name = "".join(part.capitalize() for part in folder.split("_")) + ("Flow" if kind == "flow" else "")
    title = " ".join(part.capitalize() for part in folder.split("_"))
    for path, text in files(kind, folder, class_name, title).items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return root


def find_project(start: str | os.PathLike[str] = ".") -> tuple[Path, str, str]:
    """(the project's folder, its type 'crew' or 'flow', its package name) for the folder `start` is in."""
    here = Path(start).resolve()
    for folder in (here, *here.parents):
        toml = folder / "pyproject.toml"
        if toml.is_file():
            kind, given = _read_pyproject(toml.read_text(encoding="utf-8"))
            if kind not in ("crew", "flow"):
                raise ProjectError(f"{toml} is no crew or flow project ([tool.crewai] type = 'crew' or 'flow')")
            name = folder_name(given or folder.name)
            if not (folder / "src" / name / "main.py").is_file():
                raise ProjectError(f"the project's code is missing: {folder / 'src' / name / 'main.py'}")
            return folder, kind, name
    raise ProjectError("no project here: run this in a folder made by `chatagent create crew|flow NAME`")


def run_project(function: str, args: Sequence[str] = (), start: str | os.PathLike[str] = ".") -> Any:
    """Call `function` of the project's main module (see the module docstring); what it returns."""
    root, _kind, name = find_project(start)
    with _project(root, name, function, args):
        main = importlib.import_module(f"{name}.main")
        fn = getattr(main, function, None)
        if not callable(fn):
            raise ProjectError(f"src/{name}/main.py has no {function}() to call")
        return fn()


def reset_project_memories(command_type: str, start: str | os.PathLike[str] = ".") -> None:
    """Forget what the project's crews remembered (`command_type` as `Crew.reset_memories` takes it): every crew
    of a @CrewBase class in the project's `crew.py` (or its flow's crews)."""
    root, _kind, name = find_project(start)
    with _project(root, name, "reset_memories", ()):
        found = 0
        for module_name in _crew_modules(root / "src" / name, name):
            module = importlib.import_module(module_name)
            for value in vars(module).values():
                if (
                    isinstance(value, type)
                    and getattr(value, "is_crew_class", False)
                    and value.__module__ == module_name
                ):
                    value().crew().reset_memories(command_type=command_type)
                    found += 1
        if not found:
            raise ProjectError(f"no @CrewBase crew found under src/{name}")
        if command_type in ("all", "kickoff_outputs"):
            save_kickoff(None, [])


def _crew_modules(src: Path, name: str) -> list[str]:
    modules = []
    for path in sorted(src.rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if "@CrewBase" in text:
            parts = path.relative_to(src).with_suffix("").parts
            modules.append(".".join((name, *parts)))
    return modules


def stored_tasks(start: str | os.PathLike[str] = ".") -> list[dict[str, Any]]:
    """The tasks of the project's last kickoff ({'task_id', 'description', 'raw', ...}), for `log-tasks-outputs`."""
    root, _kind, name = find_project(start)
    with _project(root, name, "log_tasks_outputs", ()):
        stored = load_kickoff()
    return list(stored["tasks"]) if stored else []


@contextmanager
def _project(root: Path, name: str, function: str, args: Sequence[str]) -> Iterator[None]:
    """The project's `src/` on the path, its folder current, its `.env` read, `sys.argv` as CrewAI's scripts get it;
    all as they were afterwards."""
    saved_path, saved_argv, saved_cwd = list(sys.path), list(sys.argv), os.getcwd()
    added = _read_env(root / ".env")
    sys.path.insert(0, str(root / "src"))
    sys.argv = [function, *args]
    os.chdir(root)
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        sys.path[:], sys.argv = saved_path, saved_argv
        for key in added:
            os.environ.pop(key, None)
        for module in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[module]


def _read_pyproject(text: str) -> tuple[str | None, str | None]:
    """([tool.crewai] type, [project] name) of a pyproject.toml (read by line: tomllib is not in Python 3.10)."""
    table, kind, name = "", None, None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            table = line.strip("[] ")
            continue
        key, _, value = line.partition("=")
        value = value.split("#", 1)[0].strip().strip("'\"")
        if table == "tool.crewai" and key.strip() == "type":
            kind = value
        elif table == "project" and key.strip() == "name":
            name = value
    return kind, name


def _read_env(path: Path) -> list[str]:
    """Set the `KEY=value` lines of `path` the environment does not have; the keys set."""
    if not path.is_file():
        return []
    added = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        key, value = key.strip().removeprefix("export "), value.strip().strip("'\"")
        if key and key not in os.environ:
            os.environ[key] = value
            added.append(key)
    return added


__all__ = ["ProjectError", "create_project", "find_project", "folder_name", "reset_project_memories", "run_project",
           "stored_tasks"]  # fmt: skip

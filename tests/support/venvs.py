"""Virtual environments holding exactly what pyproject.toml declares for chosen extras, built offline.

    env = build_venv(tmp_path / "rag", extras=("rag",))
    run_in(env, "import chatagent.rag.index")

`build_venv` resolves the declared requirements (the core `dependencies` plus each extra's) through the
installed distributions' own metadata, recursively, and links each distribution's files (as listed in its
RECORD) into a fresh venv's site-packages: the result is what `pip install '.[extra]'` gives, without a
network and in well under a second. A directory is linked whole only when every distribution owning files
in it is in the set; otherwise its files are linked one by one, so nothing undeclared leaks in. chatagent is
linked from this worktree.
"""

from __future__ import annotations

import csv
import functools
import re
import subprocess
import venv
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

import tomllib
from packaging.requirements import Requirement

from tests.support.processes import default_signals

REPO = Path(__file__).resolve().parents[2]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(extras: Iterable[str] = ()) -> list[Requirement]:
    """The requirements pyproject.toml declares for the core plus `extras`."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    lines = list(project["dependencies"])
    for extra in extras:
        lines += project["optional-dependencies"][extra]
    return [Requirement(line) for line in lines]


def closure(requirements: Iterable[Requirement]) -> dict[str, metadata.Distribution]:
    """Every installed distribution `requirements` pull in (canonical name -> distribution), markers evaluated."""
    found: dict[str, metadata.Distribution] = {}
    todo = [(r, "") for r in requirements]
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        name = canonical(req.name)
        dist = found.get(name)
        if dist is None:
            dist = found[name] = metadata.distribution(req.name)
            if not req.specifier.contains(dist.version, prereleases=True):
                raise RuntimeError(f"{req.name} {dist.version} installed does not satisfy {req}")
            todo += [(Requirement(r), "") for r in dist.requires or ()]
        for wanted in req.extras:
            todo += [(Requirement(r), wanted) for r in dist.requires or () if "extra" in r]
    return found


def _record(dist: metadata.Distribution) -> list[str] | None:
    """The paths (relative to its site directory, "/"-separated) a distribution installed, from its RECORD."""
    text = dist.read_text("RECORD")
    if text is None:
        return None
    return [row[0] for row in csv.reader(text.splitlines()) if row and not row[0].startswith("../")]


@functools.cache
def _top_level_owners() -> dict[tuple[Path, str], frozenset[str]]:
    """(site directory, top-level name) -> the canonical names of every installed distribution with files there."""
    owners: dict[tuple[Path, str], set[str]] = {}
    for dist in metadata.distributions():
        site = Path(dist.locate_file("")).resolve()
        name = canonical(dist.metadata["Name"])
        for top in {path.split("/", 1)[0] for path in _record(dist) or ()}:
            owners.setdefault((site, top), set()).add(name)
    return {key: frozenset(names) for key, names in owners.items()}


def build_venv(path: Path, extras: Iterable[str] = ()) -> Path:
    """A venv at `path` with chatagent and exactly the distributions declared for the core and `extras`."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(path)
    site = Path(
        subprocess.run(
            [str(path / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
            **default_signals(),
        ).stdout.strip()
    )
    dists = closure(declared(extras))
    wanted = frozenset(dists)
    owners = _top_level_owners()
    for dist in dists.values():
        source = Path(dist.locate_file("")).resolve()
        files = _record(dist)
        if files is None:
            raise RuntimeError(f"{dist.metadata['Name']} has no RECORD: cannot tell its files")
        for rel in files:
            top = rel.split("/", 1)[0]
            # a top-level entry only wanted distributions own is linked whole (with its __pycache__);
            # one shared with an unwanted distribution (a namespace package) file by file
            link = top if owners[(source, top)] <= wanted else rel
            target = site / link
            if target.is_symlink() or target.exists():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(source / link)
    (site / "chatagent").symlink_to(REPO / "chatagent")
    return path


def run_in(env: Path, code: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run `code` with the venv's Python, outside the repository (so only the venv's packages import)."""
    # -I: no PYTHON* variables, no user site, no current directory; -B: write no bytecode into the linked
    # directories, which belong to the environment they were linked from
    return subprocess.run(
        [str(env / "bin" / "python"), "-I", "-B", "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=env,
        **default_signals(),
    )


__all__ = ["REPO", "build_venv", "closure", "declared", "run_in"]

"""Measures of the code itself, read with `ast`: the figures the run machinery's rules hold (tests/core/test_run_rules.py)
and the closing note of docs/architecture.md gives.

- a *pump*: a function that steps another generator by hand (`.send`, `.throw`, `.asend`, `.athrow`, or the run's
  `step`/`_step`) and yields itself: it passes a loop's items on to whoever iterates it;
- a *twin pair*: two functions of one scope (a module, a class, a function) named `x` and `ax`, `async_x` or
  `x_async` (after the same leading underscores: `_x`/`_ax`): one job written for the sync side and again for the
  async one (the names say so; the issue's figures, 61 on main before the Stage step, count the same way);
- the *complexity* of a function: McCabe's, as flake8's `mccabe` and ruff's C901 count it: 1 + its branching
  statements (each `if` and `elif`, `for`, `while`, `except`, `case`); its nested functions and classes count on
  their own (C901 adds a nested function to its parent's figure);
- `getattr(agent` and `cast(` calls: where run/ reaches past the Runnable contract or around the type checker;
- method calls by name (`send`, `iter_bytes`): where llm/ sends a request and reads a stream (one transport).

    .venv/bin/python -m tests.support.code_measures            # prints them for chatagent/
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "chatagent"
RUN = PACKAGE / "run"
DRIVERS = ("drive", "adrive")  # the pumps that carry requests out (chatagent/run/driver.py)
_STEPPING_METHODS = frozenset({"send", "throw", "asend", "athrow"})
_STEPPING_FUNCTIONS = frozenset({"step", "_step"})
_FUNCTION = (ast.FunctionDef, ast.AsyncFunctionDef)
_SCOPE = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def py_files(root: Path) -> list[Path]:
    return sorted(root.rglob("*.py"))


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def own_nodes(fn: ast.AST) -> Iterator[ast.AST]:
    """The nodes of `fn`'s own body: not those of the functions and classes defined inside it (lambdas count as
    `fn`'s own)."""
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))


def functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function of `tree` (nested ones and methods too), with its qualified name."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, _FUNCTION):
            name = f"{prefix}{node.name}"
            yield name, node
            yield from functions(node, f"{name}.")
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, f"{prefix}{node.name}.")
        else:
            yield from functions(node, prefix)


def complexity(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """McCabe's cyclomatic complexity of `fn` (see the module docstring)."""
    n = 1
    for node in own_nodes(fn):
        if isinstance(node, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.ExceptHandler, ast.match_case)):
            n += 1
    return n


def complexities(paths: list[Path]) -> dict[str, int]:
    """`file:function` -> its complexity."""
    return {f"{p.name}:{name}": complexity(fn) for p in paths for name, fn in functions(_tree(p))}


def _names_stepping(node: ast.Attribute | ast.Name) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr in _STEPPING_METHODS
    return node.id in _STEPPING_FUNCTIONS


def is_pump(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether `fn` steps another generator by hand and yields (see the module docstring)."""
    yields = steps = False
    for node in own_nodes(fn):
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            yields = True
        elif isinstance(node, (ast.Attribute, ast.Name)):
            steps = steps or _names_stepping(node)
    return yields and steps


def pumps(paths: list[Path]) -> dict[str, int]:
    """`file:function` -> its lines, for every pump in `paths`."""
    found = {}
    for p in paths:
        for name, fn in functions(_tree(p)):
            if is_pump(fn):
                found[f"{p.name}:{name}"] = (fn.end_lineno or fn.lineno) - fn.lineno + 1
    return found


_TWIN_FORMS = ("a{}", "async_{}", "{}_async")


def _scopes(tree: ast.AST) -> Iterator[list[ast.FunctionDef | ast.AsyncFunctionDef]]:
    """The functions defined directly in each scope of `tree` (the module, each class, each function)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            yield [c for c in ast.iter_child_nodes(node) if isinstance(c, _FUNCTION)]


def twin_pairs(paths: list[Path]) -> list[str]:
    """`file:x/ax` for every twin pair in `paths` (see the module docstring)."""
    found = []
    for p in paths:
        for scope in _scopes(_tree(p)):
            by_name = {fn.name: fn for fn in scope}
            for name, fn in by_name.items():
                bare = name.lstrip("_")
                under = name[: len(name) - len(bare)]
                for form in _TWIN_FORMS:
                    twin = by_name.get(under + form.format(bare))
                    if twin is not None and twin is not fn:
                        found.append(f"{p.name}:{name}/{twin.name}")
    return found


def calls_named(paths: list[Path], name: str) -> list[str]:
    """`file:line` of every call of the plain name `name` (`cast(...)`)."""
    return [
        f"{p.name}:{node.lineno}"
        for p in paths
        for node in ast.walk(_tree(p))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name
    ]


def method_calls(paths: list[Path], names: frozenset[str]) -> list[str]:
    """`file:line` of every call of a method named in `names` (`client.send(...)`, `response.iter_bytes()`)."""
    return [
        f"{p.name}:{node.lineno}"
        for p in paths
        for node in ast.walk(_tree(p))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in names
    ]


_GETATTR_AGENT = re.compile(r"\bgetattr\(\s*agent\b")


def agent_getattrs(paths: list[Path]) -> list[str]:
    """`file:line` of every `getattr(agent, ...)`: a member read past the Runnable contract."""
    return [
        f"{p.name}:{n}"
        for p in paths
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if _GETATTR_AGENT.search(line)
    ]


def _main() -> Iterator[str]:
    run = py_files(RUN)
    found = pumps(run)
    others = {k: v for k, v in found.items() if k.split(":")[1] not in DRIVERS}
    files = len({k.split(":")[0] for k in others})
    yield f"pumps in run/ besides the drivers: {len(others)} in {files} files, {sum(others.values())} lines"
    yield f"  {', '.join(f'{k} ({v})' for k, v in sorted(others.items()))}"
    package = twin_pairs(py_files(PACKAGE))
    yield f"twin pairs in chatagent/: {len(package)}"
    for f in ("run/start.py", "llm/routing.py", "llm/fncall_prompt.py", "llm/recovered_calls.py"):
        path = PACKAGE / f
        yield f"  in {f}: {twin_pairs([path]) if path.exists() else '(gone)'}"
    ranked = sorted(complexities(run).items(), key=lambda kv: -kv[1])
    yield f"complexity in run/, the highest: {', '.join(f'{k} {v}' for k, v in ranked[:6])}"
    yield f"getattr(agent in run/: {agent_getattrs(run)}"
    yield f"cast( in run/: {len(calls_named(run, 'cast'))}"


if __name__ == "__main__":
    print("\n".join(_main()))

"""The import rules of docs/architecture.md: no import cycles, no upward imports.

Every module of `chatagent` is read with `ast`; every import counts: top-level, inside functions and under
`if TYPE_CHECKING:` alike (a type-level cycle is a cycle). `from pkg import sub` counts as an import of the submodule
`pkg.sub`.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("chatagent",)

# The layers, bottom first (docs/architecture.md). A module may import its own layer or any layer below it.
# A prefix names a module and everything under it (the longest matching prefix wins); "=name" names one module.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("utils", ("chatagent.utils", "=chatagent.errors", "=chatagent.log")),  # leaf helpers; errors; the logger
    ("schema", ("chatagent.schema",)),  # messages, fragments and how they add up
    ("llm", ("chatagent.llm",)),
    ("rag", ("chatagent.rag",)),
    ("sessions", ("chatagent.sessions",)),
    ("tools", ("chatagent.tools",)),
    ("run", ("chatagent.run",)),  # the run machinery, named by phase; it knows agents only as run.protocol.Runnable
    ("memories", ("chatagent.memories",)),  # long-term memory per user: store, recall, its tools and context
    ("plugins", ("chatagent.plugins",)),  # the built-in plugins
    ("evals", ("chatagent.evals",)),  # evaluations: datasets, evaluators, evaluate, reports
    ("agent", ("=chatagent.agent",)),  # Agent: implements Runnable
    ("agents", ("chatagent.agents",)),
    ("flows", ("chatagent.flows",)),  # event-driven processes of methods, their state persisted
    ("workers", ("chatagent.workers",)),  # jobs on DBOS workers: turns, flows, crews, batch work
    ("apps", ("=chatagent", "=chatagent.__main__", "chatagent.server", "chatagent.cli", "chatagent.gui")),
    # documented and Qwen-Agent module paths that re-export from the layers below (nothing of ours imports them)
    (
        "faces",
        (
            "=chatagent.events",
            "=chatagent.telemetry",
            "=chatagent.memory",
            "=chatagent.multi_agent_hub",
            "=chatagent.settings",
            "chatagent.utils.output_beautify",
            "=chatagent.utils.utils",
        ),
    ),
]
# Layers that share a rank: neither imports the other.
SIBLINGS = [{"llm", "rag"}, {"sessions", "tools"}]

# Cycles still to remove, each a sorted tuple of its modules. The test fails on any other cycle, and on a listed
# one that is gone (so the list only shrinks).
KNOWN_CYCLES: set[tuple[str, ...]] = set()
# Upward imports still to remove, as `upward_imports` words them; the same rule: only shrinks.
KNOWN_UPWARD: set[str] = set()


@cache
def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _own_module(name: str) -> str | None:
    """The longest prefix of the dotted `name` that is one of our modules."""
    known = modules()
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, source: str) -> set[str]:
    """Our modules that `module` imports anywhere in `source`."""
    tree = ast.parse(source)
    is_package = modules()[module].name == "__init__.py"
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(filter(None, (_own_module(a.name) for a in node.names)))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = module.split(".") if is_package else module.split(".")[:-1]
                here = here[: len(here) - node.level + 1]
                base = ".".join(here + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                target = sub if sub in modules() else _own_module(base)
                if target:
                    targets.add(target)
    targets.discard(module)
    return targets


@cache
def import_graph() -> dict[str, frozenset[str]]:
    return {m: frozenset(imports_of(m, p.read_text(encoding="utf-8"))) for m, p in modules().items()}


def cycles(graph: dict[str, frozenset[str]]) -> set[tuple[str, ...]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[tuple[str, ...]] = set()
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.add(tuple(sorted(component)))
    return found


def layer_of(module: str) -> str:
    best = ("", "")
    for name, prefixes in LAYERS:
        for prefix in prefixes:
            exact = prefix.startswith("=")
            prefix = prefix.removeprefix("=")
            matches = module == prefix or (not exact and module.startswith(prefix + "."))
            if matches and len(prefix) > len(best[1]):
                best = (name, prefix)
    if not best[0]:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS and to docs/architecture.md")
    return best[0]


def rank(layer: str) -> int:
    names = [name for name, _ in LAYERS]
    position = names.index(layer)
    # siblings share the rank of the lowest of them
    for group in SIBLINGS:
        if layer in group:
            position = min(names.index(n) for n in group)
    return position


def upward_imports(graph: dict[str, frozenset[str]]) -> list[str]:
    bad = []
    for module, targets in sorted(graph.items()):
        mine = layer_of(module)
        for target in sorted(targets):
            theirs = layer_of(target)
            if rank(theirs) > rank(mine) or (rank(theirs) == rank(mine) and theirs != mine):
                bad.append(f"{module} ({mine}) imports {target} ({theirs})")
    return bad


def test_every_module_has_a_layer() -> None:
    for module in modules():
        layer_of(module)


def test_a_new_module_needs_a_layer() -> None:
    with pytest.raises(AssertionError, match="chatagent.newthing is in no layer"):
        layer_of("chatagent.newthing")
    assert layer_of("chatagent") == "apps"
    assert layer_of("chatagent.llm.fncall.parser") == "llm"


def test_no_upward_imports() -> None:
    found = set(upward_imports(import_graph()))
    assert found - KNOWN_UPWARD == set(), "new upward imports"
    assert KNOWN_UPWARD - found == set(), "these upward imports are gone: remove them from KNOWN_UPWARD"


def test_no_new_import_cycles() -> None:
    found = cycles(import_graph())
    assert found - KNOWN_CYCLES == set(), "new import cycles"
    assert KNOWN_CYCLES - found == set(), "these cycles are gone: remove them from KNOWN_CYCLES"


def test_the_rules_catch_a_cycle_an_upward_import_and_a_function_level_import() -> None:
    graph = dict(import_graph())
    # a function-level import of the agent from the schema: upward, and a cycle schema -> agent -> schema
    source = "def f():\n    from chatagent.agent import Agent\n"
    graph["chatagent.schema"] = frozenset(imports_of("chatagent.schema", source))
    assert graph["chatagent.schema"] == {"chatagent.agent"}
    assert "chatagent.schema (schema) imports chatagent.agent (agent)" in upward_imports(graph)
    assert any({"chatagent.schema", "chatagent.agent"} <= set(c) for c in cycles(graph) - KNOWN_CYCLES)


def test_type_checking_imports_count() -> None:
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from chatagent.agent import Agent\n"
    assert imports_of("chatagent.schema", source) == {"chatagent.agent"}


@pytest.mark.parametrize("layer", ["llm", "rag"])
def test_siblings_do_not_import_each_other(layer: str) -> None:
    other = {"llm": "chatagent.rag.store", "rag": "chatagent.llm.base"}[layer]
    module = {"llm": "chatagent.llm.base", "rag": "chatagent.rag.store"}[layer]
    graph = dict(import_graph())
    graph[module] = frozenset(graph[module] | {other})
    assert any(line.startswith(module + " ") for line in upward_imports(graph))

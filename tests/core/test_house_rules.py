"""The house rules of docs/architecture.md that are not about imports between layers: how many modules stand at the
top, how long a module may grow, what a function-level import is for, and that the map names every layer's folders.

The layer rules themselves (no cycles, no upward imports, nothing under run/ importing an agent) are in
test_import_rules.py.
"""

from __future__ import annotations

import ast
import contextlib
import re
from pathlib import Path

from tests.core.test_import_rules import LAYERS, ROOT, import_graph, modules

PACKAGE = ROOT / "chatagent"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
MAX_TOP_LEVEL = 12  # .py files directly in chatagent/
MAX_LINES = 500  # lines in one module
MAX_FUNCTION_IMPORTS = 40  # imports of our own modules inside functions, in chatagent/


def our_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def function_level_imports(paths: list[Path]) -> list[tuple[str, int, str]]:
    """(file, line, the line's text) of every import of our own modules inside a function."""
    found = []
    for path in paths:
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        seen: set[int] = set()
        for fn in ast.walk(ast.parse(source)):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom):
                    ours = node.level > 0 or (node.module or "").split(".")[0] == "chatagent"
                elif isinstance(node, ast.Import):
                    ours = any(a.name.split(".")[0] == "chatagent" for a in node.names)
                else:
                    continue
                if ours and node.lineno not in seen:
                    seen.add(node.lineno)
                    found.append((path.name, node.lineno, lines[(node.end_lineno or node.lineno) - 1]))
    return found


def test_few_modules_stand_at_the_top() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL, top


def test_no_module_is_too_long() -> None:
    long = {}
    for path in our_files():
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > MAX_LINES:
            long[str(path.relative_to(ROOT))] = n
    assert not long, f"split these by job: {long}"


def test_function_level_imports_are_few_and_say_why() -> None:
    found = function_level_imports(our_files())
    assert len(found) <= MAX_FUNCTION_IMPORTS, [f"{f}:{n}" for f, n, _ in found]
    unexplained = [f"{f}:{n}" for f, n, text in found if "#" not in text]
    assert not unexplained, "a function-level import is for a heavy or optional dependency: say which in a comment"


def test_the_rule_sees_function_level_imports_and_their_comments(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "import json\nfrom chatagent.schema import Message\n\n"
        "def f():\n    import os\n    from chatagent.llm import base  # heavy\n\n"
        "async def g():\n    import chatagent.rag\n    from chatagent.gui import (\n        WebUI,\n    )  # gradio\n"
    )
    found = function_level_imports([module])
    assert [(n, "#" in text) for _, n, text in found] == [(6, True), (9, False), (10, True)]


def test_the_run_machinery_imports_no_agent() -> None:
    graph = import_graph()
    bad = {
        m: sorted(t for t in targets if t == "chatagent.agent" or t.startswith("chatagent.agents"))
        for m, targets in graph.items()
        if m.startswith("chatagent.run")
    }
    assert not {m: t for m, t in bad.items() if t}


def _short(prefix: str) -> str:
    """How docs/architecture.md names a LAYERS entry: `utils/` for a folder, `errors` for a module."""
    name = prefix.removeprefix("=")
    if name == "chatagent":
        return "chatagent/__init__"
    short = name.removeprefix("chatagent.")
    is_folder = modules().get(name, Path()).name == "__init__.py" and not prefix.startswith("=")
    return short + "/" if is_folder else short


def test_the_map_names_every_layer_and_its_folders() -> None:
    rows = {}
    for line in ARCHITECTURE.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^\|\s*(\w+)\s*\|(.*)$", line)
        if m:
            rows[m[1]] = m[2]
    missing = [
        f"{layer}: `{_short(p)}`"
        for layer, prefixes in LAYERS
        for p in prefixes
        if f"`{_short(p)}`" not in rows.get(layer, "")
    ]
    assert not missing, "docs/architecture.md's table must name them"


RUN_CORE = ("run", "plugins")  # folders of chatagent/ whose code may not reach into other modules' objects


def private_reaches(path: Path) -> list[str]:
    """`obj._name` in `path` where obj is not self/cls and `_name` is not defined in that module: reaching into
    another module's object (its private attributes are not part of what it offers)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    own = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    for node in ast.walk(tree):
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        own |= {t.attr for t in targets if isinstance(t, ast.Attribute)}
        own |= {t.id for t in targets if isinstance(t, ast.Name)}
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets):
            with contextlib.suppress(ValueError):
                own |= set(ast.literal_eval(node.value))
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        if node.attr not in own:
            found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_run_core_reaches_into_no_other_modules_objects() -> None:
    files = [p for folder in RUN_CORE for p in sorted((PACKAGE / folder).rglob("*.py"))] + [PACKAGE / "agent.py"]
    assert not [hit for p in files for hit in private_reaches(p)]


def test_the_private_rule_sees_a_reach(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "class A:\n    def f(self, agent):\n        self._x = 1\n        return agent._run_tool(), self._x\n"
    )
    assert [hit.split(": ")[1] for hit in private_reaches(module)] == ["agent._run_tool"]

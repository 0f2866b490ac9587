"""Every ModelServiceError code chatagent raises itself is declared in ModelErrorCode and spelled through it."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import chatagent
from chatagent import ModelErrorCode, ModelServiceError

PACKAGE = Path(chatagent.__file__).parent


def _code_uses() -> list[tuple[str, ast.expr]]:
    """(where, expression) for each code given to ModelServiceError and each value `.code` is compared with."""
    uses = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            where = f"{path.relative_to(PACKAGE.parent)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                if name == "ModelServiceError":
                    code = (
                        node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "code"), None)
                    )
                    if code is not None:
                        uses.append((where, code))
            elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute) and node.left.attr == "code":
                for right in node.comparators:
                    uses.extend(
                        (where, e) for e in (right.elts if isinstance(right, (ast.Tuple, ast.Set)) else [right])
                    )
    return uses


def test_every_code_chatagent_raises_is_a_declared_constant():
    uses = _code_uses()
    assert len(uses) > 30  # the scan sees the raise sites (a broken walk would pass an empty list)
    literal = [f"{w}: {ast.unparse(e)}" for w, e in uses if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    assert not literal, "spell these codes as ModelErrorCode members (declare new ones there):\n" + "\n".join(literal)
    undeclared = [
        f"{w}: {ast.unparse(e)}"
        for w, e in uses
        if isinstance(e, ast.Attribute)
        and isinstance(e.value, ast.Name)
        and e.value.id == "ModelErrorCode"
        and e.attr not in ModelErrorCode.__members__
    ]
    assert not undeclared, undeclared
    source = "".join(p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py"))
    unused = [name for name in ModelErrorCode.__members__ if f"ModelErrorCode.{name}" not in source]
    assert not unused, f"declared but never raised: {unused}"


def test_a_code_reads_as_its_text_everywhere():
    e = ModelServiceError(ModelErrorCode.CONTEXT_TOO_LONG, "too long")
    assert str(e) == "context_too_long: too long"
    assert e.code == "context_too_long" and f"{e.code}" == "context_too_long" and str(e.code) == "context_too_long"
    assert json.dumps({"code": e.code}) == '{"code": "context_too_long"}'
    assert ModelErrorCode("timeout") is ModelErrorCode.TIMEOUT

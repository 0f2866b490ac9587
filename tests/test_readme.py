"""The README is the user's manual: its Python snippets must at least be valid Python, and the names they
import from chatagent must exist."""

import importlib
import re
import textwrap
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_readme_has_snippets():
    assert len(BLOCKS) > 20


@pytest.mark.parametrize("n", range(len(BLOCKS)))
def test_snippet_compiles_and_its_imports_exist(n):
    code = textwrap.dedent(BLOCKS[n])
    compile(code, f"README.md python block {n}", "exec")
    for module, names in re.findall(r"^from ((?:chatagent|gui)[\w.]*) import ([^\n(]+)$", code, flags=re.M):
        mod = importlib.import_module(module)
        for name in (x.strip() for x in names.split(",")):
            assert hasattr(mod, name), f"README block {n}: {module} has no {name}"

"""The README and the pages under docs/ are the user's manual: every ```python block in them runs.

Each block runs in a fresh process (tests/support/readme_runner.py) in a scratch directory holding the files the
snippets name, with its own CHATAGENT_WORKSPACE, in a network namespace of its own where the loopback
OpenAI-compatible and DashScope servers stand in for the real ones. The scratch directory and the workspace stand
in for the reader's: a block may leave nothing new in the first, nor write the stores of the second (memories,
conversations, tools' files); caches (parsed documents, vectors) are allowed. A block that cannot run offline is marked in
the README by a comment on the line before it, `<!-- not run: why -->`; few may be.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import processes
from tests.support.documents import make_pdf

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
#: the manual: the README, then every page under docs/ (a new page's snippets are run without being listed here)
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(?P<indent>[ \t]*)```python\n(?P<code>.*?)^(?P=indent)```", re.M | re.S)
NOT_RUN = re.compile(r"^\s*<!-- not run: (?P<reason>.*?) -->\s*$")
DEADLINE = 120  # seconds per block, however loaded the machine
#: what a reader's workspace holds of their own (conversations, memories, tools' files): no snippet may write there
STORES = ("memory", "sessions", "tools", "dialogues")
WORKERS = 3
STDIN = "Tell me more.\n\n"  # what a person types when a snippet asks (input())


@dataclass
class Block:
    n: int
    line: int
    code: str
    not_run: str | None  # the reason, when marked
    page: str = "README.md"

    @property
    def where(self) -> str:
        return f"{self.page} line {self.line}"


def readme_blocks(text: str, page: str = "README.md", first: int = 0) -> list[Block]:
    """The python blocks of one page, numbered from `first`."""
    blocks = []
    for n, m in enumerate(FENCE.finditer(text), first):
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marked = NOT_RUN.match(before)
        line = text.count("\n", 0, m.start()) + 1
        code = textwrap.dedent(m["code"])
        blocks.append(Block(n, line, code, marked["reason"].strip() if marked else None, page))
    return blocks


def manual_blocks() -> list[Block]:
    blocks: list[Block] = []
    for page in PAGES:
        blocks += readme_blocks(page.read_text(encoding="utf-8"), str(page.relative_to(ROOT)), len(blocks))
    return blocks


BLOCKS = manual_blocks()


def test_readme_has_snippets_and_few_are_not_run():
    assert len(BLOCKS) > 20
    marked = [b for b in BLOCKS if b.not_run is not None]
    assert all(b.not_run for b in marked), "a `<!-- not run: ... -->` mark needs its reason"
    assert len(marked) < 0.15 * len(BLOCKS), [(b.where, b.not_run) for b in marked]


#: a block that names a model service (a server, or a hosted model by name) rather than the default model
NAMES_A_SERVICE = re.compile(r"""["']model_server["']\s*:|["']model["']\s*:\s*["'](?:qwen|gpt|Qwen|qwq|qvq)""")
SAYS_WHAT_IT_NEEDS = re.compile(r"^\s*(?:\S.*)?# needs ", re.M)


def test_blocks_that_need_a_key_or_a_server_say_so():
    """A newcomer runs the snippets with no key: those that use the default model (no `llm`) work as they are; the
    others say what they need in a comment (`# needs DASHSCOPE_API_KEY`, `# needs no key: ...`)."""
    silent = [b.where for b in BLOCKS if NAMES_A_SERVICE.search(b.code) and not SAYS_WHAT_IT_NEEDS.search(b.code)]
    assert not silent, f"blocks naming a model service without a '# needs ...' comment: {silent}"
    first_hour = [b for b in BLOCKS if b.page == "README.md"]
    assert sum(bool(NAMES_A_SERVICE.search(b.code)) for b in first_hour) <= 2, "README blocks should use no llm"


def test_the_marks_are_found():
    text = "a\n<!-- not run: blocks -->\n```python\nx = 1\n```\n\n  ```python\n  y = 2\n  ```\n"
    assert [(b.code, b.not_run) for b in readme_blocks(text)] == [("x = 1\n", "blocks"), ("y = 2\n", None)]
    assert readme_blocks("<!-- not run:  -->\n```python\nx\n```\n")[0].not_run == ""  # no reason: refused above


@pytest.mark.parametrize("n", range(len(BLOCKS)))
def test_snippet_compiles_and_its_imports_exist(n):
    code = BLOCKS[n].code
    compile(code, f"{BLOCKS[n].where}: python block", "exec")
    for module, names in re.findall(r"^from ((?:chatagent|gui)[\w.]*) import ([^\n(]+)$", code, flags=re.M):
        mod = importlib.import_module(module)
        for name in (x.strip() for x in names.split(",")):
            assert hasattr(mod, name), f"{BLOCKS[n].where}: {module} has no {name}"


# -- the files the snippets name ----------------------------------------------------------------------------------

MY_TOOLS = """
from chatagent import BaseTool, register_tool


@register_tool("search_docs")
class SearchDocs(BaseTool):
    description = "Search the documentation."
    parameters = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}

    def call(self, params, **kwargs):
        return f"3 pages about {self.parse_params(params)['query']}"
"""


def make_files(d: Path) -> None:
    """manual.pdf, report.pdf, handbook.pdf, spec.pdf, notes.docx, extra.pptx, cat.png, cat.jpg, my_tools.py and
    server.py (an MCP server)."""
    import docx
    import pptx
    from PIL import Image

    make_pdf(
        [
            f"Chapter {i}. Packages extend R with code and data. To install a package, call "
            f"install.packages('name') and load it with library(name). Section {i} covers mirrors and updates."
            for i in range(1, 9)
        ],
        d / "manual.pdf",
    )
    make_pdf([f"Quarterly report, part {i}: sales grew in every region." for i in range(1, 4)], d / "report.pdf")
    make_pdf(["Refund policy: customers may return an item within 30 days for a full refund."] * 3, d / "handbook.pdf")
    make_pdf(["The API returns JSON. Every list endpoint is paginated with a cursor."], d / "spec.pdf")
    doc = docx.Document()
    doc.add_heading("Notes", 1)
    doc.add_paragraph("Packages are installed from CRAN with install.packages(); update them with update.packages().")
    doc.save(str(d / "notes.docx"))
    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Installing packages"
    slide.placeholders[1].text = "install.packages('ggplot2') downloads and installs a package."
    deck.save(str(d / "extra.pptx"))
    picture = Image.new("RGB", (64, 48), (200, 120, 40))
    picture.save(d / "cat.png")
    picture.save(d / "cat.jpg")
    (d / "my_tools.py").write_text(MY_TOOLS, encoding="utf-8")
    shutil.copy(ROOT / "tests" / "support" / "mcp_servers" / "demo_server.py", d / "server.py")


@dataclass
class Outcome:
    """A block's finished process, what it left in the current folder and which of the reader's stores it wrote."""

    proc: subprocess.CompletedProcess
    left: list[str]
    stores: list[str]


def written(cwd: Path, given: set[Path]) -> tuple[list[str], list[str]]:
    """The files a block left in `cwd` (beyond `given`, the workspace and Python's caches) and the stores it made
    in the workspace (`cwd / 'workspace'`, standing in for the reader's own)."""
    left = sorted(
        str(p.relative_to(cwd))
        for p in cwd.rglob("*")
        if p.relative_to(cwd) not in given
        and p.relative_to(cwd).parts[0] != "workspace"
        and "__pycache__" not in p.parts
    )
    return left, [f"workspace/{name}" for name in STORES if (cwd / "workspace" / name).exists()]


@pytest.fixture(scope="module")
def block_results(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[int, Outcome | str]:
    """The outcome (a finished process and what it wrote, or why it did not finish) of each runnable block whose
    test was selected, run WORKERS at a time."""
    files = tmp_path_factory.mktemp("readme-files")
    make_files(files)
    runs = tmp_path_factory.mktemp("readme-runs")

    def run(block: Block) -> Outcome | str:
        cwd = runs / f"block{block.n}"
        shutil.copytree(files, cwd)
        (cwd / "snippet.py").write_text(block.code, encoding="utf-8")
        given = {p.relative_to(cwd) for p in cwd.rglob("*")}
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DASHSCOPE_", "OPENAI_", "CHATAGENT_"))}
        path = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", os.defpath)])  # as in a venv
        env.update(PATH=path, PYTHONPATH=str(ROOT), CHATAGENT_WORKSPACE=str(cwd / "workspace"), MPLBACKEND="Agg")
        proc = processes.popen(
            [sys.executable, "-m", "tests.support.readme_runner", "snippet.py"],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group: whatever it started goes with it
        )
        try:
            out, err = proc.communicate(STDIN, timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate(timeout=DEADLINE)
            return f"still running after {DEADLINE} s; output so far:\n{out}\n{err}"
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        return Outcome(subprocess.CompletedProcess(proc.args, proc.returncode, out, err), *written(cwd, given))

    selected = {i.callspec.params["n"] for i in request.session.items if i.originalname == "test_snippet_runs"}
    runnable = [b for b in BLOCKS if b.not_run is None and b.n in selected]
    with ThreadPoolExecutor(WORKERS) as pool:
        return dict(zip([b.n for b in runnable], pool.map(run, runnable), strict=True))


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("n", range(len(BLOCKS)))
def test_snippet_runs(n: int, block_results: dict) -> None:
    block = BLOCKS[n]
    if block.not_run is not None:
        pytest.skip(f"{block.where}: not run: {block.not_run}")
    outcome = block_results[n]
    where = f"python block {n} ({block.where})"
    assert not isinstance(outcome, str), f"{where}: {outcome}"
    result = outcome.proc
    assert "using the embedded local model" not in result.stderr, f"{where} did not reach the loopback servers"
    assert result.returncode == 0, (
        f"{where} failed:\n{block.code}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
    )
    # a reader runs the snippet in their own folder, with their own workspace: it must write in neither
    assert not outcome.left, f"{where} left {outcome.left} in the current folder: write them in a temporary one"
    assert not outcome.stores, f"{where} wrote the reader's {outcome.stores}: give it a temporary workspace or store"

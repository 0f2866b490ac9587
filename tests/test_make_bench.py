"""`make bench` runs the benchmarks, each as `python bench/NAME.py` with no arguments: every script it runs must
take none, and every script it leaves out must be a helper (shared code, or Qwen-Agent's side of a benchmark)."""

from __future__ import annotations

import glob
import re
import shutil
import sys
from pathlib import Path

import pytest

from tests.support import processes

REPO = Path(__file__).resolve().parents[1]


def benchmarks_make_runs() -> list[str]:
    out = processes.run(["make", "-n", "bench"], cwd=REPO, capture_output=True, text=True, timeout=60, check=True)
    loop = next(line for line in out.stdout.splitlines() if line.startswith("for b in "))
    words = loop.removeprefix("for b in ").split(";")[0].split()
    return [path for word in words for path in sorted(glob.glob(word, root_dir=REPO))]  # as the shell expands


def required_arguments(usage: str) -> str:
    """What argparse's usage line asks for outside brackets (after the program name): required arguments."""
    text = " ".join(usage.split())
    text = text.removeprefix("usage: ").split(" ", 1)[1] if " " in text else ""
    while True:
        stripped = re.sub(r"\[[^\[\]]*\]", "", text)
        if stripped == text:
            return stripped.strip()
        text = stripped


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.timeout(180)
def test_make_bench_runs_only_benchmarks_that_need_no_arguments() -> None:
    scripts = benchmarks_make_runs()
    assert "bench/stream_overhead.py" in scripts and "bench/rag.py" in scripts
    for script in scripts:
        out = processes.run(
            [sys.executable, script, "--help"], cwd=REPO, capture_output=True, text=True, timeout=120
        )  # fmt: skip
        assert out.returncode == 0, f"{script} --help: {out.stderr}"
        assert not required_arguments(out.stdout.split("\n\n")[0]), f"{script} needs arguments:\n{out.stdout}"
    left_out = {f"bench/{p.name}" for p in (REPO / "bench").glob("*.py")} - set(scripts)
    for script in sorted(left_out):
        text = (REPO / script).read_text()
        assert Path(script).name.startswith(("_", "qa_")), f"{script} is neither run by make bench nor a helper"
        assert "Qwen-Agent" in text.split('"""')[1] or Path(script).name.startswith("_"), script


def test_the_usage_reader_finds_required_arguments() -> None:
    assert required_arguments("usage: qa_rag.py [-h] --url URL --files FILES [--queries QUERIES]") != ""
    assert required_arguments("usage: rag.py [-h] [--cache DIR] [--queries N] [--no-qwen-agent]") == ""
    assert required_arguments("usage: x.py [-h] [--a [A ...]]") == ""

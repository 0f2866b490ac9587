"""The manual as a website: `make docs` (MkDocs, mkdocstrings for the API reference) builds with --strict, offline.

Each build runs in a process of its own inside a network namespace with nothing but its own loopback
(tests/support/readme_runner.py's private_network), so a theme or plugin that reached out would fail it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import processes

ROOT = Path(__file__).resolve().parent.parent
BUILD = (
    "import sys\n"
    "from tests.support.readme_runner import private_network\n"
    "private_network()\n"
    "from mkdocs.__main__ import cli\n"
    "sys.argv = ['mkdocs', 'build', '--strict', '-f', sys.argv[1], '-d', sys.argv[2]]\n"
    "cli()\n"
)
DEADLINE = 300


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"}
    proc = processes.popen(
        [sys.executable, "-c", BUILD, str(config), str(site)],
        cwd=config.parent,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        out, _ = proc.communicate(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"mkdocs build still running after {DEADLINE} s:\n{out}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, "")


def copy_of_the_project(dest: Path) -> Path:
    """mkdocs.yml, docs/, the hook and the package the reference documents, as the repository has them."""
    shutil.copy(ROOT / "mkdocs.yml", dest / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", dest / "docs")
    (dest / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "mkdocs_hooks.py", dest / "scripts" / "mkdocs_hooks.py")
    (dest / "chatagent").symlink_to(ROOT / "chatagent")
    return dest / "mkdocs.yml"


@pytest.mark.slow
def test_the_manual_builds_strict_offline_and_a_page_missing_from_the_nav_joins_it(tmp_path: Path) -> None:
    config = copy_of_the_project(tmp_path)
    (tmp_path / "docs" / "a-new-page.md").write_text(
        "# A new page\n\nLinks to [models](models.md#dashscope-qwen-models-native-api).\n"
    )
    result = build(config, tmp_path / "site")
    assert result.returncode == 0, result.stdout
    home = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "a-new-page/" in home and "A new page" in home  # in the navigation, under "More"
    reference = (tmp_path / "site" / "reference" / "agents" / "index.html").read_text(encoding="utf-8")
    assert 'id="chatagent.Agent"' in reference and "Base of all agents" in reference  # from the docstring
    assert "fonts.googleapis.com" not in home


@pytest.mark.slow
def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    config = copy_of_the_project(tmp_path)
    (tmp_path / "docs" / "streaming.md").write_text("# Streaming\n\nSee [the tools](tools.md#no-such-section).\n")
    result = build(config, tmp_path / "site")
    assert result.returncode != 0
    assert "no-such-section" in result.stdout

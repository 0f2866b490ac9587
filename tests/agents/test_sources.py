"""Every agent that returns sources gives each as `{'file', 'pages', ...}` with `pages` a list of 1-based ints (the
web UI, the CLI and `serve` show them as such: a string showed as "pp. p, .,  , 2")."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from chatagent import Assistant, ScriptedLLM
from chatagent.agents import BasicDocQA, DialogueRetrievalAgent, ParallelDocQA
from chatagent.agents.file_excerpts import Memory
from chatagent.rag.store import DocStore
from tests.support.documents import make_pdf

ROOT = Path(__file__).resolve().parents[2]
PAGES = [
    "Chapter one. The committee met in spring and reviewed the budget of every department in turn.",
    "Chapter two. To install a package, call install.packages with its name; load it with library.",
    "Chapter three. Plots are drawn with plot, and a factor is a vector of categories with levels.",
]
AGENTS = [Assistant, BasicDocQA, DialogueRetrievalAgent, ParallelDocQA, Memory]


def sources_of(response: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for m in response for s in (m.get("extra") or {}).get("sources") or []]


@pytest.mark.parametrize("agent_class", AGENTS, ids=lambda c: c.__name__)
def test_every_agent_that_returns_sources_gives_pages_as_a_list_of_ints(agent_class: type, tmp_path: Path) -> None:
    pdf = tmp_path / "manual.pdf"
    make_pdf(PAGES, pdf)
    options: dict[str, Any] = {"rag_cfg": {"store": DocStore(tmp_path / "store")}}
    if agent_class is not Memory:
        options["llm"] = ScriptedLLM(default="Call install.packages('name') [manual.pdf, p. 2].")
    bot = agent_class(**options)
    question = [{"role": "user", "content": [{"text": "How do I install a package?"}, {"file": str(pdf)}]}]
    sources = sources_of(bot.run_nonstream(question))
    assert sources, f"{agent_class.__name__} returned no sources"
    for source in sources:
        pages = source["pages"]
        assert isinstance(pages, list) and pages, source
        assert all(type(p) is int and 1 <= p <= len(PAGES) for p in pages), source
        assert source["file"] == "manual.pdf"
    assert any(s["pages"] == [2] for s in sources)  # the page that holds the answer


def test_the_agents_above_are_every_agent_that_returns_sources() -> None:
    """A module under chatagent/agents that writes `sources` must have its agent in AGENTS."""
    covered = {c.__module__ for c in AGENTS}
    writers = {
        ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for path in (ROOT / "chatagent" / "agents").rglob("*.py")
        if re.search(r"""["']sources["']\s*:""", path.read_text(encoding="utf-8"))
    }
    assert writers <= covered, writers - covered

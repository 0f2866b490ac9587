"""A huge plain-text file (issue 24, item 21): the work it costs is bounded by its size, a run's deadline stops it
wherever it is, and progress says what is happening. Each test fails on the code before the fix, which spent
minutes counting, cutting and indexing a 60 MB text with nothing to stop it or to say so."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from chatagent import Assistant, ScriptedLLM
from chatagent.errors import RunDeadlineExceeded
from chatagent.run.context import current_run

pytestmark = pytest.mark.timeout(180)


def big_text(path: Path, mb: int) -> Path:
    rng = random.Random(7)
    words = [
        "the",
        "of",
        "and",
        "to",
        "in",
        "a",
        "is",
        "that",
        "for",
        "it",
        "as",
        "was",
        "with",
        "be",
        "by",
        "on",
        "not",
        "this",
        "are",
        "or",
        "from",
        "at",
        "which",
    ]
    words += [f"term{i}" for i in range(3000)]
    para = [" ".join(rng.choice(words) for _ in range(rng.randint(40, 160))) + "." for _ in range(400)]
    block = "\n\n".join(para) + "\n\n"
    path.write_text(block * (mb * 2**20 // len(block) + 1), encoding="utf-8")
    return path


def echo(messages, functions):
    return "SEEN: " + messages[-1].text[:2000]


def test_a_huge_text_file_is_refused_by_its_size_with_a_clear_message(tmp_path: Path) -> None:
    from chatagent.rag import DocStore

    doc = big_text(tmp_path / "dump.txt", 20)
    progress: list[str] = []
    bot = Assistant(llm=ScriptedLLM(default=echo), rag_cfg={"store": DocStore(tmp_path / "ws")})
    ask = [{"role": "user", "content": [{"text": "What is in the dump?"}, {"file": str(doc)}]}]
    answer = bot.run_nonstream(ask, on_progress=lambda p: progress.append(p.describe()))
    said = answer[-1]["content"]
    assert "dump.txt" in said and "million characters of text" in said, "the huge file was indexed whole"
    assert "Could not read dump.txt" in progress


def test_the_runs_deadline_stops_preparing_a_large_file_and_progress_says_so(tmp_path: Path) -> None:
    from chatagent.rag import DocStore

    doc = big_text(tmp_path / "notes.txt", 6)
    progress: list[str] = []

    def watch(p) -> None:
        progress.append(p.describe())
        if p.stage == "prepare" and len(progress) < 50:  # let the deadline pass while the text is being prepared
            deadline = current_run().deadline
            assert deadline is not None
            time.sleep(max(0.0, deadline - time.monotonic()) + 0.05)

    bot = Assistant(llm=ScriptedLLM(default=echo), rag_cfg={"store": DocStore(tmp_path / "ws")})
    ask = [{"role": "user", "content": [{"text": "Summarise the notes."}, {"file": str(doc)}]}]
    with pytest.raises(RunDeadlineExceeded, match="notes.txt' was stopped at preparing it for search"):
        bot.run_nonstream(ask, on_progress=watch, deadline=15)
    assert any(p.startswith("Preparing notes.txt for search:") for p in progress)

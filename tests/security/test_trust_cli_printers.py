"""The command line's printers against format characters in stored text (issue 36, item 19), run in a pty as a
person runs them: a memory, a session's title and its messages that hold a right-to-left override (U+202E), a
zero-width space or a word joiner. Before the fix `chatagent memory list` wrote them raw, so a stored line could
show reversed or hidden text; every printer now shows characters of category Cf escaped."""

from __future__ import annotations

import os
import re
import sys
import unicodedata
from pathlib import Path

import pytest

from chatagent import LongTermMemory, Session
from chatagent.cli.terminal import printable
from tests.support.pty_process import PtyProcess

pytestmark = pytest.mark.timeout(120)

TRICK = "pay to \u202eNABI\u202c and h\u200bide\u2060 this"  # reversed IBAN, zero-width space, word joiner


def raw_format_chars(out: bytes) -> list[str]:
    text = out.decode("utf-8", "replace")
    return [f"U+{ord(c):04X}" for c in text if unicodedata.category(c) == "Cf"]


def run(args: list[str], tmp_path: Path, marker: bytes) -> bytes:
    env = {**os.environ, "CHATAGENT_WORKSPACE": str(tmp_path / "ws"), "PYTHONUNBUFFERED": "1"}
    term = PtyProcess(args, env)
    try:
        return term.read_until(marker, 60)
    finally:
        term.close()


def test_memory_list_escapes_format_characters(tmp_path: Path) -> None:
    store = str(tmp_path / "memory.db")
    LongTermMemory(user="local", store=store, embedder=None).remember(TRICK)
    out = run(["memory", "list", "--store", store], tmp_path, b"this")
    assert raw_format_chars(out) == [], f"raw format characters reached the terminal: {raw_format_chars(out)}"
    assert b"\\u202e" in out and b"\\u200b" in out


def test_sessions_show_and_list_escape_format_characters(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 's.db'}"
    session = Session("diary", store)
    session.append([{"role": "user", "content": TRICK}])
    session.title = TRICK
    out = run(["sessions", "--store", store], tmp_path, b"this")
    assert raw_format_chars(out) == []
    out = run(["sessions", "--store", store, "--show", "diary"], tmp_path, b"this")
    assert raw_format_chars(out) == []


def test_printable_escapes_exactly_controls_and_format_characters() -> None:
    """Every code point of category Cf or Cc (but newline and tab) is escaped, and no other."""
    wrong = []
    for code in range(sys.maxunicode + 1):
        c = chr(code)
        if 0xD800 <= code <= 0xDFFF:
            continue
        want = unicodedata.category(c) in ("Cf", "Cc") and c not in "\n\t"
        if (printable(c) != c) != want:
            wrong.append(f"U+{code:04X}")
    assert wrong == [], wrong[:20]
    assert re.fullmatch(r"\\u202e", printable("\u202e"))

"""20 concurrent sessions against the web UI over Gradio's HTTP queue protocol (the bench's client)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

_BENCH = Path(__file__).resolve().parents[2] / "bench" / "ui_load.py"


def _bench():
    spec = importlib.util.spec_from_file_location("ui_load_bench", _BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_twenty_concurrent_sessions_complete_without_cross_talk() -> None:
    bench = _bench()
    ui, url = bench.start_app(words=120, delay=0.002)
    try:
        results = bench.run_load(url, sessions=20, turns=2)
    finally:
        ui.close()
    errors = [f"{r.name}: {r.error}" for r in results if r.error]
    assert errors == []
    assert all(len(r.turns) == 2 for r in results)
    turns = [t for r in results for t in r.turns]
    # the answer streamed in several updates, sent as diffs rather than the whole conversation each time
    assert sum(t.updates for t in turns) > 2 * len(turns)
    assert sum(t.bytes_streamed for t in turns) < 0.5 * sum(t.bytes_full_resend for t in turns)

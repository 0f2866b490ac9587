"""What a run's handle (`Agent.run()`'s Run, `arun()`'s ARun) adds to each streamed chunk, counted the way that does not
change with the machine's load: Python calls. A delta chunk is given out in one call (named, and dumped when the
caller gave dicts), an event as it is, in none, on both paths (issue 43: `arun` streaming within 1.5x the bare httpx
loop, bench/stream_overhead.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import chatagent.run.handle as handle
from chatagent import BasicAgent, Message, Reply, ScriptedLLM
from tests.support.calls import counted_calls

SIZES = (50, 250)
STEPS = ("__next__", "__anext__")  # the handle's own step: once a chunk whatever it gives out


def _handle_calls(chunks: int, aio: bool, dicts: bool, events: bool) -> int:
    """The calls of the handle module's functions (its steps left out) in a run of `chunks` text chunks."""
    user: list[Any] = [{"role": "user", "content": "Hi"}] if dicts else [Message("user", "Hi")]
    bot = BasicAgent(llm=ScriptedLLM(default=Reply(chunks=["tok "] * chunks)), name="teller")
    kwargs: dict[str, Any] = {"events": True} if events else {"delta_stream": True}

    async def adrain() -> list[Any]:
        return [item async for item in bot.arun(user, **kwargs)]

    def one() -> list[Any]:
        return asyncio.run(adrain()) if aio else list(bot.run(user, **kwargs))

    one()
    out, count = counted_calls(one, lambda code: code.co_filename == handle.__file__ and code.co_name not in STEPS)
    if not events:
        texts = [f["content"] if dicts else f.content for fs in out for f in fs]
        assert "".join(texts) == "tok " * chunks
        assert all((f["name"] if dicts else f.name) == "teller" for fs in out for f in fs)
    return count


@pytest.mark.parametrize("aio", [False, True], ids=["run", "arun"])
@pytest.mark.parametrize(("dicts", "events", "calls"), [(False, False, 1), (True, False, 1), (False, True, 0)],
                         ids=["fragments", "dicts", "events"])  # fmt: skip
def test_a_chunk_costs_the_run_handle_one_call_at_most(aio: bool, dicts: bool, events: bool, calls: int) -> None:
    small, large = (_handle_calls(n, aio, dicts, events) for n in SIZES)
    per_chunk = (large - small) / (SIZES[1] - SIZES[0])
    assert per_chunk == calls, f"the run's handle makes {per_chunk:g} calls a chunk, not {calls}"

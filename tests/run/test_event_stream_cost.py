"""What the typed event stream costs per streamed chunk, counted the way that does not change with the machine's load:
Python-level calls (bench/run_layers.py counts its instructions, the goal within 10 % of the plain run). A piece of
text costs the stream one call more than the plain delta run (the generator giving the events out), not a walk through
the general path (`fragment_events`, the merge) for every chunk."""

from __future__ import annotations

from typing import Any

from chatagent import BasicAgent, Message, Reply, ScriptedLLM
from tests.support.calls import counted_calls

USER = [Message(role="user", content="Tell me a long story.")]
SIZES = (50, 250)


def _calls(events: bool, chunks: int) -> int:
    """The Python calls (and generator resumptions) a run of `chunks` text chunks makes, after a warm-up."""
    bot = BasicAgent(llm=ScriptedLLM(default=Reply(chunks=["tok "] * chunks)))

    def one() -> list[Any]:
        return list(bot.run(USER, events=True) if events else bot.run(USER, delta_stream=True))

    one()
    out, count = counted_calls(one)
    texts = (
        [ev.data["text"] for ev in out if ev.type == "text_delta"] if events else [f.content for fs in out for f in fs]
    )
    assert "".join(texts) == "tok " * chunks  # the whole answer came out, a chunk at a time
    return count


def per_chunk(events: bool) -> float:
    small, large = (_calls(events, n) for n in SIZES)
    return (large - small) / (SIZES[1] - SIZES[0])


def test_a_text_chunk_costs_the_event_stream_one_python_call_more_than_the_plain_run() -> None:
    plain, stream = per_chunk(False), per_chunk(True)
    assert stream - plain <= 1, f"the event stream makes {stream:g} Python calls per chunk, the plain run {plain:g}"

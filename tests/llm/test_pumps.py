"""A plan (chatagent.llm.pumps) is one body both pumps carry out alike: `played` in the calling thread, `aplayed` on
the event loop. Its steps' results and errors come back to it; a reader who stops early closes the plan and the
stream it was relaying."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from chatagent.errors import ModelServiceError
from chatagent.llm.pumps import Blocking, Give, Plan, Relay, ReplyFilter, Sleep, aplayed, played
from chatagent.schema import ASSISTANT
from chatagent.schema.fragment import Fragment


class Upper(ReplyFilter):
    """A reply filter: each fragment's text in capitals, and a last fragment at the end."""

    def push(self, fragments: list[Fragment]) -> list[Fragment]:
        return [Fragment.unchecked(ASSISTANT, f.content.upper(), index=f.index) for f in fragments]

    def end(self) -> list[Fragment]:
        return [Fragment.unchecked(ASSISTANT, "!", index=0)]


def _texts(items: list[Any]) -> list[str]:
    return ["".join(f.content for f in item) if isinstance(item, list) else item for item in items]


class Source:
    """Streams of fragment lists for either pump: `fail_after` items, then a ModelServiceError; records closing."""

    def __init__(self, words: list[str], fail_after: int | None = None) -> None:
        self.words, self.fail_after, self.closed = words, fail_after, 0

    def _items(self) -> Iterator[list[Fragment]]:
        for n, w in enumerate(self.words):
            if n == self.fail_after:
                raise ModelServiceError("the server dropped the stream", retryable=True)
            yield [Fragment.unchecked(ASSISTANT, w, index=0)]

    def sync(self) -> Iterator[list[Fragment]]:
        try:
            yield from self._items()
        finally:
            self.closed += 1

    async def aio(self) -> AsyncIterator[list[Fragment]]:
        try:
            for item in self._items():
                yield item
        finally:
            self.closed += 1


def the_plan(broken: Source, good: Source, on_loop: bool, seen: dict[str, Any]) -> Plan:
    thread = Blocking(lambda: threading.current_thread().name)
    yield thread
    seen["thread"] = thread.result
    relay = Relay(broken.aio if on_loop else broken.sync, each=lambda frs: frs)
    try:
        yield relay
    except ModelServiceError as e:  # the relayed stream's error, thrown in at its step
        seen["error"], seen["sent"] = type(e).__name__, relay.sent
    yield Sleep(0)
    yield Give(["(retried)"])
    yield Relay(good.aio if on_loop else good.sync, through=Upper())


def _sources() -> tuple[Source, Source]:
    return Source(["a", "b"], fail_after=1), Source(["ok", "go"])


def test_both_pumps_carry_out_one_plan_alike() -> None:
    broken, good = _sources()
    seen: dict[str, Any] = {}
    out = _texts(list(played(the_plan(broken, good, False, seen))))
    assert out == ["a", "(retried)", "OK", "GO", "!"]
    assert seen == {"thread": threading.current_thread().name, "error": "ModelServiceError", "sent": True}
    assert broken.closed == good.closed == 1

    async def on_loop() -> list[Any]:
        return [item async for item in aplayed(the_plan(abroken, agood, True, aseen))]

    abroken, agood = _sources()
    aseen: dict[str, Any] = {}
    assert _texts(asyncio.run(on_loop())) == out
    assert aseen["thread"] != threading.current_thread().name  # a Blocking step ran in a worker thread
    assert {k: v for k, v in aseen.items() if k != "thread"} == {k: v for k, v in seen.items() if k != "thread"}
    assert abroken.closed == agood.closed == 1


def test_an_error_the_plan_does_not_handle_is_raised_and_the_plan_closed() -> None:
    ended: list[str] = []

    def plan(source: Source, on_loop: bool) -> Plan:
        try:
            yield Relay(source.aio if on_loop else source.sync)
        finally:
            ended.append("plan")

    with pytest.raises(ModelServiceError):
        list(played(plan(Source(["a"], fail_after=0), False)))

    async def drained() -> None:
        async for _ in aplayed(plan(Source(["a"], fail_after=0), True)):
            pass

    with pytest.raises(ModelServiceError):
        asyncio.run(drained())
    assert ended == ["plan", "plan"]


def test_a_reader_who_stops_early_closes_the_plan_and_its_stream() -> None:
    ended: list[str] = []

    def plan(source: Source, on_loop: bool) -> Plan:
        try:
            yield Relay(source.aio if on_loop else source.sync)
            ended.append("not reached")
        finally:
            ended.append("plan")

    source = Source(["a", "b", "c"])
    items = played(plan(source, False))
    assert _texts([next(items)]) == ["a"]
    items.close()
    assert source.closed == 1 and ended == ["plan"]

    async def first() -> None:
        items = aplayed(plan(asource, True))
        assert _texts([await anext(items)]) == ["a"]
        await items.aclose()

    asource = Source(["a", "b", "c"])
    asyncio.run(first())
    assert asource.closed == 1 and ended == ["plan", "plan"]

"""The stream modes of `chat()` / `achat()` over a model's fragments: dicts out, the whole reply so far, the reply
collected, a whole reply as one fragment list, and a synchronous stream read from asyncio."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from typing import Any, TypeVar

from chatagent.llm.pumps import Plan, Relay, closing_stream
from chatagent.schema import Message
from chatagent.schema.fragment import Fragment, fragment
from chatagent.schema.stream import Collector, DictResponse, Response

_T = TypeVar("_T")


def dumped(fragments: Iterable[list[Fragment]] | AsyncIterator[list[Fragment]]) -> Plan:
    """The fragment lists as lists of dicts (a plan: `played` for a stream, `aplayed` for an async one)."""
    yield Relay(lambda: fragments, each=_dumps)


def _dumps(fragments: list[Fragment]) -> list[dict[str, Any]]:
    return [f.model_dump() for f in fragments]


def dict_accumulate(fragments: Iterator[list[Fragment]]) -> Iterator[list[dict[str, Any]]]:
    """Fragments in, the whole response so far as dicts out (each yield a new list)."""
    response = DictResponse()
    for frs in fragments:
        if frs:
            response.add(frs)
            yield list(response.messages)


def placed(msgs: list[Message]) -> list[Fragment]:
    """A whole reply as one list of fragments, each message at its place."""
    return [fragment(m, i) for i, m in enumerate(msgs)]


async def aas_fragments(reply: Awaitable[list[Message]]) -> AsyncIterator[list[Fragment]]:
    """An awaited whole reply as a stream of one list of fragments (`placed`)."""
    yield placed(await reply)


async def acollect(
    fragments: AsyncIterator[list[Fragment]], as_dicts: bool = False
) -> list[Message] | list[dict[str, Any]]:
    collector = Collector()
    async with closing_stream(fragments) as parts:
        async for f in parts:
            collector.add(f)
    reply = collector.messages()
    return [m.model_dump() for m in reply] if as_dicts else reply


async def aaccumulate(
    fragments: AsyncIterator[list[Fragment]], as_dicts: bool = False
) -> AsyncIterator[list[Message] | list[dict[str, Any]]]:
    response: Response | DictResponse = DictResponse() if as_dicts else Response()
    async with closing_stream(fragments) as parts:
        async for f in parts:
            if f:
                response.add(f)
                yield response.messages[:]  # a new list (sliced: its type stays the response's own)


async def on_the_loop(start: Callable[[], Iterator[list[Fragment]]]) -> AsyncIterator[list[Fragment]]:
    """The stream `start()` returns, read on the event loop (for a stream whose steps never block), other tasks let
    run between its chunks as with a network stream; closed when done."""
    stream = start()
    try:
        for fragments in stream:
            yield fragments
            await asyncio.sleep(0)
    finally:
        close_stream = getattr(stream, "close", None)
        if close_stream is not None:
            close_stream()


async def in_worker_thread(start: Callable[[], Iterator[list[Fragment]]]) -> AsyncIterator[list[Fragment]]:
    """The stream `start()` returns, for asyncio: started on first use, each step taken in a worker thread, closed
    there too when done (if it can be closed: a generator can, a plain iterator has nothing to close)."""
    stream = start()
    busy = threading.Lock()  # a cancelled wait leaves `next` running in its thread: close after it

    def step() -> list[Fragment] | None:
        with busy:
            return next(stream, None)

    def close() -> None:
        with busy:
            close_stream = getattr(stream, "close", None)
            if close_stream is not None:
                close_stream()

    try:
        while True:
            fragments = await asyncio.to_thread(step)
            if fragments is None:
                return
            yield fragments
    finally:
        await asyncio.to_thread(close)

"""The stream modes of `chat()` / `achat()` over a model's fragments: dicts out, the whole reply so far, the reply
collected, a whole reply as one fragment list, and a synchronous stream read from asyncio."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import aclosing

from chatagent.schema import Message
from chatagent.stream import Collector, DictResponse, Response, fragment


def dumped(fragments: Iterator[list[Message]]) -> Iterator[list[dict]]:
    for frs in fragments:
        yield [f.model_dump() for f in frs]


def dict_accumulate(fragments: Iterator[list[Message]]) -> Iterator[list[dict]]:
    """Fragments in, the whole response so far as dicts out (each yield a new list)."""
    response = DictResponse()
    for frs in fragments:
        if frs:
            response.add(frs)
            yield list(response.messages)


def as_fragments(msgs: list[Message]) -> Iterator[list[Message]]:
    yield [fragment(m, i) for i, m in enumerate(msgs)]


async def aas_fragments(reply: Awaitable[list[Message]]) -> AsyncIterator[list[Message]]:
    yield [fragment(m, i) for i, m in enumerate(await reply)]


async def acollect(fragments: AsyncIterator[list[Message]], as_dicts: bool = False) -> list:
    collector = Collector()
    async with aclosing(fragments) as parts:  # type: ignore[type-var]
        async for f in parts:
            collector.add(f)
    reply = collector.messages()
    return [m.model_dump() for m in reply] if as_dicts else reply


async def aaccumulate(fragments: AsyncIterator[list[Message]], as_dicts: bool = False) -> AsyncIterator[list]:
    response: Response | DictResponse = DictResponse() if as_dicts else Response()
    async with aclosing(fragments) as parts:  # type: ignore[type-var]
        async for f in parts:
            if f:
                response.add(f)
                yield list(response.messages)


async def adumped(fragments: AsyncIterator[list[Message]]) -> AsyncIterator[list[dict]]:
    async with aclosing(fragments) as parts:  # type: ignore[type-var]
        async for frs in parts:
            yield [f.model_dump() for f in frs]


async def in_worker_thread(start: Callable[[], Iterator[list[Message]]]) -> AsyncIterator[list[Message]]:
    """The stream `start()` returns, for asyncio: started on first use, each step taken in a worker thread, closed
    there too when done."""
    stream = start()
    busy = threading.Lock()  # a cancelled wait leaves `next` running in its thread: close after it

    def step() -> list[Message] | None:
        with busy:
            return next(stream, None)

    def close() -> None:
        with busy:
            stream.close()  # type: ignore[attr-defined]

    try:
        while True:
            fragments = await asyncio.to_thread(step)
            if fragments is None:
                return
            yield fragments
    finally:
        await asyncio.to_thread(close)

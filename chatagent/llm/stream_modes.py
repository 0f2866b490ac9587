"""The stream modes of `chat()` / `achat()` over a model's fragments: dicts out, the whole reply so far, the reply
collected, a whole reply as one fragment list, and a synchronous stream read from asyncio; `ReplyFilter`, the base of
what reads a reply as it streams and turns it into other fragments; `first_answer`, streams tried in turn until one
answers (a plan's fallback, `FallbackModel`'s models)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from chatagent.errors import ModelServiceError
from chatagent.schema import Message
from chatagent.schema.fragment import Fragment, fragment
from chatagent.schema.stream import Collector, DictResponse, Response

_T = TypeVar("_T")


class closing_stream(Generic[_T]):
    """`contextlib.aclosing` for any async iterator of fragments: on exit it is closed if it can be (an async
    generator can; an async iterator need not have `aclose`)."""

    __slots__ = ("stream",)

    def __init__(self, stream: AsyncIterator[_T]) -> None:
        self.stream = stream

    async def __aenter__(self) -> AsyncIterator[_T]:
        return self.stream

    async def __aexit__(self, *exc_info: object) -> None:
        aclose = getattr(self.stream, "aclose", None)
        if aclose is not None:
            await aclose()


class ReplyFilter:
    """Reads a stream of fragment lists (`push` each, `end` after the last) and yields what they become: `run` for a
    stream, `arun` for an async one (closed when done or closed early). A filter that has read enough sets `stopped`
    in `push`: the stream is then read no further."""

    stopped = False

    def push(self, fragments: list[Fragment]) -> list[Fragment]:
        raise NotImplementedError

    def end(self) -> list[Fragment]:
        raise NotImplementedError

    def run(self, stream: Iterable[list[Fragment]]) -> Iterator[list[Fragment]]:
        try:
            for fragments in stream:
                out = self.push(fragments)
                if out:
                    yield out
                if self.stopped:
                    break
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        out = self.end()
        if out:
            yield out

    async def arun(self, stream: AsyncIterator[list[Fragment]]) -> AsyncIterator[list[Fragment]]:
        async with closing_stream(stream) as parts:
            async for fragments in parts:
                out = self.push(fragments)
                if out:
                    yield out
                if self.stopped:
                    break
        out = self.end()
        if out:
            yield out


def dumped(fragments: Iterator[list[Fragment]]) -> Iterator[list[dict[str, Any]]]:
    for frs in fragments:
        yield [f.model_dump() for f in frs]


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


#: what `first_answer` is told of a failed stream: the error, whether the stream had yielded anything; it returns
#: how to start the stream tried next, or raises (the error, when there is nothing left to try)
Failed = Callable[[ModelServiceError, bool], Callable[[], _T]]


def first_answer(start: Callable[[], Iterable[_T]], failed: Failed[Iterable[_T]]) -> Iterator[_T]:
    """The items of the stream `start()` gives; when it fails with a ModelServiceError, those of the stream
    `failed(error, sent)` starts instead, and so on (each stream closed when left)."""
    while True:
        sent, stream = False, None
        try:
            stream = start()
            for item in stream:
                sent = True
                yield item
            return
        except ModelServiceError as e:
            start = failed(e, sent)
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()


async def afirst_answer(start: Callable[[], AsyncIterator[_T]], failed: Failed[AsyncIterator[_T]]) -> AsyncIterator[_T]:
    """`first_answer` for async streams."""
    while True:
        sent, stream = False, None
        try:
            stream = start()
            async for item in stream:
                sent = True
                yield item
            return
        except ModelServiceError as e:
            start = failed(e, sent)
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()


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


async def adumped(fragments: AsyncIterator[list[Fragment]]) -> AsyncIterator[list[dict[str, Any]]]:
    async with closing_stream(fragments) as parts:
        async for frs in parts:
            yield [f.model_dump() for f in frs]


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

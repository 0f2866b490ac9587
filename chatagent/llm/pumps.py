"""A stream's logic written once for both sides, and the pumps that drive it in the calling thread or on the running
event loop:

- a `ReplyFilter` reads a stream of fragment lists and turns them into others (`push` each, `end` after the last),
  pumped by `run` for a stream and by `arun` for an async one;
- a *plan* is a generator of the steps a stream takes (`Relay` a stream on, `Give` items at hand, `Blocking` work,
  `Sleep`), carried out by `played` in the calling thread and by `aplayed` on the event loop (blocking work in a
  worker thread there, sleeps with asyncio); what a step raises is thrown into the plan at that step. The retries
  (`chatagent.llm.retry.retrying`), the response cache (`chatagent.llm.cache.recording`), streams tried in turn
  (`first_answer`), the dicts of `chat()` and a local model's constrained tools are plans, as httpx's auth flow is
  one generator both its clients drive."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Generator, Iterable, Iterator
from typing import Any, Generic, TypeVar

from chatagent.errors import ModelServiceError
from chatagent.schema.fragment import Fragment

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


class Relay:
    """A plan's step: the items of the stream `start()` returns (an iterator in `played`, an async one in `aplayed`),
    read through `through` if given, each made `each(item)` if given, passed on as they come; the stream is closed
    when left. Afterwards (an error too) `sent` says whether any item was passed on."""

    __slots__ = ("start", "through", "each", "sent")

    def __init__(
        self, start: Callable[[], Any], through: ReplyFilter | None = None, each: Callable[[Any], Any] | None = None
    ) -> None:
        self.start, self.through, self.each = start, through, each
        self.sent = False


class Give:
    """A plan's step: `items` at hand, passed on."""

    __slots__ = ("items",)

    def __init__(self, items: Iterable[Any]) -> None:
        self.items = items


class Blocking:
    """A plan's step: `fn(*args)` (in a worker thread on the event loop); afterwards `result` holds what it returned."""

    __slots__ = ("fn", "args", "result")

    def __init__(self, fn: Callable[..., Any], *args: Any) -> None:
        self.fn, self.args = fn, args
        self.result: Any = None


class Sleep:
    """A plan's step: wait `seconds`."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds


Step = Relay | Give | Blocking | Sleep
#: a stream's logic: the steps it takes (what a step gives back is on the step: `Relay.sent`, `Blocking.result`)
Plan = Generator[Step, None, None]


def _advance(plan: Plan, error: Exception | None) -> Step | None:
    """The plan's next step, `error` thrown into it first if a step failed; None once it ends."""
    if error is None:
        return next(plan, None)  # (None when it ends: no StopIteration to raise and catch, one a call)
    try:
        return plan.throw(error)
    except StopIteration:
        return None


def played(plan: Plan) -> Iterator[Any]:
    """The items of `plan`, its steps carried out in the calling thread; the plan is closed when left."""
    error: Exception | None = None
    try:
        while True:
            step, error = _advance(plan, error), None
            if step is None:
                return
            try:
                if type(step) is Relay:
                    stream = step.start()
                    items = stream if step.through is None else step.through.run(stream)
                    sent, each = False, step.each
                    try:
                        for item in items:
                            sent = True
                            yield item if each is None else each(item)
                    finally:
                        step.sent = sent
                        close = getattr(items, "close", None)
                        if close is not None:
                            close()
                elif type(step) is Give:
                    yield from step.items
                elif type(step) is Blocking:
                    step.result = step.fn(*step.args)
                elif type(step) is Sleep:
                    time.sleep(step.seconds)
                else:
                    raise TypeError(f"a plan yielded {type(step).__name__}, not a step")
            except Exception as e:  # (the plan's to handle; GeneratorExit and the like close it instead)
                error = e
    finally:
        plan.close()


async def aplayed(plan: Plan) -> AsyncIterator[Any]:
    """`played` on the running event loop: a `Blocking` step in a worker thread, a `Sleep` with asyncio."""
    error: Exception | None = None
    try:
        while True:
            step, error = _advance(plan, error), None
            if step is None:
                return
            try:
                if type(step) is Relay:
                    stream = step.start()
                    items = stream if step.through is None else step.through.arun(stream)
                    sent, each = False, step.each
                    try:
                        async for item in items:
                            sent = True
                            yield item if each is None else each(item)
                    finally:
                        step.sent = sent
                        aclose = getattr(items, "aclose", None)  # an async generator's (an async iterator need not)
                        if aclose is not None:
                            await aclose()
                elif type(step) is Give:
                    for item in step.items:
                        yield item
                elif type(step) is Blocking:
                    step.result = await asyncio.to_thread(step.fn, *step.args)
                elif type(step) is Sleep:
                    await asyncio.sleep(step.seconds)
                else:
                    raise TypeError(f"a plan yielded {type(step).__name__}, not a step")
            except Exception as e:
                error = e
    finally:
        plan.close()


#: what `first_answer` is told of a failed stream: the error, whether the stream had yielded anything; it returns
#: how to start the stream tried next, or raises (the error, when there is nothing left to try)
Failed = Callable[[ModelServiceError, bool], Callable[[], _T]]


def first_answer(start: Callable[[], _T], failed: Failed[_T]) -> Plan:
    """The items of the stream `start()` gives; when it fails with a ModelServiceError, those of the stream
    `failed(error, sent)` starts instead, and so on (each stream closed when left)."""
    while True:
        relay = Relay(start)
        try:
            yield relay
            return
        except ModelServiceError as e:
            start = failed(e, relay.sent)


__all__ = [
    "Blocking",
    "Failed",
    "Give",
    "Plan",
    "Relay",
    "ReplyFilter",
    "Sleep",
    "Step",
    "aplayed",
    "closing_stream",
    "first_answer",
    "played",
]

"""Run and ARun: the iterators `Agent.run()` and `Agent.arun()` return. Each step runs under the run's context
(see `chatagent.run_context`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator

from chatagent.llm.base import Usage
from chatagent.run_context import CURRENT, RunContext
from chatagent.schema import Message


class Run(Iterator[list]):
    """The iterator `Agent.run()` returns. Iterate it; `usage` holds the tokens used so far.

    Closing it (or dropping it) closes the model stream underneath.
    """

    __slots__ = ("_gen", "_out", "context")

    def __init__(self, gen: Iterator[list[Message]], out: Callable[[list[Message]], list], context: RunContext) -> None:
        self._gen = gen
        self._out = out
        self.context = context

    @property
    def usage(self) -> Usage:
        return self.context.usage

    def __iter__(self) -> Run:
        return self

    def __next__(self) -> list:
        token = CURRENT.set(self.context)
        try:
            return self._out(next(self._gen))
        finally:
            CURRENT.reset(token)

    def close(self) -> None:
        token = CURRENT.set(self.context)
        try:
            self._gen.close()
        finally:
            CURRENT.reset(token)


class ARun(AsyncIterator[list]):
    """The async iterator `Agent.arun()` returns: `async for rsp in bot.arun(messages)`.

    `usage` holds the tokens used so far. `aclose()` (or breaking out of the loop and dropping it, or
    cancelling the task) closes the model's HTTP stream at once.
    """

    __slots__ = ("_agen", "_out", "context")

    def __init__(
        self, agen: AsyncIterator[list[Message]], out: Callable[[list[Message]], list], context: RunContext
    ) -> None:
        self._agen = agen
        self._out = out
        self.context = context

    @property
    def usage(self) -> Usage:
        return self.context.usage

    def __aiter__(self) -> ARun:
        return self

    async def __anext__(self) -> list:
        token = CURRENT.set(self.context)
        try:
            return self._out(await self._agen.__anext__())
        finally:
            CURRENT.reset(token)

    async def aclose(self) -> None:
        token = CURRENT.set(self.context)
        try:
            await self._agen.aclose()  # type: ignore[attr-defined]
        finally:
            CURRENT.reset(token)

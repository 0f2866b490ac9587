"""Run and ARun: the iterators `Agent.run()` and `Agent.arun()` return. Each step runs under the run's context
(see `chatagent.run.context`) and is turned into what the caller asked for (`output`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from functools import partial
from typing import Any, TypeVar

from chatagent.errors import StructuredOutputError
from chatagent.llm.base import Usage
from chatagent.run.context import CURRENT, RunContext
from chatagent.run.plugin import PluginError
from chatagent.schema import Message
from chatagent.schema.fragment import Fragment
from chatagent.schema.stream import Collector, DictResponse, Response, collect

#: What a run yields or returns to its caller: Messages, or dicts when the caller gave dicts
Output = list[Message] | list[Fragment] | list[dict[str, Any]]  # Fragments: with delta_stream=True


def close_stream(stream: Iterator[Any]) -> None:
    """Close `stream` if it can be closed (a generator: runs its cleanup now, not when it is collected)."""
    close = getattr(stream, "close", None)
    if close is not None:
        close()


_Out = TypeVar("_Out", covariant=True)  # what each step gives the caller (a list of Messages or of dicts)


class Run(Iterator[_Out]):
    """The iterator `Agent.run()` returns. Iterate it; `usage` holds the tokens used so far.

    Closing it (or dropping it) closes the model stream underneath.
    """

    __slots__ = ("_gen", "_out", "context")

    def __init__(
        self, gen: Iterator[list[Fragment]], out: Callable[[list[Fragment]], _Out], context: RunContext
    ) -> None:
        self._gen, self._out, self.context = gen, out, context

    @property
    def usage(self) -> Usage:
        return self.context.usage

    def __iter__(self) -> Run[_Out]:
        return self

    def __next__(self) -> _Out:
        token = CURRENT.set(self.context)
        try:
            item: Any = next(self._gen)
            return item if self._out is _as_is else self._out(item)  # (events as they are: no call an event)
        finally:
            CURRENT.reset(token)

    def close(self) -> None:
        token = CURRENT.set(self.context)
        try:
            close_stream(self._gen)
        finally:
            CURRENT.reset(token)


class ARun(AsyncIterator[_Out]):
    """The async iterator `Agent.arun()` returns: `async for rsp in bot.arun(messages)`.

    `usage` holds the tokens used so far. `aclose()` (or breaking out of the loop and dropping it, or
    cancelling the task) closes the model's HTTP stream at once.
    """

    __slots__ = ("_agen", "_out", "context")

    def __init__(
        self, agen: AsyncIterator[list[Fragment]], out: Callable[[list[Fragment]], _Out], context: RunContext
    ) -> None:
        self._agen, self._out, self.context = agen, out, context

    @property
    def usage(self) -> Usage:
        return self.context.usage

    def __aiter__(self) -> ARun[_Out]:
        return self

    async def __anext__(self) -> _Out:
        token = CURRENT.set(self.context)
        try:
            item: Any = await self._agen.__anext__()
            return item if self._out is _as_is else self._out(item)
        finally:
            CURRENT.reset(token)

    async def aclose(self) -> None:
        token = CURRENT.set(self.context)
        try:
            aclose = getattr(self._agen, "aclose", None)
            if aclose is not None:
                await aclose()
        finally:
            CURRENT.reset(token)


def output(name: str | None, as_dicts: bool, delta_stream: bool, context: RunContext | None = None
           ) -> Callable[[list[Fragment]], Output]:  # fmt: skip
    """What the caller gets of each list of fragments (with `events=True`, the run's events as they are)."""
    if delta_stream or (context is not None and context.events is not None):
        return _as_they_are(name, as_dicts, context)
    response = DictResponse() if as_dicts else Response()
    add, msgs = response.add, response.messages

    def cumulative(fragments: list[Fragment]) -> Output:
        add(named(fragments, name))
        return msgs.copy()

    return cumulative


def _no_events(context: RunContext) -> None:
    if context.events is not None:
        raise TypeError("run_nonstream returns the whole response: for the event stream, iterate run(..., events=True)")


def _as_they_are(name: str | None, as_dicts: bool, context: RunContext | None) -> Callable[[list[Fragment]], Output]:
    """`output` with `delta_stream`: each list of fragments as it is (as dicts when the caller gave dicts), or a
    run's events."""
    if context is not None and context.events is not None:
        return _as_is
    if as_dicts:

        def dumped(fragments: list[Fragment]) -> list[dict[str, Any]]:  # (named, then dumped: one call a chunk)
            out: list[dict[str, Any]] = []
            for f in fragments:
                if name is not None and f.name is None:
                    f.name = name
                out.append(f.model_dump())
            return out

        return dumped
    return partial(named, name=name)


def _as_is(item: Any) -> Any:
    return item


def named(fragments: list[Fragment], name: str | None) -> list[Fragment]:
    """`fragments` with `name` on those that have none (in place: fragments are single-use)."""
    if name is not None:
        for f in fragments:
            if f.name is None:
                f.name = name
    return fragments


def final_response(run: Run[list[Fragment]], as_dicts: bool, structured: bool) -> Any:
    """What `run_nonstream` returns: the whole response (dicts when the caller gave dicts), or with `structured` the
    validated answer."""
    _no_events(run.context)
    try:
        response = collect(run)
    except PluginError as e:
        _raise_structured_error(e)
        raise
    if structured:
        return run.context.output
    return [m.model_dump() for m in response] if as_dicts else response


async def afinal_response(run: ARun[list[Fragment]], as_dicts: bool, structured: bool) -> Any:
    """`final_response` for `arun_nonstream`."""
    _no_events(run.context)
    collector = Collector()
    try:
        async for fragments in run:
            collector.add(fragments)
    except PluginError as e:
        _raise_structured_error(e)
        raise
    if structured:
        return run.context.output
    response = collector.messages()
    return [m.model_dump() for m in response] if as_dicts else response


def _raise_structured_error(e: PluginError) -> None:
    """Raise the StructuredOutputError a structured run failed with (raised in its plugin, so wrapped in `e`)."""
    if isinstance(e.__cause__, StructuredOutputError):
        raise e.__cause__ from None

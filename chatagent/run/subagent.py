"""Sub-agent runs: another agent run as part of the current run (`run_subagent`), and an agent's stream with its
fragments rewritten (`map_fragments`). Used by Router, GroupChat and ReActChat through `Agent._subagent`."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Sequence
from contextvars import Token
from typing import TYPE_CHECKING, Any, cast

from chatagent.run.context import CURRENT, current_run
from chatagent.run.driver import observed
from chatagent.run.plugin import Plugins
from chatagent.run.requests import AgentLoop, Asking, Fragments, LoopItem, ModelCall, Request
from chatagent.run.stage import Stage, relay
from chatagent.run.start import controlled_loop
from chatagent.schema import Message
from chatagent.schema.fragment import typed
from chatagent.schema.stream import Collector

if TYPE_CHECKING:
    from chatagent.run.context import RunContext
    from chatagent.run.protocol import Runnable


def run_subagent(
    agent: Runnable,
    messages: list[Message],
    lang: str,
    start: int = 0,
    view: Callable[[Fragments], Fragments] | None = None,
    **kwargs: Any,
) -> Generator[LoopItem, Any, list[Message]]:
    """Run `agent` on `messages` as part of the current run; use with `yield from`.

    Its fragments are placed from `start`, named after it, then passed through `view` if given; it shares
    the run's deadline, callbacks and usage totals; its requests go to the run's driver (so it streams
    under `arun` too). Returns what it showed (its response, before `view`).
    """
    parent = current_run()
    parent.check_deadline()
    ctx = parent.child(agent.name)
    if parent.session_id is not None:  # the members' tools keep their state per conversation too
        kwargs.setdefault("session_id", parent.session_id)
    plugins = agent.run_plugins()
    if plugins:
        ctx.plugins = Plugins(plugins)
    token = CURRENT.set(ctx)
    try:
        gen = controlled_loop(agent, list(messages), lang, kwargs, ctx)
    finally:
        CURRENT.reset(token)
    if ctx.callbacks:
        gen = observed(gen, ctx)
    return (yield from relay(gen, Placed(ctx, agent.name, start, view)))


class Placed(Stage):
    """A sub-agent's run inside its parent's: its own run context current while its code runs, its fragments placed
    from `start` in the parent's response and named after it, then through `view`; returns what it showed."""

    __slots__ = ("ctx", "name", "start", "view", "shown", "token")

    def __init__(self, ctx: RunContext, name: str | None, start: int, view: Callable[[Fragments], Fragments] | None
                 ) -> None:  # fmt: skip
        self.ctx, self.name, self.start, self.view = ctx, name, start, view
        self.shown = Collector()
        self.token: Token[RunContext | None] | None = None

    def enter(self) -> None:
        self.token = CURRENT.set(self.ctx)

    def leave(self) -> None:
        if self.token is not None:
            CURRENT.reset(self.token)
            self.token = None

    def place(self, given: Sequence[Message]) -> Fragments:
        fragments = typed(given)
        self.shown.add(fragments)
        for f in fragments:
            f.index += self.start
            if f.name is None:
                f.name = self.name
        return fragments

    def show(self, fragments: Fragments) -> Fragments:
        fragments = self.place(fragments)
        return fragments if self.view is None else self.view(fragments)

    def request(self, request: Request) -> Asking[Request]:
        if isinstance(request, ModelCall):
            request.maps.append(self.place)
            if self.view is not None:
                request.maps.append(self.view)
        return request
        yield  # (a generator: see Stage.request)

    def end(self, result: Any) -> Asking[list[Message]]:
        return self.shown.messages()
        yield  # (a generator: see Stage.end)


class Mapped(Stage):
    """A loop with `fn` applied to every list of fragments it shows, the model's streamed pieces included."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Fragments], Fragments]) -> None:
        self.fn = fn

    def show(self, fragments: Fragments) -> Fragments:
        return self.fn(typed(fragments))

    def request(self, request: Request) -> Asking[Request]:
        if isinstance(request, ModelCall):
            request.maps.append(self.fn)
        return request
        yield  # (a generator: see Stage.request)


def map_fragments(gen: Iterator[Any], fn: Callable[[Fragments], Fragments]) -> Asking[Any]:
    """`gen` (an agent's fragments and requests) with `fn` applied to every list of fragments it shows, the
    model's streamed pieces included (through the model calls' maps); requests pass on. Use with `yield from`;
    returns what `gen` returns."""
    # `gen` is an agent's loop, a generator (sent results, closed), even where a `_run` declares an Iterator
    return relay(cast("AgentLoop", gen), Mapped(fn))


def hidden(fragments: Fragments) -> Fragments:
    """A view that shows nothing: `yield from self._subagent(agent, messages, lang, view=hidden)` runs it unseen."""
    return []

"""Sub-agent runs: another agent run as part of the current run (`run_subagent`), and an agent's stream with its
fragments rewritten (`map_fragments`). Used by Router, GroupChat and ReActChat through `Agent._subagent`."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

from chatagent.run.context import CURRENT, current_run
from chatagent.run.driver import observed
from chatagent.run.plugin import Plugins
from chatagent.run.requests import AgentLoop, Asking, Fragments, LoopItem, ModelCall, pass_on, step
from chatagent.run.start import controlled_loop
from chatagent.schema import Message
from chatagent.schema.fragment import typed
from chatagent.schema.stream import Collector

if TYPE_CHECKING:
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
    shown = Collector()
    name = agent.name

    def place(given: Sequence[Message]) -> Fragments:
        fragments = typed(given)
        shown.add(fragments)
        for f in fragments:
            f.index += start
            if f.name is None:
                f.name = name
        return fragments

    value: Any = None
    error: BaseException | None = None
    try:
        while True:
            token = CURRENT.set(ctx)
            try:
                item = step(gen, value, error)
            except StopIteration:
                break
            finally:
                CURRENT.reset(token)
            error = value = None
            if type(item) is list:
                if item:
                    item = place(item)
                    if view is not None:
                        item = view(item)
                    if item:
                        yield item
                continue
            if type(item) is ModelCall:
                item.maps.append(place)
                if view is not None:
                    item.maps.append(view)
            value, error = yield from pass_on(item)
    finally:
        token = CURRENT.set(ctx)
        try:
            gen.close()
        finally:
            CURRENT.reset(token)
    return shown.messages()


def map_fragments(gen: Iterator[Any], fn: Callable[[Fragments], Fragments]) -> Asking[Any]:
    """`gen` (an agent's fragments and requests) with `fn` applied to every list of fragments it shows, the
    model's streamed pieces included (through the model calls' maps); requests pass on. Use with `yield from`;
    returns what `gen` returns."""
    # `gen` is an agent's loop, a generator (sent results, closed), even where a `_run` declares an Iterator
    loop = cast("AgentLoop", gen)
    value: Any = None
    error: BaseException | None = None
    try:
        while True:
            try:
                item = step(loop, value, error)
            except StopIteration as stop:
                return stop.value
            error = value = None
            if type(item) is list:
                if item:
                    out = fn(typed(item))
                    if out:
                        yield out
                continue
            if type(item) is ModelCall:
                item.maps.append(fn)
            value, error = yield from pass_on(item)
    finally:
        loop.close()


def hidden(fragments: Fragments) -> Fragments:
    """A view that shows nothing: `yield from self._subagent(agent, messages, lang, view=hidden)` runs it unseen."""
    return []

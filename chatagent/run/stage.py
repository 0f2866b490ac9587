"""Stages: the layers between an agent's loop and its driver, and `relay`, the one pump that runs a loop through one.

An agent's loop (`chatagent.run.requests`) yields fragments and requests and is sent each request's result.
Whatever watches or changes a run on its way to the driver (checkpoints, plugins and approval, a sub-agent's place
in its parent's response, Qwen-style whole lists, a compaction's mark) is a `Stage`: a class with the hooks it
needs, each passing what it is given through unchanged unless overridden. `relay(loop, stage)` runs `loop` through
`stage` and is itself a loop, so stages stack:

    class Stamped(Stage):
        '''Every fragment shown says which run made it.'''

        def __init__(self, run_id: str) -> None:
            self.run_id = run_id

        def show(self, fragments):
            for f in fragments:
                f.extra = {**(f.extra or {}), "run": self.run_id}
            return fragments

    gen = relay(agent.loop(messages, lang, kwargs), Stamped("r1"))

The hooks, in the order a step meets them:

- `enter()` and `leave()`: around each step of the loop's own code, and around its closing (to set a context
  variable for it, as a sub-agent's run context is).
- `show(fragments)`: what the loop shows (never an empty list); returns what to show instead (`[]`: nothing). A
  model call's streamed pieces do not pass here: a stage that places them adds a map to the call (`ModelCall.maps`)
  in `request`.
- `request(request)`: a request on its way to the driver; a generator that returns the request to pass on, and
  may first `yield` requests and fragments of its own (a checkpoint's write, output it held back).
- `answer(request, result, error)`: the driver carried it out (`error`: what it failed with, which is thrown into
  the loop after this hook unless the hook raises); a generator returning the result the loop is sent.
- `end(result)`: the loop returned `result`; a generator returning what the relay returns.

The relay calls only the hooks a stage overrides (a hook it does not override costs nothing), and always closes
the loop it runs: when the loop ends, fails, or the relay itself is closed.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from chatagent.run.requests import AgentLoop, Asking, Fragments, Request

HOOKS = ("enter", "leave", "show", "request", "answer", "end")


class Stage:
    """A layer between an agent's loop and its driver (see the module docstring): every hook passes through."""

    __slots__ = ()

    def enter(self) -> None:
        """Before each step of the loop's own code (and before it is closed)."""

    def leave(self) -> None:
        """After each step of the loop's own code (and after it is closed), however it ended."""

    def show(self, fragments: Fragments) -> Fragments:
        """What to show of `fragments`, which the loop yielded (in place: fragments are single-use)."""
        return fragments

    def request(self, request: Request) -> Asking[Request]:
        """The request to pass on in place of `request`; may ask the driver for something first."""
        return request
        yield  # a generator: a stage may yield its own requests and fragments before the one it passes on

    def answer(self, request: Request, result: Any, error: Exception | None) -> Asking[Any]:
        """The result the loop is sent for `request` (`error`: what the driver raised, thrown into the loop next)."""
        return result
        yield  # (a generator, as `request`)

    def end(self, result: Any) -> Asking[Any]:
        """What the relay returns once the loop returned `result`."""
        return result
        yield  # (a generator, as `request`)


@cache
def _overridden(kind: type[Stage]) -> frozenset[str]:
    """The hooks `kind` overrides."""
    return frozenset(h for h in HOOKS if getattr(kind, h) is not getattr(Stage, h))


def relay(loop: AgentLoop, stage: Stage) -> AgentLoop:
    """`loop` through `stage`: its fragments shown as the stage says, its requests passed on to the driver (and their
    results back) through the stage's hooks; returns what `stage.end` makes of the loop's return value. `loop` is
    closed when this ends, however it ends."""
    hooks = _overridden(type(stage))
    enter = stage.enter if "enter" in hooks else None
    leave = stage.leave if "leave" in hooks else None
    show = stage.show if "show" in hooks else None
    ask = stage.request if "request" in hooks else None
    answer = stage.answer if "answer" in hooks else None
    send, throw = loop.send, loop.throw
    value: Any = None
    error: Exception | None = None
    try:
        while True:
            if enter is not None:
                enter()
            try:
                item: Any = send(value) if error is None else throw(error)
            except StopIteration as stop:
                result = stop.value
                break
            finally:
                if leave is not None:
                    leave()
            if not isinstance(item, Request):  # fragments
                value = error = None
                if item and show is not None:
                    item = show(item)
                if item:
                    yield item
                continue
            if ask is not None:
                item = yield from ask(item)
            try:
                value, error = (yield item), None
            except Exception as e:  # the driver's: thrown into the loop, where it may be handled
                value, error = None, e
            if answer is not None:
                value = yield from answer(item, value, error)
        return (yield from stage.end(result)) if "end" in hooks else result
    finally:
        if enter is not None:
            enter()
        try:
            loop.close()
        finally:
            if leave is not None:
                leave()


__all__ = ["HOOKS", "Stage", "relay"]

"""Qwen-Agent compatibility, the only place for it: agents whose `_run` is written the Qwen-Agent way (agents that
are not `fragment_native`) go through here, fragment-native ones never do.

Such a `_run` yields the whole response so far each time instead of fragments (`whole_lists_as_fragments` turns
those into fragments), and iterates `_call_llm` with a plain `for` loop: `model_call` first yields a `ListedCall`,
an empty list (harmless in `response + output`) that carries the model call for `whole_lists_as_fragments` to pass
on to the driver; when nobody passes it on, it calls the model itself and yields the reply so far as whole lists.

Overrides of `_call_llm` and `_call_tool` written the Qwen-Agent way, in an agent whose loop is built in: each is
called with the parameters it accepts only (`accepted`); an overridden `_call_llm` is driven by `overridden_llm`,
which places what it yields in the response and sends its requests on (the base `_call_llm` it calls is
`placed_call`: usable with `yield from` or a plain for loop); an overridden `_call_tool` is called in place
(`tool_override`). `Agent.__init_subclass__` wraps the overrides (`wrap_call_llm`, `wrap_call_tool`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Generator, Iterable, Iterator
from contextvars import ContextVar, Token
from typing import Any, cast

from chatagent.run.driver import ModelStream, model_stream
from chatagent.run.requests import AgentLoop, Asking, Fragments, ModelCall, Request, View
from chatagent.run.stage import Stage, relay
from chatagent.schema import Message, to_message
from chatagent.schema.fragment import fragment, is_fragment, shift, typed
from chatagent.schema.stream import WholeLists, accumulate


class ListedCall(list[Message], Request):
    """A model call as a Qwen-style loop sees it: an empty list, filled with the reply once the call is done (a
    request to the stages that pass it on: `AsFragments` and `Overridden` hand its call to the driver)."""

    __slots__ = ("call",)

    def __init__(self, call: ModelCall) -> None:
        super().__init__()
        self.call = call

    # a list compares by content; this is only ever equal to itself
    def __eq__(self, other: object) -> bool:
        return self is other

    def __ne__(self, other: object) -> bool:
        return self is not other

    __hash__ = object.__hash__  # pyright: ignore[reportAssignmentType] -- hashed by identity (list sets None)


def model_call(call: ModelCall) -> Generator[list[Message], list[Message] | None, list[Message]]:
    """`_call_llm` of an agent that is not fragment-native (see the module docstring); returns the reply."""
    listed = ListedCall(call)
    reply = yield listed
    if reply is not None:
        return reply
    if call.done:  # a plain for loop passed the request on itself and the driver carried it out
        return call.result
    return (yield from _in_place(call))


def _in_place(call: ModelCall) -> Generator[list[Message], Any, list[Message]]:
    """A plain for loop iterates the model call: call the model here, yield the reply so far as whole lists."""
    call.hide = True
    s = ModelStream(call)
    stream = model_stream(call, s.usage)
    try:
        yield from accumulate(_collected(stream, s))
    except BaseException as e:
        s.failed(e)
        raise
    finally:
        stream.close()
        reply = s.finish()
    return reply


def _collected(stream: Iterable[Fragments], s: ModelStream) -> Iterator[Fragments]:
    """The stream's fragments, also collected (and the deadline checked) by `s`."""
    for fragments in stream:
        s.push(fragments)
        yield fragments


def whole_lists_as_fragments(gen: Generator[Any, Any, Any]) -> AgentLoop:
    """`gen` (an agent's `_run`) with yields of the whole response so far (Qwen-Agent style) turned into fragments;
    fragments and requests pass through (see `AsFragments`)."""
    return relay(gen, AsFragments())


class AsFragments(Stage):
    """A Qwen-style loop's whole lists as fragments. What was shown before the first whole list is remembered
    (cheaply: copies of the few messages an agent yields itself, and the model replies) so that a whole list can be
    told apart from it."""

    __slots__ = ("seen", "whole", "listed")

    def __init__(self) -> None:
        self.seen: list[Fragments] | None = []  # (None once there is a whole list)
        self.whole: WholeLists | None = None
        self.listed: ListedCall | None = None  # the model call on its way, as the loop sees it

    def _record(self, shown: Fragments) -> None:
        if self.whole is not None:
            self.whole.add(shown)
        elif self.seen is not None:  # (no whole list yet)
            self.seen.append(shown)

    def show(self, fragments: list[Any]) -> Fragments:
        if is_fragment(fragments[0]):
            fragments = typed(fragments)
            self._record([f.copy() for f in fragments])
            return fragments
        if self.whole is None:
            self.whole = WholeLists()
            for shown in self.seen or ():
                self.whole.add(shown)
            self.seen = None
        return self.whole.fragments(fragments)

    def request(self, request: Request) -> Asking[Request]:
        self.listed = request if type(request) is ListedCall else None
        return request if self.listed is None else self.listed.call
        yield  # (a generator: see Stage.request)

    def answer(self, request: Request, result: Any, error: Exception | None) -> Asking[Any]:
        if error is None and result is not None:
            reply: list[Message] = result  # (a model call's reply, or a list a driver's ToolWait does not give)
            if self.listed is not None:
                self.listed[:] = reply  # for a loop that reads the call's list after the request was carried out
            if type(request) is ModelCall and not request.hide:
                self._record([fragment(m, request.start + i) for i, m in enumerate(reply)])
        return result
        yield  # (a generator: see Stage.request)


# ---- Qwen-Agent-style overrides in agents with built-in loops ------------------------------------------------

#: the steps a Qwen-Agent user overrides; the built-in loops call the overrides with Qwen-Agent's arguments
OVERRIDABLE = ("_call_llm", "_call_tool", "_detect_tool")


class Placement:
    """Where the model calls of an overridden `_call_llm` go in the response, while it runs in a built-in loop."""

    __slots__ = ("start", "view", "hide")

    def __init__(self, start: int, view: View | None, hide: bool) -> None:
        self.start, self.view, self.hide = start, view, hide


_PLACEMENT: ContextVar[Placement | None] = ContextVar("chatagent_llm_placement", default=None)


@functools.cache
def _parameters(fn: Callable[..., Any]) -> frozenset[str] | None:
    """The keyword parameters `fn` takes; None when it takes any (`**kwargs`)."""
    params = inspect.signature(fn).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return frozenset(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


def accepted(fn: Callable[..., Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """`kwargs` without what `fn` does not take (a Qwen-Agent override knows nothing of chatagent's own)."""
    names = _parameters(fn)
    return kwargs if names is None else {k: v for k, v in kwargs.items() if k in names}


def placement() -> Placement | None:
    """Where the base `_call_llm` puts its call when an override of it runs in a built-in loop, else None."""
    return _PLACEMENT.get()


def placed_call(
    llm: Any, messages: list[Message], functions: Any, cfg: dict[str, Any], ctx: Any
) -> Generator[list[Message], Any, list[Message]]:
    """The base `_call_llm` inside an override (a subclass of a built-in agent may override `_call_llm`, `_call_tool`
    and `_detect_tool` with Qwen-Agent's signatures: its loop calls them). The override may `yield from` it (the call
    goes on to the driver and its reply comes back), or iterate it with a plain for loop, seeing the reply so far as
    whole lists (the model is called here, as in Qwen-Agent, unless the call was passed on: then the reply once)."""
    placed = _PLACEMENT.get()
    assert placed is not None, "placed_call runs while an override of _call_llm runs in a built-in loop"
    call = ModelCall(llm, messages, functions, cfg, placed.start, ctx, placed.view, placed.hide)
    reply = yield ListedCall(call)
    if reply is not None:
        return reply
    if call.done:
        result: list[Message] = call.result
        yield result
        return result
    return (yield from _in_place(call))


def wrap_call_llm(fn: Callable[..., Any]) -> Callable[..., Any]:
    """An agent class's own `_call_llm`, made callable by the built-in loops (see the module docstring)."""

    @functools.wraps(fn)
    def _call_llm(
        self: Any,
        messages: list[Message],
        functions: list[dict[str, Any]] | None = None,
        stream: bool = True,
        extra_generate_cfg: dict[str, Any] | None = None,
        *,
        start: int = 0,
        view: View | None = None,
        hide: bool = False,
        **more: Any,
    ) -> Any:
        given = {"messages": messages, "functions": functions, "stream": stream, **more}
        if extra_generate_cfg is not None:
            given["extra_generate_cfg"] = extra_generate_cfg
        args = accepted(fn, given)
        if not stream or not self.fragment_native or _PLACEMENT.get() is not None:
            return fn(self, **args)  # a Qwen-style loop, or super() from an override: as Qwen-Agent calls it
        return overridden_llm(lambda: fn(self, **args), Placement(start, view, hide))

    return _call_llm


def overridden_llm(make: Callable[[], Any], placed: Placement) -> Generator[Any, Any, list[Message]]:
    """Run an overridden `_call_llm` (`make()` calls it) in a built-in loop: its requests go on to the driver, and
    the whole lists it yields are shown from `placed.start` (through the call's view, if any) where they differ
    from what was shown; returns its reply (what it returned, else the last list it yielded)."""
    token = _PLACEMENT.set(placed)
    try:
        result = make()
    finally:
        _PLACEMENT.reset(token)
    stage = Overridden(placed)
    if isinstance(result, list):
        return (yield from stage.end(result))
    gen: Generator[Any, Any, Any] = result if hasattr(result, "send") else _generator(result)
    stage.loop = gen
    return (yield from relay(gen, stage))


def _generator(items: Iterable[Any]) -> Generator[Any, Any, None]:
    """An override that returns a plain iterator, as a generator (it cannot be sent results: it is not)."""
    for item in items:  # noqa: UP028 (`yield from` would send it the results, which a plain iterator cannot take)
        yield item


class Overridden(Stage):
    """An overridden `_call_llm` in a built-in loop (see `overridden_llm`): its placement current while it runs."""

    __slots__ = ("placed", "whole", "last", "listed", "token", "loop", "ended")

    def __init__(self, placed: Placement) -> None:
        self.placed = placed
        self.whole = WholeLists()  # what was shown of the call
        self.last: list[Message] = []  # its reply so far
        self.listed: ListedCall | None = None  # its model call on its way
        self.token: Token[Placement | None] | None = None
        self.loop: Generator[Any, Any, Any] | None = None
        self.ended = False  # its view ended the reply

    def enter(self) -> None:
        if self.ended and self.loop is not None:  # after what the view let through went out
            self.loop.close()
        self.token = _PLACEMENT.set(self.placed)

    def leave(self) -> None:
        if self.token is not None:
            _PLACEMENT.reset(self.token)
            self.token = None

    def show(self, fragments: list[Any]) -> Fragments:
        if is_fragment(fragments[0]):  # an override that yields fragments itself
            return typed(fragments)
        self.last = [m if isinstance(m, Message) else to_message(m) for m in fragments]
        out = _shown(self.whole, self.last, self.placed)
        view = self.placed.view
        if view is not None and view.done:  # the view ends the reply here
            self.ended = True
        return out

    def request(self, request: Request) -> Asking[Request]:
        self.listed = request if type(request) is ListedCall else None
        return request if self.listed is None else self.listed.call
        yield  # (a generator: see Stage.request)

    def answer(self, request: Request, result: Any, error: Exception | None) -> Asking[Any]:
        if type(request) is ModelCall and error is None and result is not None:
            reply: list[Message] = result  # the model's reply
            if self.listed is not None:
                self.listed[:] = reply
                self.last = reply
            if not self.placed.hide:  # shown by the driver (through the view, which has seen it)
                self.whole.add([fragment(m, i) for i, m in enumerate(reply)])
        return result
        yield  # (a generator: see Stage.request)

    def end(self, result: Any) -> Asking[list[Message]]:
        if isinstance(result, list):
            self.last = [m if isinstance(m, Message) else to_message(m) for m in cast("list[Any]", result)]
            out = _shown(self.whole, self.last, self.placed)
            if out:
                yield out
        return self.last


def _shown(whole: WholeLists, reply: list[Message], placed: Placement) -> Fragments:
    """What an override's whole list `reply` adds to what was shown of the call, placed and through its view."""
    if placed.hide or (placed.view is not None and placed.view.done):
        return []
    out = whole.fragments(reply)
    if out:
        out = shift(out, placed.start)
        if placed.view is not None:
            out = placed.view(out)
    return out


def wrap_call_tool(fn: Callable[..., Any]) -> Callable[..., Any]:
    """An agent class's own `_call_tool`, given only the keyword arguments it takes."""

    @functools.wraps(fn)
    def _call_tool(self: Any, tool_name: str, tool_args: Any = "{}", **kwargs: Any) -> Any:
        return fn(self, tool_name, tool_args, **accepted(fn, kwargs))

    return _call_tool


def tool_override(call_tool: Callable[..., Any], tool_name: str, tool_args: Any, kwargs: dict[str, Any]) -> Any:
    """`_run_tool` of an agent whose `_call_tool` is overridden: the override, called here (a generator that asks
    for nothing and returns its content)."""
    yield from ()  # a generator, used with `yield from` like the other steps
    return call_tool(tool_name, tool_args, **kwargs)


def overridden_steps(cls: type, base: type) -> frozenset[str]:
    """Which of OVERRIDABLE a class below `base` in `cls`'s MRO defines."""
    mro = cls.__mro__
    below = mro[: mro.index(base)] if base in mro else mro
    return frozenset(n for n in OVERRIDABLE if any(n in vars(c) for c in below))

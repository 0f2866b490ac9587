"""Qwen-Agent compatibility, the only place for it: agents whose `_run` is written the Qwen-Agent way (agents that
are not `fragment_native`) go through here, fragment-native ones never do.

Such a `_run` yields the whole response so far each time instead of fragments (`whole_lists_as_fragments` turns
those into fragments), and iterates `_call_llm` with a plain `for` loop: `model_call` first yields a `ListedCall`,
an empty list (harmless in `response + output`) that carries the model call for `whole_lists_as_fragments` to pass
on to the driver; when nobody passes it on, it calls the model itself and yields the reply so far as whole lists.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Iterator
from typing import Any, cast

from chatagent.run.driver import ModelStream, model_stream
from chatagent.run.requests import AgentLoop, Fragments, ModelCall, Request, pass_on, step
from chatagent.schema import Message
from chatagent.schema.fragment import fragment, is_fragment, typed
from chatagent.schema.stream import WholeLists, accumulate


class ListedCall(list[Message]):
    """A model call as a Qwen-style loop sees it: an empty list, filled with the reply once the call is done."""

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
    # a plain for loop iterates us: call the model here, yield the reply so far as whole lists
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
    fragments and requests pass through. What was shown before the first whole list is remembered (cheaply: copies of the
    few messages an agent yields itself, and the model replies) so that a whole list can be told apart
    from it."""
    seen: list[Fragments] | None = []
    whole: WholeLists | None = None
    value: Any = None
    error: BaseException | None = None
    try:
        while True:
            try:
                item = step(gen, value, error)
            except StopIteration as stop:
                return stop.value
            error = value = None
            listed = None
            if type(item) is ListedCall:
                listed, item = item, item.call
            if isinstance(item, Request):
                value, error = yield from pass_on(item)
                if error is not None:
                    continue
                reply = cast("list[Message]", value) if isinstance(value, list) else None
                if listed is not None and reply is not None:
                    listed[:] = reply  # for a loop that reads the call's list after the request was carried out
                if type(item) is ModelCall and not item.hide and reply is not None:
                    shown = [fragment(m, item.start + i) for i, m in enumerate(reply)]
                    if whole is not None:
                        whole.add(shown)
                    elif seen is not None:  # (no whole list yet)
                        seen.append(shown)
                continue
            if not item:
                continue
            first = item[0]
            if is_fragment(first):
                item = typed(item)
                shown = [f.copy() for f in item]
                if whole is not None:
                    whole.add(shown)
                elif seen is not None:  # (no whole list yet)
                    seen.append(shown)
                yield item
                continue
            if whole is None:
                whole = WholeLists()
                for shown in seen or ():
                    whole.add(shown)
                seen = None
            out = whole.fragments(item)
            if out:
                yield out
    finally:
        gen.close()

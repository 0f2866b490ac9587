"""Qwen-Agent-style `_run`s: a `_run` that yields the whole response so far each time (instead of fragments) is
turned into fragments here, and a model call iterated with a plain `for` loop streams as whole lists."""

from __future__ import annotations

from collections.abc import Generator, Iterable, Iterator
from typing import Any

from chatagent.run.driver import ModelStream
from chatagent.run.requests import AgentLoop, Fragments, ModelCall, Request, pass_on, step
from chatagent.schema.fragment import fragment, is_fragment, typed
from chatagent.schema.stream import WholeLists


def collected(stream: Iterable[Fragments], s: ModelStream) -> Iterator[Fragments]:
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
            if isinstance(item, Request):
                value, error = yield from pass_on(item)
                if error is not None:
                    continue
                if type(item) is ModelCall and not item.hide and isinstance(value, list):
                    shown = [fragment(m, item.start + i) for i, m in enumerate(value)]
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

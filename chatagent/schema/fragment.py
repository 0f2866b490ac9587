"""A fragment: a piece of one message of a streamed response, and its place in that response.

`Fragment` is a Message with two fields more: `index`, the position in the response of the message it
belongs to, and `replace`. How fragments add up is `chatagent.schema.stream`'s job. Earlier versions marked a
fragment with `extra['index']` (and `extra['replace']`) on a plain Message; `as_fragment` and `typed`
convert such messages wherever fragments come in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chatagent.schema import ContentItem, FunctionCall, Message, to_message

INDEX = "index"  # the legacy extra key (and a fragment dict's key) for `Fragment.index`
REPLACE = "replace"
#: the `extra` key of a tool call whose arguments are streaming: `{'name': ..., 'arguments': ...}`. On a fragment,
#: `arguments` is the piece that just arrived (and `name` is given with the first piece); on the message it adds up
#: to, the arguments so far. The complete call replaces that message (`replace=True`, `function_call` set).
STREAMING_CALL = "streaming_call"


class Fragment(Message):
    """A piece of the message at `index` of a response: a Message (`f.role`, `f["content"]`, `f.extra`)
    plus its place. `replace=True` makes it replace that message instead of adding to it."""

    __slots__ = ("index", "replace")
    _fields = (*Message.__slots__, "index", "replace")
    index: int
    replace: bool

    def __init__(
        self,
        role: str,
        content: str | list[ContentItem] | list[dict[str, Any]] | None = "",
        reasoning_content: str | None = None,
        name: str | None = None,
        function_call: FunctionCall | dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,
        *,
        index: int,
        replace: bool = False,
    ) -> None:
        super().__init__(role, content, reasoning_content, name, function_call, extra)
        self.index = _checked_index(index)
        self.replace = replace is True

    @classmethod
    def unchecked(
        cls,
        role: str,
        content: str | list[ContentItem],
        name: str | None = None,
        function_call: FunctionCall | None = None,
        reasoning_content: str | None = None,
        extra: dict[str, Any] | None = None,
        index: int = 0,
        replace: bool = False,
    ) -> Fragment:
        """Build without validation, for the framework's own already-valid values (the per-chunk path)."""
        f = object.__new__(cls)
        f.role, f.content, f.name, f.function_call = role, content, name, function_call
        f.reasoning_content, f.extra, f.index, f.replace = reasoning_content, extra, index, replace
        return f

    def copy(self, **changes: Any) -> Fragment:
        """A copy (as `Message.copy`), keeping `index` and `replace` unless changed."""
        f = Fragment.unchecked(
            self.role,
            list(self.content) if isinstance(self.content, list) else self.content,
            self.name,
            self.function_call,
            self.reasoning_content,
            dict(self.extra) if self.extra is not None else None,
            self.index,
            self.replace,
        )
        for k, v in changes.items():
            setattr(f, k, v)
        return f

    def model_dump(self) -> dict[str, Any]:
        """The fragment as a dict: the message's keys, `index`, and `replace` when set."""
        d = super().model_dump()
        d[INDEX] = self.index
        if self.replace:
            d[REPLACE] = True
        return d

    def message(self) -> Message:
        """The message this fragment starts: a plain Message with its own copy of `extra`."""
        extra = dict(self.extra) if self.extra else None
        return Message.unchecked(self.role, self.content, self.name, self.function_call, self.reasoning_content, extra)


def added_extra(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """A message's `old` extra with a fragment's `new` extra added (a new dict, or `new` itself when there was none):
    keys set, and a streaming call's arguments (`STREAMING_CALL`) appended to those so far."""
    if not old:
        return new
    merged = {**old, **new}
    piece = new.get(STREAMING_CALL)
    so_far = old.get(STREAMING_CALL)
    if piece is not None and so_far is not None:
        merged[STREAMING_CALL] = {
            **so_far,
            **piece,
            "arguments": so_far.get("arguments", "") + piece.get("arguments", ""),
        }
    return merged


def _checked_index(index: object) -> int:
    if type(index) is not int or index < 0:
        raise ValueError(f"a fragment's index must be an int >= 0, got {index!r}")
    return index


def fragment(msg: Message, index: int) -> Fragment:
    """`msg` as a fragment of the message at `index` (a copy; `msg` is not changed)."""
    extra = dict(msg.extra) if msg.extra else None
    return Fragment.unchecked(msg.role, msg.content, msg.name, msg.function_call, msg.reasoning_content, extra, index)


def not_a_fragment(f: object) -> ValueError:
    """The error for something given where a fragment belongs."""
    return ValueError(f"not a fragment (a Fragment, or a Message with extra['index']): {f!r}")


def is_fragment(m: object) -> bool:
    """Whether `m` is a fragment: a Fragment, or a Message marked the older way (`extra['index']`)."""
    return isinstance(m, Fragment) or (isinstance(m, Message) and m.extra is not None and INDEX in m.extra)


def as_fragment(f: Message | dict[str, Any]) -> Fragment:
    """`f` as a Fragment: itself if it is one; a Message or dict marked the older way (`extra['index']`,
    `extra['replace']`), or a fragment's dict (`index` beside the message's keys), converted."""
    if isinstance(f, Fragment):
        return f
    if isinstance(f, dict):
        if INDEX in f:
            m = to_message({k: v for k, v in f.items() if k != INDEX and k != REPLACE}, "fragment")
            return _placed(m, m.extra, f[INDEX], f.get(REPLACE))
        f = to_message(f, "fragment")
    extra = f.extra
    if extra is None or INDEX not in extra:
        raise not_a_fragment(f)
    rest = {k: v for k, v in extra.items() if k != INDEX and k != REPLACE}
    return _placed(f, rest or None, extra[INDEX], extra.get(REPLACE))


def _placed(m: Message, extra: dict[str, Any] | None, index: object, replace: object) -> Fragment:
    return Fragment.unchecked(
        m.role, m.content, m.name, m.function_call, m.reasoning_content, extra, _checked_index(index), replace is True
    )


def typed(fragments: Sequence[Message]) -> list[Fragment]:
    """`fragments` as a list of Fragments: itself when it holds only Fragments, else the older-style ones converted."""
    for f in fragments:
        if type(f) is not Fragment:
            return [as_fragment(g) for g in fragments]
    return fragments if isinstance(fragments, list) else list(fragments)  # pyright: ignore[reportReturnType]


def shift(fragments: list[Fragment], offset: int) -> list[Fragment]:
    """The fragments moved `offset` places later in the response (in place: fragments are single-use)."""
    if offset:
        for f in fragments:
            f.index += offset
    return fragments

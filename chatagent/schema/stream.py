"""Incremental streaming: message fragments and how they add up to a response.

Every stream in chatagent is, underneath, a stream of *fragments*: lists of `Fragment`s, Messages that
carry `index`, the position in the response of the message they belong to. A fragment at a new index
starts a message; a fragment at an existing index appends its `content` and `reasoning_content` text
to that message and sets any other field it carries (its `extra` keys are added to the message's).
Text only ever grows, so the total cost of an incremental stream is linear in the length of the answer.
The one exception: a fragment with `replace=True` replaces the message at its index whole (what a
Qwen-Agent-style agent needs when it rewrites a message it showed before; see `WholeLists`).

Earlier versions marked a fragment with `extra['index']` (and `extra['replace']`) on a plain Message;
such messages are still taken wherever fragments come in (`as_fragment`), so backends and agents written
that way keep working.

`Response` turns fragments into the cumulative view (each yield the whole response so far), copying
only the message that changed, so that earlier yields stay valid.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

from chatagent.schema import ContentItem, Message, to_message
from chatagent.schema.fragment import STREAMING_CALL, Fragment, added_extra, as_fragment, fragment


class Response:
    """Adds up fragments into full messages; `messages` is the response so far."""

    __slots__ = ("messages",)

    def __init__(self) -> None:
        self.messages: list[Message] = []

    def add(self, fragments: Iterable[Message]) -> list[int]:
        """Apply fragments; returns the indexes that changed. Changed messages are new objects."""
        msgs = self.messages
        changed: list[int] = []
        for f in fragments:
            if type(f) is not Fragment:
                f = as_fragment(f)
            i = f.index
            if i == len(msgs) or (f.replace and i < len(msgs)):
                _put(msgs, i, f.message())
            elif i < len(msgs):
                msgs[i] = _extend(msgs[i], f)
            else:
                raise _past_the_end(i, len(msgs))
            if not changed or changed[-1] != i:
                changed.append(i)
        return changed


def _own(extra: dict[str, Any] | None) -> dict[str, Any] | None:
    """A message's own copy of a fragment's extra (fragments may be seen by several consumers)."""
    return dict(extra) if extra else None


def _put(items: list[Any], i: int, item: Any) -> None:
    """`item` at `i` of `items`: appended at the end, else in place of what is there."""
    if i == len(items):
        items.append(item)
    else:
        items[i] = item


def _past_the_end(i: int, n: int) -> ValueError:
    return ValueError(f"fragment index {i} skips past the end of a response of {n} messages")


class DictResponse:
    """Like `Response`, but the response is kept as dicts (what `model_dump` gives): cumulative output to
    callers who passed dicts, without building a Message and dumping it again on every chunk."""

    __slots__ = ("messages",)

    def __init__(self, messages: list[dict[str, Any]] | None = None) -> None:
        self.messages: list[dict[str, Any]] = [] if messages is None else messages

    def add(self, fragments: Iterable[Message]) -> None:
        msgs = self.messages
        for f in fragments:
            if type(f) is not Fragment:
                f = as_fragment(f)
            i = f.index
            if i == len(msgs) or (f.replace and i < len(msgs)):
                _put(msgs, i, Message.model_dump(f))
            elif i < len(msgs):
                msgs[i] = _extend_dict(msgs[i], f)
            else:
                raise _past_the_end(i, len(msgs))


def _extend_dict(d: dict[str, Any], f: Fragment) -> dict[str, Any]:
    """A copy of message dict `d` with fragment `f` applied: text appended, fields set."""
    d = d.copy()
    c = f.content
    if c:
        old = d["content"]
        if isinstance(c, str) and isinstance(old, str):
            d["content"] = old + c
        else:
            d["content"] = _joined_items(old, c)
    if f.reasoning_content:
        d["reasoning_content"] = (d.get("reasoning_content") or "") + f.reasoning_content
    if f.name is not None:
        d["name"] = f.name
    if f.function_call is not None:
        d["function_call"] = f.function_call.model_dump()
    if f.extra:
        d["extra"] = added_extra(d.get("extra"), f.extra)
    return d


def _joined_items(old: str | list[dict[str, Any]], new: str | list[ContentItem]) -> list[dict[str, Any]]:
    """A dumped message's content and a fragment's, one of them content items, as the items of both."""
    old_items: list[dict[str, Any]] = (
        [{"text": old}] if isinstance(old, str) and old else [] if isinstance(old, str) else old
    )
    return old_items + [item.model_dump() for item in _as_list(new)]


def _extend(m: Message, f: Fragment) -> Message:
    content = m.content
    if f.content:
        if isinstance(content, str) and isinstance(f.content, str):
            content = content + f.content
        else:
            content = _as_list(content) + _as_list(f.content)
    reasoning = m.reasoning_content
    if f.reasoning_content:
        reasoning = (reasoning or "") + f.reasoning_content
    extra = f.extra
    extra = added_extra(m.extra, extra) if extra else m.extra
    return Message.unchecked(
        m.role,
        content,
        f.name if f.name is not None else m.name,
        f.function_call if f.function_call is not None else m.function_call,
        reasoning,
        extra,
    )


def _as_list(content: str | list[ContentItem]) -> list[ContentItem]:
    return [ContentItem(text=content)] if isinstance(content, str) else list(content) if content else []


def accumulate(stream: Iterable[Sequence[Message]]) -> Iterator[list[Message]]:
    """Fragments in, cumulative lists out: each yield is the whole response so far (a new list)."""
    response = Response()
    for fragments in stream:
        if fragments:
            response.add(fragments)
            yield list(response.messages)


class _Parts:
    """What `Collector` holds for one message: its first fragment, text pieces, extra, and the argument pieces of a
    streaming call (`STREAMING_CALL`), joined once too."""

    __slots__ = ("first", "contents", "reasonings", "extra", "arguments")

    def __init__(self, first: Message, extra: dict[str, Any] | None) -> None:
        self.first = first
        self.contents: list[str | list[ContentItem]] = [first.content]
        self.reasonings: list[str] = [first.reasoning_content] if first.reasoning_content else []
        self.extra = extra
        call = extra.get(STREAMING_CALL) if extra else None
        self.arguments: list[str] | None = None if call is None else [call.get("arguments", "")]

    def add_extra(self, extra: dict[str, Any]) -> None:
        piece = extra.get(STREAMING_CALL)
        arguments = self.arguments
        if piece is None or arguments is None or self.extra is None:
            self.extra = added_extra(self.extra, extra)
            if piece is not None:
                self.arguments = [self.extra[STREAMING_CALL].get("arguments", "")]
            return
        arguments.append(piece.get("arguments", ""))
        if len(extra) > 1 or len(piece) > 1:  # more than the next piece: set the rest
            self.extra = {**self.extra, **extra, STREAMING_CALL: {**self.extra[STREAMING_CALL], **piece}}

    def named(self, f: Message) -> None:
        """A later fragment's `name` or `function_call` set on the message."""
        first = self.first
        name = f.name if f.name is not None else first.name
        call = f.function_call if f.function_call is not None else first.function_call
        self.first = Message.unchecked(first.role, "", name, call)

    def whole_extra(self) -> dict[str, Any] | None:
        """The message's extra, a streaming call's arguments so far joined."""
        extra, arguments = self.extra, self.arguments
        if arguments is None or extra is None:
            return extra
        if len(arguments) > 1:
            arguments[:] = ["".join(arguments)]
        return {**extra, STREAMING_CALL: {**extra[STREAMING_CALL], "arguments": arguments[0]}}


class Collector:
    """Adds up fragments in linear time (text pieces joined once at the end); `messages()` gives the result.

    Use it where nobody looks at the response until it is complete (`messages(start)`: from message `start` on);
    `Response` copies on every change.
    """

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: list[_Parts] = []

    def add(self, fragments: Iterable[Message]) -> None:
        parts = self._parts
        for f in fragments:
            if type(f) is not Fragment:
                f = as_fragment(f)
            i = f.index
            if i == len(parts) or (f.replace and i < len(parts)):
                parts[i : i + 1] = [_Parts(f, _own(f.extra))]
                continue
            if i > len(parts):
                raise _past_the_end(i, len(parts))
            p = parts[i]
            if f.content:
                p.contents.append(f.content)
            if f.reasoning_content:
                p.reasonings.append(f.reasoning_content)
            if f.extra:
                p.add_extra(f.extra)
            if f.name is not None or f.function_call is not None:
                p.named(f)

    def __len__(self) -> int:
        """The number of messages so far."""
        return len(self._parts)

    def name_of(self, index: int) -> str | None:
        """The `name` of message `index` so far."""
        return self._parts[index].first.name

    def messages(self, start: int = 0) -> list[Message]:
        out: list[Message] = []
        for p in self._parts[start:]:
            contents, reasonings, first = p.contents, p.reasonings, p.first
            content: str | list[ContentItem]
            texts = [c for c in contents if isinstance(c, str)]
            if len(texts) == len(contents):
                content = "".join(texts)
            else:
                content = [item for c in contents if c for item in _as_list(c)]
            reasoning = "".join(reasonings) if reasonings else None
            extra = p.whole_extra()
            out.append(Message.unchecked(first.role, content, first.name, first.function_call, reasoning, extra))
        return out

    def dumps(self, start: int = 0) -> list[dict[str, Any]]:
        """`[m.model_dump() for m in self.messages(start)]`, made without the messages where they hold text (what
        a store keeps of a response as it goes)."""
        out: list[dict[str, Any]] = []
        for p in self._parts[start:]:
            first, contents = p.first, p.contents
            try:
                d: dict[str, Any] = {"role": first.role, "content": "".join(contents)}  # type: ignore[arg-type]
            except TypeError:  # content items among them
                out.append(self.messages(start + len(out))[0].model_dump())
                continue
            if first.name is not None:
                d["name"] = first.name
            if first.function_call is not None:
                d["function_call"] = first.function_call.model_dump()
            if p.reasonings:
                d["reasoning_content"] = "".join(p.reasonings)
            if p.extra is not None:
                d["extra"] = p.whole_extra()  # (the collector's own: add() replaces it, never changes it)
            out.append(d)
        return out


def collect(stream: Iterable[Sequence[Message]]) -> list[Message]:
    """Consume a fragment stream; the final response (linear in its length)."""
    collector = Collector()
    for fragments in stream:
        collector.add(fragments)
    return collector.messages()


@overload
def merge_delta(response: list[dict[str, Any]], fragments: Iterable[dict[str, Any]]) -> list[dict[str, Any]]: ...
@overload
def merge_delta(response: list[Message], fragments: Iterable[Message]) -> list[Message]: ...
def merge_delta(response: list[Any], fragments: Iterable[dict[str, Any] | Message]) -> list[Any]:
    """For users of incremental mode: fold one yield of fragments (dicts or Messages) into `response`.

    Works on the caller's own list in place and returns it, so `for d in bot.run(m, delta_stream=True):
    merge_delta(full, d)` leaves `full` equal to what cumulative mode would have yielded last. The messages
    in `response` are updated in place, and their text grows in place where the interpreter allows it (a str
    nobody else holds), so folding a whole answer costs time linear in its length.
    """
    for given in fragments:
        as_dict = isinstance(given, dict)
        f = as_fragment(given)
        i = f.index
        if i == len(response) or (f.replace and i < len(response)):
            if as_dict:
                DictResponse(response).add([f])
            else:
                _put(response, i, f.message())
        elif i < len(response):
            (_grow_dict if as_dict else _grow_message)(response[i], f)
        else:
            raise _past_the_end(i, len(response))
    return response


def _grow_dict(d: dict[str, Any], f: Fragment) -> None:
    """Apply fragment `f` to message dict `d` in place: text (the usual fragment) grows in place, where the
    interpreter can (a str that nobody else holds); anything else is applied as `_extend_dict` does."""
    content = f.content
    if isinstance(content, str) and _adds_text_only(f) and isinstance(d.get("content"), str):
        for key, piece in (("content", content), ("reasoning_content", f.reasoning_content)):
            if piece:
                text: str = d.get(key) or ""
                d[key] = None  # `text` may then be the string's only reference: `+=` extends it in place
                text += piece
                d[key] = text
    else:
        d.update(_extend_dict(d, f))


def _grow_message(m: Message, f: Fragment) -> None:
    """Apply fragment `f` to message `m` in place, as `_grow_dict` does."""
    content = f.content
    if isinstance(content, str) and _adds_text_only(f) and isinstance(m.content, str):
        if content:
            text = m.content
            m.content = ""
            text += content
            m.content = text
        if f.reasoning_content:
            reasoning = m.reasoning_content or ""
            m.reasoning_content = None
            reasoning += f.reasoning_content
            m.reasoning_content = reasoning
    else:
        grown = _extend(m, f)
        for name in Message.__slots__:
            setattr(m, name, getattr(grown, name))


def _adds_text_only(f: Fragment) -> bool:
    """Whether fragment `f` (content a str) only adds text: no name, call or extra to set."""
    return f.name is None and f.function_call is None and not f.extra


class WholeLists:
    """Turns a stream in which each yield is the whole response so far (Qwen-Agent style) into fragments.

    Such agents may change a message in place between yields, so what was shown is kept as copies. A message
    that only grew becomes an appending fragment; one that changed otherwise a replacing one (`REPLACE`).
    """

    __slots__ = ("shown",)

    def __init__(self) -> None:
        self.shown: list[Message] = []

    def add(self, fragments: Iterable[Message]) -> None:
        """Fragments shown by other means (requests carried out by the driver, the agent's own fragments)."""
        response = Response()
        response.messages = self.shown
        response.add(fragments)

    def fragments(self, messages: Sequence[Message | dict[str, Any]]) -> list[Fragment]:
        """The fragments that turn what was shown into `messages`; remembers `messages`."""
        shown = self.shown
        out: list[Fragment] = []
        for i, given in enumerate(messages):
            m = given if isinstance(given, Message) else to_message(given)
            if i >= len(shown):
                out.append(fragment(m, i))
                shown.append(m.copy())
                continue
            f = _growth(shown[i], m, i)
            if f is None:
                f = fragment(m, i)
                f.replace = True
            elif f is _SAME:
                continue
            out.append(f)
            shown[i] = m.copy()
        if len(messages) < len(shown):
            # fragments cannot take a message back; keep showing it rather than lose track of the indexes
            import logging

            logging.getLogger("chatagent.agent").warning(
                "an agent yielded a response of %d messages after one of %d: the extra messages stay shown",
                len(messages),
                len(shown),
            )
        return out


_SAME = Fragment.unchecked("assistant", "")  # marker: nothing changed


def _grown_text(old: str | None, new: str | None) -> str | None:
    """The text appended to `old` to make `new`; None if `new` does not extend `old`."""
    old, new = old or "", new or ""
    return new[len(old) :] if new.startswith(old) else None


def _growth(old: Message, new: Message, i: int) -> Fragment | None:
    """The appending fragment that makes `old` into `new`; _SAME if equal; None if only a replacement can."""
    if old.role != new.role:
        return None
    if isinstance(old.content, str) and isinstance(new.content, str):
        text: str | list[ContentItem] | None = _grown_text(old.content, new.content)
    else:
        before, after = _as_list(old.content), _as_list(new.content)
        text = after[len(before) :] if after[: len(before)] == before else None
    reasoning = _grown_text(old.reasoning_content, new.reasoning_content)
    if text is None or reasoning is None:
        return None
    name = new.name if new.name != old.name else None
    call = new.function_call if new.function_call != old.function_call else None
    if (old.name is not None and new.name is None) or (old.function_call is not None and new.function_call is None):
        return None
    old_extra, new_extra = old.extra or {}, new.extra or {}
    if any(k not in new_extra for k in old_extra):
        return None
    extra = {k: v for k, v in new_extra.items() if k not in old_extra or old_extra[k] != v}
    if STREAMING_CALL in extra and STREAMING_CALL in old_extra:  # a streaming call: the arguments that are new
        piece = _call_growth(old_extra[STREAMING_CALL], new_extra[STREAMING_CALL])
        if piece is None:
            return None
        extra[STREAMING_CALL] = piece
    if not (text or reasoning or name is not None or call is not None or extra):
        return _SAME
    return Fragment.unchecked(new.role, text or "", name, call, reasoning or None, extra or None, i)


def _call_growth(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any] | None:
    """The piece of a streaming call that makes `old` into `new` (see `STREAMING_CALL`); None if it does not grow."""
    added = _grown_text(old.get("arguments"), new.get("arguments"))
    if added is None:
        return None
    return {**{k: v for k, v in new.items() if k != "arguments" and old.get(k) != v}, "arguments": added}

"""A model's input messages, each prepared once: the conversation so far is given again at every call of a tool loop,
and a message given again unchanged is found here instead of being copied and scanned again.

What a model call makes of each message it is given (`BaseChatModel._prepare`): a copy of its own (the caller's object
is never shared), its text valid as UTF-8 (`valid_unicode`), a placeholder for each media item a text-only model cannot
take (`without_media`), and the most tokens it can take in a prompt (`most_tokens`, so that a conversation that surely
fits is not counted). `Prepared` keeps that for each message by its identity, with what the message and its prepared
copy were (`fields`): a message changed in place since (its text, its extra, a hook's edit), or a prepared copy changed
by whoever read it, is prepared again. A call then costs one comparison per message it has seen before, and the copy,
the scan and the count for its new messages only: its cost does not grow with the conversation's length.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chatagent.llm.budget import most_tokens
from chatagent.llm.prepare import LIVE_FIELDS, fields, valid_unicode, without_media
from chatagent.schema import Message, to_messages

MAX_KEPT = 4096  # messages a model keeps prepared; past it, it starts again (a long-lived server's model)


def prepared(m: Message, multimodal: bool) -> Message:
    """`m` as a model call gets it: `m` itself (a copy by then), its text valid, media the model cannot take as
    placeholders."""
    m = valid_unicode(m)
    return m if multimodal else without_media(m)


class Prepared:
    """A model's input messages as prepared, by the identity of the message given (see the module docstring).

    An entry holds the message given (so that its id is not reused while it is here), its `fields`, whether it was
    prepared for a multimodal model, the prepared copy and its `fields`, and the copy's most tokens."""

    __slots__ = ("kept", "made")

    def __init__(self) -> None:
        self.kept: dict[int, tuple[Message, tuple[Any, ...], bool, Message, tuple[Any, ...], int]] = {}
        self.made = 0  # messages prepared (not found here): what a test counts

    def messages(self, given: Sequence[Message | dict[str, Any]], multimodal: bool) -> tuple[list[Message], int]:
        """The prepared copies of `given` (dicts converted: `to_messages`), and the most tokens they can take."""
        kept = self.kept
        out: list[Message] = []
        most = 0
        for m in given:
            if not isinstance(m, Message):  # a dict (or a wrong item): converted anew, as `to_messages` does
                return self._anew(given, multimodal)
            known = kept.get(id(m))
            if (
                known is not None
                and known[0] is m
                and known[2] is multimodal
                and LIVE_FIELDS(m) == known[1]
                and LIVE_FIELDS(known[3]) == known[4]
            ):
                out.append(known[3])
                most += known[5]
                continue
            copy = prepared(Message.copy(m), multimodal)
            n = most_tokens(copy)
            if len(kept) >= MAX_KEPT:
                kept.clear()
            kept[id(m)] = (m, fields(m), multimodal, copy, fields(copy), n)
            self.made += 1
            out.append(copy)
            most += n
        return out, most

    def _anew(self, given: Sequence[Message | dict[str, Any]], multimodal: bool) -> tuple[list[Message], int]:
        """A list with dicts in it: each converted (a fresh Message, nothing to find again) and prepared."""
        out = [prepared(m, multimodal) for m in to_messages(given)]
        self.made += len(out)
        return out, sum(map(most_tokens, out))


__all__ = ["MAX_KEPT", "Prepared", "prepared"]

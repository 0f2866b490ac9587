"""What a native backend's reader collects while a reply streams, and the fragments it makes of it: text and
reasoning at index 0 as they arrive, tool calls by the server's own key (a block index, an item id), each yielded
complete when the reply ends, after the text, in the order the server started them.

The same rules as the OpenAI-compatible reader (`chatagent.llm.openai.reply`): a reply is not acted on before it
is complete, and a reply cut off by the token limit in the middle of a call is an error, never a call.
"""

from __future__ import annotations

from typing import Any

from chatagent.llm.cut_off import cut_call_error
from chatagent.llm.request import Usage
from chatagent.schema import ASSISTANT, FunctionCall
from chatagent.schema.fragment import Fragment
from chatagent.schema.parts import unique_call_id
from chatagent.utils.tokens import count_tokens

_make = Fragment.unchecked
#: the mark on an answer whose server enforced its schema (read by chatagent.plugins.structured)
NATIVE_MARK = {"structured_output": "native"}


class ReplyParts:
    """One reply's parts so far (see the module docstring)."""

    __slots__ = ("text_seen", "calls", "said", "state", "native_schema")

    def __init__(self) -> None:
        self.text_seen = False  # text or reasoning at index 0
        self.calls: dict[Any, list[Any]] = {}  # the server's key -> [id, name, argument pieces]
        self.said: list[str] = []  # every piece, to estimate the usage of a server that reports none
        self.state: dict[str, Any] | None = None  # the provider's reasoning state (see chatagent.llm.turns)
        self.native_schema = False  # the server was given the answer's schema: the answer says so (NATIVE_MARK)

    def text(self, piece: str) -> list[Fragment]:
        self.text_seen = True
        self.said.append(piece)
        return [_make(ASSISTANT, piece, None, None, None, None, 0)]

    def reasoning(self, piece: str) -> list[Fragment]:
        self.text_seen = True
        self.said.append(piece)
        return [_make(ASSISTANT, "", None, None, piece, None, 0)]

    def reasoning_state(self, state: dict[str, Any]) -> list[Fragment]:
        """The provider's reasoning state, set on the message at index 0 now (kept for the next turn)."""
        self.text_seen = True
        self.state = None  # shown: nothing left to set at the end
        return [_make(ASSISTANT, "", None, None, None, {"reasoning_state": state}, 0)]

    def keep_state(self, state: dict[str, Any]) -> None:
        """The provider's reasoning state, set when the reply ends on its first message (text or call)."""
        self.state = state

    def start_call(self, key: Any, call_id: str | None, name: str) -> None:
        self.calls[key] = [call_id, name, []]
        self.said.append(name)

    def call_arguments(self, key: Any, piece: str) -> None:
        entry = self.calls.get(key)
        if entry is None:  # arguments before the call's start (a server that sends them in one event)
            entry = self.calls[key] = [None, "", []]
        entry[2].append(piece)
        self.said.append(piece)

    def finish(self, cut: bool) -> list[list[Fragment]]:
        """The calls, complete, after the text; a length mark for a text the token limit cut off; an error for a
        call it cut off."""
        calls = self.calls
        if cut and calls:
            raise cut_call_error()
        out: list[list[Fragment]] = []
        start = 1 if self.text_seen else 0
        ids: set[str] = set()
        state = {"reasoning_state": self.state} if self.state is not None else None
        if self.native_schema and not calls:
            state = {**(state or {}), **NATIVE_MARK}
        if state is not None and self.text_seen:
            out.append([_make(ASSISTANT, "", None, None, None, state, 0)])
            state = None
        for n, (fid, name, pieces) in enumerate(calls.values()):
            call = FunctionCall(name, "".join(pieces) or "{}")
            extra: dict[str, Any] = {"function_id": unique_call_id(fid, ids)}
            if state is not None and n == 0:
                extra.update(state)
                state = None
            out.append([_make(ASSISTANT, "", None, call, None, extra, start + n)])
        if not (self.text_seen or calls) or cut:
            mark = {**(state or {}), **({"stop_reason": "length"} if cut else {})}
            out.append([_make(ASSISTANT, "", None, None, None, mark or None, 0)])
        return out

    def estimate(self, usage: Usage, prompt_text: str) -> None:
        """An offline estimate of the usage, for a server that reported none."""
        usage.add(count_tokens(prompt_text), count_tokens("".join(self.said)))


__all__ = ["NATIVE_MARK", "ReplyParts"]

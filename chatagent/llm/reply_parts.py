"""What a backend's reader collects while a reply streams, and the fragments it makes of it: text and reasoning as
they arrive, and each tool call's arguments as they arrive (`STREAMING_CALL`), the complete call replacing them when
the reply ends. Every streaming reader shares it: the OpenAI-compatible and DashScope ones (calls by their index) and
the native ones (calls by the server's own key: a block index, an item id).

Where each message goes: the text (with the reasoning) at index 0 when it comes before any call, else after the calls
shown so far; each call at the next index when it is first shown, in the order the server started them. A call is
shown at once when the protocol names it in a start event (`start_call`), or at its first piece of arguments when its
name may still be streaming (`call_delta`, OpenAI-style deltas). The same rules as ever for what is acted on: only a
complete call (`function_call`) is a call, and a reply cut off by the token limit in the middle of a call is an error,
never a call.
"""

from __future__ import annotations

from typing import Any

from chatagent.llm.cut_off import cut_call_error
from chatagent.llm.request import Usage
from chatagent.schema import ASSISTANT, FunctionCall
from chatagent.schema.fragment import STREAMING_CALL, Fragment
from chatagent.schema.parts import unique_call_id
from chatagent.schema.stop_reason import StopReason
from chatagent.utils.tokens import count_tokens

_make = Fragment.unchecked
#: the mark on an answer whose server enforced its schema (read by chatagent.plugins.structured)
NATIVE_MARK = {"structured_output": "native"}


class Call:
    """One tool call of a reply so far: its id, name, argument pieces, and its index in the reply once shown."""

    __slots__ = ("id", "name", "pieces", "index")

    def __init__(self, call_id: str | None, name: str) -> None:
        self.id = call_id
        self.name = name
        self.pieces: list[str] = []
        self.index = -1  # not shown yet


class ReplyParts:
    """One reply's parts so far (see the module docstring)."""

    __slots__ = ("text_seen", "text_at", "started", "calls", "ids", "said", "state", "native_schema")

    def __init__(self) -> None:
        self.text_seen = False  # text or reasoning
        self.text_at = 0  # the text's index (0 unless a call was shown before any text)
        self.started = 0  # the messages started: the text's and the calls shown
        self.calls: dict[Any, Call] = {}  # the server's key -> the call
        self.ids: set[str] = set()  # the calls' ids, each unique in the reply
        self.said: list[str] = []  # every piece, to estimate the usage of a server that reports none
        self.state: dict[str, Any] | None = None  # the provider's reasoning state (see chatagent.llm.turns)
        self.native_schema = False  # the server was given the answer's schema: the answer says so (NATIVE_MARK)

    # ---- text ------------------------------------------------------------------------------------------------

    def open_text(self) -> int:
        """The text's index, placed now if no text came before (see the module docstring)."""
        if not self.text_seen:
            self.text_seen = True
            self.text_at = self.started
            self.started += 1
        return self.text_at

    def text(self, piece: str) -> list[Fragment]:
        i = self.text_at if self.text_seen else self.open_text()
        self.said.append(piece)
        return [_make(ASSISTANT, piece, None, None, None, None, i)]

    def reasoning(self, piece: str) -> list[Fragment]:
        i = self.text_at if self.text_seen else self.open_text()
        self.said.append(piece)
        return [_make(ASSISTANT, "", None, None, piece, None, i)]

    def reasoning_state(self, state: dict[str, Any]) -> list[Fragment]:
        """The provider's reasoning state, set on the text's message now (kept for the next turn)."""
        i = self.open_text()
        self.state = None  # shown: nothing left to set at the end
        return [_make(ASSISTANT, "", None, None, None, {"reasoning_state": state}, i)]

    def keep_state(self, state: dict[str, Any]) -> None:
        """The provider's reasoning state, set when the reply ends on its first message (text or call)."""
        self.state = state

    # ---- calls -----------------------------------------------------------------------------------------------

    def start_call(self, key: Any, call_id: str | None, name: str) -> list[Fragment]:
        """A call the protocol names in a start event: shown at once, its arguments to come."""
        call = self.calls[key] = Call(call_id, name)
        self.said.append(name)
        return self._show(call, "")

    def whole_call(self, key: Any, call_id: str | None, name: str, arguments: str) -> list[Fragment]:
        """A call the protocol sends whole (Gemini's functionCall): shown at once, complete at the end."""
        call = self.calls[key] = Call(call_id, name)
        call.pieces.append(arguments)
        self.said += (name, arguments)
        return self._show(call, arguments)

    def call_arguments(self, key: Any, piece: str) -> list[Fragment]:
        """A piece of the arguments of call `key` (started with `start_call`, or now)."""
        call = self.calls.get(key)
        if call is None:  # arguments before the call's start (a server that sends them in one event)
            call = self.calls[key] = Call(None, "")
        return self._add(call, piece)

    def call_delta(self, key: Any, call_id: str | None, name: str | None, piece: str | None) -> list[Fragment]:
        """An OpenAI-style piece of call `key`: any of its id, name and a piece of its arguments. The call is shown
        at its first piece of arguments: its name may come in pieces before them (a few servers), or be repeated."""
        call = self.calls.get(key)
        if call is None:
            call = self.calls[key] = Call(None, "")
        if call_id and call.index < 0:
            call.id = call_id
        if name and name != call.name:
            call.name = call.name + name if call.name and not call.pieces else name
        return self._add(call, piece) if piece else []

    def _add(self, call: Call, piece: str) -> list[Fragment]:
        call.pieces.append(piece)
        self.said.append(piece)
        if call.index < 0:
            return self._show(call, piece)
        return [_make(ASSISTANT, "", None, None, None, {STREAMING_CALL: {"arguments": piece}}, call.index)]

    def _show(self, call: Call, piece: str) -> list[Fragment]:
        call.index = self.started
        self.started += 1
        call.id = unique_call_id(call.id, self.ids)
        extra = {"function_id": call.id, STREAMING_CALL: {"name": call.name, "arguments": piece}}
        return [_make(ASSISTANT, "", None, None, None, extra, call.index)]

    # ---- the end ---------------------------------------------------------------------------------------------

    def finish(self, cut: bool, no_arguments: str = "{}") -> list[list[Fragment]]:
        """Each call, complete, in the place it was shown (replacing its streamed arguments), then those never
        shown (a call without arguments gets `no_arguments`); a length mark for a text the token limit cut off; an
        error for a call it cut off."""
        calls = self.calls
        if cut and calls:
            raise cut_call_error()
        out: list[list[Fragment]] = []
        state = {"reasoning_state": self.state} if self.state is not None else None
        if self.native_schema and not calls:
            state = {**(state or {}), **NATIVE_MARK}
        if state is not None and self.text_seen:
            out.append([_make(ASSISTANT, "", None, None, None, state, self.text_at)])
            state = None
        ordered = sorted((c for c in calls.values() if c.index >= 0), key=lambda c: c.index)
        ordered += [c for c in calls.values() if c.index < 0]
        for call in ordered:
            shown = call.index >= 0
            if not shown:
                call.index, call.id = self.started, unique_call_id(call.id, self.ids)
                self.started += 1
            extra: dict[str, Any] = {"function_id": call.id}
            if state is not None:  # the first message of a reply without text
                extra.update(state)
                state = None
            fc = FunctionCall(call.name, "".join(call.pieces) or no_arguments)
            out.append([_make(ASSISTANT, "", None, fc, None, extra, call.index, shown)])
        if not (self.text_seen or calls) or cut:
            mark = {**(state or {}), **({"stop_reason": StopReason.LENGTH} if cut else {})}
            out.append([_make(ASSISTANT, "", None, None, None, mark or None, self.text_at)])
        return out

    def estimate(self, usage: Usage, prompt_text: str) -> None:
        """An offline estimate of the usage, for a server that reported none."""
        usage.add(count_tokens(prompt_text), count_tokens("".join(self.said)))


__all__ = ["NATIVE_MARK", "Call", "ReplyParts"]

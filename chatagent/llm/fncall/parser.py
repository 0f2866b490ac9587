"""The streaming parser of prompt-based function calling: a backend's raw text in, text, reasoning and
function-call fragments out, in time linear in the reply.

Plain text streams as it arrives, only a suffix that may be the start of a marker is held back, a call inside
``<think>…</think>`` is thought (sent as `reasoning_content`), not a call, and a call whose closing tag never came
is still taken when the stream ends. The markers come from `formats`; reading one call's text is `calls`.
"""

from __future__ import annotations

import functools
import logging
import re
import uuid
from typing import Any

from chatagent.llm.cut_off import cut_call_error
from chatagent.llm.fncall.calls import parse_call_text, parse_qwen_args
from chatagent.llm.fncall.formats import (
    CALL_CLOSE,
    CALL_OPEN,
    FN_ARGS,
    FN_EXIT,
    FN_NAME,
    FN_RESULT,
    RESPONSE_OPEN,
    THINK_CLOSE,
    THINK_OPEN,
)
from chatagent.llm.pumps import ReplyFilter
from chatagent.schema import ASSISTANT, FunctionCall, content_text
from chatagent.schema.fragment import Fragment
from chatagent.schema.stop_reason import StopReason

logger = logging.getLogger("chatagent.llm")
# the unvalidated constructor, bound once for fragments built per chunk
_make = Fragment.unchecked

_TEXT, _THINK, _CALL, _NAME, _ARGS, _DONE = range(6)

# What each marker does, per format and mode. Actions: "think" / "unthink" enter and leave a think
# block; "call" starts a nous call, "end" closes it; "name" starts a qwen call, "args" its arguments;
# "stop" ends the reply (a stop word: anything after it is the model imagining the results);
# "drop" removes a stray tag; "exit" removes ✿RETURN✿ and the colon after it, keeping the answer.
_THINK_MARKERS = ((THINK_OPEN, "think"), (THINK_CLOSE, "drop"))
_TABLES: dict[str, dict[int, tuple[tuple[str, str], ...]]] = {
    "nous": {
        _TEXT: ((CALL_OPEN, "call"), (CALL_CLOSE, "drop"), (RESPONSE_OPEN, "stop"), *_THINK_MARKERS),
        _CALL: ((CALL_CLOSE, "end"), (CALL_OPEN, "call"), (RESPONSE_OPEN, "stop")),
    },
    "qwen": {
        _TEXT: ((FN_NAME, "name"), (FN_ARGS, "drop"), (FN_RESULT, "stop"), (FN_EXIT, "exit"), *_THINK_MARKERS),
        _NAME: ((FN_ARGS, "args"), (FN_NAME, "name"), (FN_RESULT, "stop"), (FN_EXIT, "stop")),
        _ARGS: ((FN_NAME, "name"), (FN_ARGS, "args"), (FN_RESULT, "stop"), (FN_EXIT, "stop")),
    },
}
_NO_CALLS: dict[int, tuple[tuple[str, str], ...]] = {_TEXT: _THINK_MARKERS}


class _Table:
    """The markers active in one mode, with a regex finding the characters that may start one."""

    __slots__ = ("markers", "starts")

    def __init__(self, markers: tuple[tuple[str, str], ...]) -> None:
        self.markers = markers
        self.starts = re.compile("[" + re.escape("".join(sorted({m[0] for m, _ in markers}))) + "]")


@functools.cache
def _tables(fmt: str, parse_calls: bool) -> dict[int, _Table]:
    if fmt not in _TABLES:
        raise ValueError(f"unknown fncall_prompt_type {fmt!r}; use one of: {', '.join(sorted(_TABLES))}")
    table = dict(_TABLES[fmt]) if parse_calls else dict(_NO_CALLS)
    table[_THINK] = ((THINK_CLOSE, "unthink"),)
    return {mode: _Table(markers) for mode, markers in table.items()}


class _Trim:
    """Streams text without its leading whitespace, holding back trailing whitespace until more text comes."""

    __slots__ = ("started", "pending", "lead")

    def __init__(self, lead: str | None = None) -> None:
        self.started = False
        self.pending = ""
        self.lead = lead  # characters stripped from the start (None: whitespace)

    def add(self, s: str) -> str:
        if not self.started:
            s = s.lstrip(self.lead)
            if not s:
                return ""
            self.started = True
        body = s.rstrip()
        if not body:
            self.pending += s
            return ""
        out = self.pending + body if self.pending else body
        self.pending = s[len(body) :]
        return out


class StreamParser(ReplyFilter):
    """Turns a backend's fragment stream of raw text into text, reasoning and function-call fragments.

    Work per chunk is proportional to the chunk (plus a held-back suffix no longer than a tag), so a
    reply costs time linear in its length however it is chunked. Use `run(fragment_stream)` (or `arun`).
    A reply the backend marks as cut off by the token limit (extra['stop_reason'] == 'length') keeps the mark
    on its text; if it was cut in the middle of a call, ModelServiceError('length') is raised and the call is
    not emitted.
    """

    def __init__(
        self,
        fmt: str = "nous",
        *,
        parse_calls: bool = True,
        single_call: bool = False,
        continued: bool = False,
        functions: list[dict[str, Any]] | None = None,
    ) -> None:
        self.fmt = fmt
        self._tables = _tables(fmt, parse_calls)
        self._single_call = single_call
        self._schemas: dict[str, dict[str, Any]] = {f["name"]: f.get("parameters") or {} for f in functions or ()}
        self._mode = _TEXT
        self._held = ""  # the end of the text so far that may be the start of a marker
        self._parts: list[str] = []  # the text of the call being read
        self._name = ""  # qwen: the name of the call whose arguments are being read
        self._after_exit = False  # qwen: just read ✿RETURN✿; the colon after it is not text
        self._text = _Trim(" \t\r\n:：" if continued else None)
        self._thought = _Trim()
        self._calls_started = False  # after the first call, text and thoughts are not shown
        self._head = False  # the text message at index 0 exists
        self._emitted = 0  # calls emitted
        self._dropped = 0  # characters of text dropped after calls or a stop word
        self._text_out: list[str] = []
        self._reasoning_out: list[str] = []
        self._calls_out: list[tuple[FunctionCall, str]] = []
        self._cut = False  # the backend said the reply was cut off by the token limit

    def push(self, fragments: list[Fragment]) -> list[Fragment]:
        """Read one list of the backend's fragments; our fragments so far."""
        for f in fragments:
            if f.extra and f.extra.get("stop_reason") == StopReason.LENGTH:
                self._cut = True
            if f.reasoning_content:
                self._reasoning(f.reasoning_content, raw=True)
            if f.content:
                self.feed(f.content if isinstance(f.content, str) else content_text(f.content))
            if f.function_call is not None:  # a server that parsed the call itself
                fid = (f.extra or {}).get("function_id")
                self._calls_started = True
                self._emit_call(f.function_call, fid)
        return self.take()

    def end(self) -> list[Fragment]:
        """The stream ended: the last fragments (see `run`)."""
        cut = self._cut
        if cut and self._mode in (_CALL, _NAME, _ARGS):
            raise cut_call_error(partial=self._head)
        self.close()
        out = self.take()
        if not out and not self._head and not self._emitted:
            out = [_make(ASSISTANT, "", None, None, None, None, 0)]
        if cut and (self._head or not self._emitted):  # index 0 is the text: say that it was cut off
            out.append(_make(ASSISTANT, "", None, None, None, {"stop_reason": StopReason.LENGTH}, 0))
        if self._dropped:
            logger.debug("prompt-based function calling: dropped %d characters after the calls", self._dropped)
        return out

    def feed(self, chunk: str) -> None:
        """Read the next piece of the model's text."""
        buf = self._held + chunk if self._held else chunk
        self._held = ""
        pos, n = 0, len(buf)
        while pos < n:
            mode = self._mode
            if mode == _DONE:
                self._dropped += n - pos
                return
            table = self._tables[mode]
            i, hit = pos, None
            while hit is None:
                m = table.starts.search(buf, i)
                if m is None:
                    self._sink(mode, buf[pos:])
                    return
                i = m.start()
                partial = False
                for marker, action in table.markers:
                    if buf.startswith(marker, i):
                        hit = (marker, action)
                        break
                    if n - i < len(marker) and marker.startswith(buf[i:]):
                        partial = True
                if hit is None:
                    if partial:  # hold back what may be the start of a marker
                        self._sink(mode, buf[pos:i])
                        self._held = buf[i:]
                        return
                    i += 1
            self._sink(mode, buf[pos:i])
            pos = i + len(hit[0])
            self._act(hit[1])

    def close(self) -> None:
        """The stream ended: a held-back partial tag is text after all, an unclosed call is still a call."""
        held, self._held = self._held, ""
        if self._mode in (_TEXT, _THINK):
            self._sink(self._mode, held)
        elif self._mode in (_CALL, _NAME, _ARGS):
            self._finish_call()
        self._mode = _DONE
        if not self._calls_started and self._text.pending:
            self._text_out.append(self._text.pending)
            self._text.pending = ""

    def take(self) -> list[Fragment]:
        """The fragments produced since the last call."""
        out: list[Fragment] = []
        make = _make
        texts, thoughts = self._text_out, self._reasoning_out
        if texts or thoughts:
            text = texts[0] if len(texts) == 1 else "".join(texts)
            reasoning = ("".join(thoughts) or None) if thoughts else None
            texts.clear()
            thoughts.clear()
            out.append(make(ASSISTANT, text, None, None, reasoning, None, 0))
            self._head = True
        if self._calls_out:
            for call, fid in self._calls_out:
                index = self._emitted + (1 if self._head else 0)
                out.append(make(ASSISTANT, "", None, call, None, {"function_id": fid}, index))
                self._emitted += 1
            self._calls_out.clear()
        return out

    # ---- inside ----

    def _sink(self, mode: int, s: str) -> None:
        if not s:
            return
        if mode == _TEXT:
            if self._after_exit:
                s = s.lstrip(" :：")
                self._after_exit = not s
            if self._calls_started:
                self._dropped += len(s)
            elif s:
                out = self._text.add(s)
                if out:
                    self._text_out.append(out)
        elif mode == _THINK:
            self._reasoning(s)
        elif mode == _DONE:
            self._dropped += len(s)
        else:
            self._parts.append(s)

    def _reasoning(self, s: str, raw: bool = False) -> None:
        if self._calls_started:
            self._dropped += len(s)
            return
        out = s if raw else self._thought.add(s)
        if out:
            self._reasoning_out.append(out)

    def _act(self, action: str) -> None:
        mode = self._mode
        if action == "drop":
            return
        if action == "exit":
            self._after_exit = True
            return
        if action == "think":
            self._thought = _Trim()
            self._mode = _THINK
        elif action == "unthink":
            self._mode = _TEXT
        elif action == "stop":
            if mode != _TEXT:
                self._finish_call()
            self._mode = _DONE
        elif action == "end":
            self._finish_call()
            self._mode = _TEXT
        elif action in ("call", "name"):
            if mode != _TEXT:
                self._finish_call()
            self._calls_started = True
            self._mode = _CALL if action == "call" else _NAME
        elif action == "args":
            if mode == _NAME:
                self._name = _clean_name("".join(self._parts))
                self._parts.clear()
            else:
                self._finish_call()
            self._mode = _ARGS

    def _finish_call(self) -> None:
        body = "".join(self._parts)
        self._parts.clear()
        mode = self._mode
        if mode == _CALL:
            parsed = parse_call_text(body, self._schemas) if body.strip() else None
            if parsed is None:
                if body.strip():
                    logger.warning("could not read a tool call in the model's reply: %.200r", body)
                return
            name, args = parsed
        elif mode == _NAME:
            name, args = _clean_name(body), "{}"
        else:
            name, args = self._name, parse_qwen_args(body)
        if not name:
            logger.warning("a tool call without a tool name in the model's reply: %.200r", body)
            return
        self._emit_call(FunctionCall(name, args), None)

    def _emit_call(self, call: FunctionCall, fid: str | None) -> None:
        if self._single_call and (self._emitted + len(self._calls_out)) >= 1:
            logger.debug("parallel_function_calls is off: ignoring the call to %s", call.name)
            return
        self._calls_out.append((call, fid or f"call_{uuid.uuid4().hex[:24]}"))


def _clean_name(text: str) -> str:
    return text.strip().lstrip(":：").strip().replace("✿", "").strip("`*\"' ")

"""Tool calls a server left in the text, recovered: when native tools were asked for and the reply carries no
`tool_calls`, a reply that is wholly a call in one of these shapes is taken as a call, never shown as text.

    <tool_call>{"name": "f", "arguments": {...}}</tool_call>         Hermes / Qwen2.5 / Qwen3 (llama.cpp without --jinja)
    <tool_call><function=f><parameter=x>1</parameter></function></tool_call>     Qwen3-Coder, Qwen3.5 (vLLM, SGLang)
    <function=f><parameter=x>1</parameter></function>                  the same without its wrapper
    [TOOL_CALLS] [{"name": "f", "arguments": {...}}]                    Mistral
    <|python_tag|>{"name": "f", "parameters": {...}}                    Llama 3.1+
    {"name": "f", "parameters": {...}}  (the whole reply, or a list)    Llama 3 JSON as text: only for offered tools
    any of the tagged shapes inside <think>…</think> or the reasoning  taken only when the answer is otherwise empty

What is recovered, and when (issue 36): only a reply that is wholly calls (whitespace and `<think>…</think>`
aside): a call after or before text is text. Never a call the request's messages already hold (a tool's result, a
document's excerpt, an earlier message: `chatagent.llm.quoted_calls`), so a model that quotes a page does not run
the page's call. And only where it is on: `generate_cfg['recover_calls']` (True / False), by default on for a
self-hosted OpenAI-compatible server (vLLM, SGLang, llama.cpp, Ollama, ...), whose missing or wrong tool parser is
what leaves calls in the text, and off for hosted APIs and other backends (`recovers_calls`). How many calls of one
reply run is the agent's `max_calls_per_reply`.

Parsed as the reply streams: text streams on, and only a suffix that may start a call's marker is held back (with
the calls read so far, until the reply shows text: then they are text); a reply that starts as JSON is held until
it ends (and shown, if it is not a call). A tagged call naming a tool that was not offered is still a call (the run
answers the model that the tool does not exist, as for any bad call); a call the server did send natively wins,
and the text's are dropped. Each model's first recovery is logged, once per shape. (Ollama's arguments sent as an
object rather than a JSON string are read by the reply parser itself.)
"""

from __future__ import annotations

import logging
import re
import threading
import uuid
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from chatagent.llm.cut_off import cut_call_error
from chatagent.llm.fncall.calls import parse_call_text
from chatagent.llm.pumps import ReplyFilter
from chatagent.llm.quoted_calls import QuotedCalls
from chatagent.llm.request import ModelRequest
from chatagent.schema import ASSISTANT, FunctionCall, Message, content_text
from chatagent.schema.fragment import STREAMING_CALL, Fragment
from chatagent.schema.stop_reason import StopReason
from chatagent.utils.jsonlenient import loads_lenient

logger = logging.getLogger("chatagent.llm")

_make = Fragment.unchecked
# marker -> (what it opens, the marker that closes it; None: the rest of the reply)
_OPENERS: dict[str, tuple[str, str | None]] = {
    "<tool_call>": ("hermes", "</tool_call>"),
    "<function=": ("xml", "</function>"),
    "[TOOL_CALLS]": ("mistral", None),
    "<|python_tag|>": ("llama", None),
}
_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"
_MARKERS = (*_OPENERS, _THINK_OPEN, _THINK_CLOSE)
_STARTS = re.compile(r"[<\[]")
_logged: set[tuple[str, str]] = set()
_logged_lock = threading.Lock()


class _Block:
    """A call's text as the model wrote it: its shape, its text, whether it was inside a thought, and the whole
    text with its markers (`raw`: what is shown if it is not taken)."""

    __slots__ = ("shape", "text", "thought", "raw", "taken")

    def __init__(self, shape: str, text: str, thought: bool, raw: str) -> None:
        self.shape, self.text, self.thought, self.raw = shape, text, thought, raw
        self.taken = False  # read as a call: not shown


class _Channel:
    """One stream of text (the answer, or the reasoning) scanned for calls: what to show, and the calls' blocks."""

    __slots__ = (
        "thought", "held", "lead", "json", "block", "opener", "closer", "parts", "in_think", "blocks", "out", "said",
        "after",
    )  # fmt: skip

    def __init__(self, thought: bool) -> None:
        self.thought = thought  # the reasoning channel: its text is all thought
        self.held = ""  # a suffix that may start a marker
        self.lead = not thought  # nothing but whitespace seen yet (the answer may be JSON)
        self.json = False  # the answer started as JSON: held to the end
        self.block: str | None = None  # the shape of the call being read
        self.opener = ""  # its marker
        self.closer: str | None = None
        self.parts: list[str] = []
        self.in_think = False
        self.blocks: list[_Block] = []
        self.out: list[str] = []  # text to show
        self.said = False  # text that is not a thought was shown: the reply is not wholly calls
        self.after: list[str | _Block] = []  # since the first call: held until text comes or the reply ends

    def feed(self, chunk: str) -> None:
        buf = self.held + chunk if self.held else chunk
        self.held = ""
        if self.lead:
            stripped = buf.lstrip()
            if not stripped:
                self.out.append(buf)
                return
            decided = _starts_as_json(stripped)
            if decided is None:  # not enough yet to tell
                self.held = buf
                return
            self.lead = False
            self.json = decided
        if self.json:
            self.parts.append(buf)
            return
        self._scan(buf)

    def _scan(self, buf: str) -> None:
        pos, n = 0, len(buf)
        while pos < n:
            if self.said:  # text was shown: nothing that follows is a call
                self._show(buf[pos:])
                return
            if self.block is not None:
                if self.closer is None:  # the rest of the reply is the call
                    self.parts.append(buf[pos:])
                    return
                end = buf.find(self.closer, pos)
                if end < 0:
                    keep = _partial_suffix(buf, pos, (self.closer,))
                    self.parts.append(buf[pos : n - keep])
                    self.held = buf[n - keep :]
                    return
                self.parts.append(buf[pos:end])
                pos = end + len(self.closer)
                self._close_block()
                continue
            m = _STARTS.search(buf, pos)
            if m is None:
                self._show(buf[pos:])
                return
            i = m.start()
            marker = next((k for k in _MARKERS if buf.startswith(k, i)), None)
            if marker is None:
                if any(k.startswith(buf[i:]) for k in _MARKERS):  # the start of a marker: wait for more
                    self._show(buf[pos:i])
                    self.held = buf[i:]
                    return
                self._show(buf[pos : i + 1])
                pos = i + 1
                continue
            self._show(buf[pos:i])
            if self.said:  # text came before the marker: it is text too
                pos = i
                continue
            pos = i + len(marker)
            if marker in (_THINK_OPEN, _THINK_CLOSE):
                self.in_think = marker == _THINK_OPEN
                self._emit(marker)
                continue
            self.block, self.closer = _OPENERS[marker]
            self.opener = marker
            if marker == "<function=":
                self.parts.append(marker)  # part of the call's text

    def _show(self, text: str) -> None:
        if not text:
            return
        if not self.said and not self.in_think and not self.thought and text.strip():
            self.said = True
            self._unhold()
        self._emit(text)

    def _emit(self, text: str) -> None:
        (self.after if self.after else self.out).append(text)

    def _unhold(self) -> None:
        """Text came: the calls read so far are text, shown where they were."""
        self.out.extend(item if isinstance(item, str) else item.raw for item in self.after)
        self.after.clear()
        self.blocks.clear()

    def _close_block(self) -> None:
        assert self.block is not None
        text = "".join(self.parts)
        if self.block == "xml":
            text += "</function>"
        raw = text if self.block == "xml" else self.opener + text + (self.closer or "")
        block = _Block(self.block, text, self.thought or self.in_think, raw)
        self.blocks.append(block)
        self.after.append(block)
        self.parts.clear()
        self.block = self.closer = None

    def end(self) -> bool:
        """The stream ended: a held-back suffix is text, an unclosed call is still read; whether one was open."""
        held, self.held = self.held, ""
        was_open = self.block is not None
        if self.lead or self.json:
            if self.lead:
                self.parts.append(held)
            return False
        if self.block is not None:
            self.parts.append(held)
            self._close_block()
        else:
            self._show(held)
        return was_open

    def take(self) -> str:
        out = "".join(self.out) if len(self.out) != 1 else self.out[0]
        self.out.clear()
        return out

    def release(self) -> None:
        """The reply ended: what was held since the first call is shown, but the calls taken."""
        self.out.extend(item if isinstance(item, str) else item.raw for item in self.after if not _taken(item))
        self.after.clear()


def _taken(item: str | _Block) -> bool:
    return not isinstance(item, str) and item.taken


def _starts_as_json(text: str) -> bool | None:
    """Whether an answer starting with `text` (no leading whitespace) is held as possible JSON; None: unknown yet."""
    if text[0] == "{":
        return True
    if text[0] == "[":
        marker = "[TOOL_CALLS]"
        if text.startswith(marker):
            return False  # the marker: read where text is scanned
        if marker.startswith(text):
            return None
        rest = text[1:].lstrip()
        return None if not rest else rest[0] == "{"
    if text.startswith("```"):
        line_end = text.find("\n")
        if line_end < 0:
            return None
        rest = text[line_end + 1 :].lstrip()
        return None if not rest else rest[0] in "{["
    return False


def _partial_suffix(buf: str, start: int, markers: Iterable[str]) -> int:
    """How many characters at the end of `buf` (from `start`) may be the start of one of `markers`."""
    for k in range(min(len(buf) - start, max(len(m) for m in markers) - 1), 0, -1):
        tail = buf[len(buf) - k :]
        if any(m.startswith(tail) for m in markers):
            return k
    return 0


class CallRecovery(ReplyFilter):
    """The reply to a request with native tools, its calls left in the text recovered (see the module docstring):
    one of the reply filters of a model call's plan (`chatagent.llm.routing`), or `run(fragments)` /
    `arun(fragments)` on its own."""

    def __init__(
        self, functions: list[dict[str, Any]], model: str, given: Iterable[Message] = (), max_calls: int = 32
    ) -> None:
        self.schemas: dict[str, dict[str, Any]] = {f["name"]: f.get("parameters") or {} for f in functions}
        self.model = model
        self.max_calls = max_calls  # more calls than this: the first past it stands for the rest (extra: how many)
        self.quoted = QuotedCalls(given, self.schemas)  # the request's messages: a call they hold is no call
        self.answer = _Channel(thought=False)
        self.reasoning = _Channel(thought=True)
        self.native = False  # the server sent calls itself
        self.shown = False  # a fragment at index 0 went out
        self.text_at = 0  # where the reply's text goes (after the calls when the server started one first)
        self.cut = False

    def push(self, fragments: list[Fragment]) -> list[Fragment]:
        passed: list[Fragment] = []
        for f in fragments:
            if f.function_call is not None or (f.extra and STREAMING_CALL in f.extra):  # a call, or its arguments
                self.native = True
                if not self.shown and f.index > 0:  # the text (all of it a call) was not shown: keep index 0
                    passed.append(_make(ASSISTANT, "", None, None, None, None, 0))
                self.shown = True
                passed.append(f)
                continue
            if f.extra and f.extra.get("stop_reason") == StopReason.LENGTH:
                self.cut = True
            if f.content or f.reasoning_content:
                self.text_at = f.index
            if f.reasoning_content:
                self.reasoning.feed(f.reasoning_content)
            if f.content:
                self.answer.feed(f.content if isinstance(f.content, str) else content_text(f.content))
            if f.replace and not (f.content or f.reasoning_content):  # a place emptied (chatagent.llm.retry.Shown)
                passed.append(f)
            elif f.extra or (f.index and not f.content and not f.reasoning_content):
                passed.append(_make(ASSISTANT, "", None, None, None, f.extra, f.index))
                self.shown = self.shown or f.index == 0
        return self._text() + passed

    def _text(self) -> list[Fragment]:
        text, thought = self.answer.take(), self.reasoning.take()
        if not text and not thought:
            return []
        self.shown = True
        return [_make(ASSISTANT, text, None, None, thought or None, None, self.text_at)]

    def end(self) -> list[Fragment]:
        open_answer = self.answer.end()
        self.reasoning.end()
        if self.cut and open_answer and not self.native:
            raise cut_call_error(partial=self.shown)
        held = "".join(self.answer.parts) if (self.answer.json or self.answer.lead) else ""
        calls: list[tuple[str, str]] = []
        texts: list[str] = []  # each call's text, as written
        shapes: set[str] = set()
        if held and not self.native and not self.cut:  # (a cut-off JSON is no call)
            found = self._json_calls(held)
            if found:
                calls, texts, held = found, [held] * len(found), ""
                shapes.add("json")
        blocks: list[_Block] = []
        if not self.native and not calls:
            blocks = [b for b in self.answer.blocks if not b.thought]
            visible = self.answer.said or held.strip()
            if not blocks and not visible:  # an empty answer: a call among the thoughts is the one meant
                blocks = [b for b in self.answer.blocks + self.reasoning.blocks if b.thought]
            for b in blocks:
                read = self._block_calls(b)
                if read:
                    b.taken = True
                    calls += read
                    texts += [b.text] * len(read)
                    shape = "qwen3-coder" if b.shape == "hermes" and "<function=" in b.text else b.shape
                    shapes.add(shape + (" in thought" if b.thought else ""))
                elif not b.thought:  # a call's marker, but no call we can read: shown, so that nothing is lost
                    logger.warning("%s: a %s tool call that cannot be read: shown as text", self.model, b.shape)
        elif self.native and (self.answer.blocks or self.reasoning.blocks):
            logger.debug("%s sent native tool calls: the calls also written in its text were dropped", self.model)
            for b in self.answer.blocks + self.reasoning.blocks:
                b.taken = True
        if calls and any(self.quoted.holds(t, n, a) for t, (n, a) in zip(texts, calls, strict=True)):
            logger.warning("%s wrote a tool call its request already held (quoted from a tool, a document or an "
                           "earlier message): shown as text, not run", self.model)  # fmt: skip
            calls, shapes = [], set()
            if not held and self.answer.json:
                held = "".join(self.answer.parts)
            for b in blocks:
                b.taken = False
        self.answer.release()
        self.reasoning.release()
        if held:
            self.answer.out.append(held)
        out = self._text()
        if not self.shown and not calls and not out:  # an empty reply is still one message
            out.append(_make(ASSISTANT, "", None, None, None, None, 0))
            self.shown = True
        first = 1 if self.shown else 0
        made = len(calls)
        if made > self.max_calls + 1:
            logger.warning("%s wrote %d tool calls in one reply: the %d past the first %d were not read", self.model,
                           made, made - self.max_calls - 1, self.max_calls + 1)  # fmt: skip
            calls = calls[: self.max_calls + 1]
        for k, (name, args) in enumerate(calls):
            extra: dict[str, Any] = {"function_id": f"call_{uuid.uuid4().hex[:24]}"}
            if k == self.max_calls:
                extra["calls_made"] = made  # the run answers it: too many calls, this many made
            out.append(_make(ASSISTANT, "", None, FunctionCall(name, args), None, extra, first + k))
        for shape in shapes:
            _log_once(self.model, shape)
        return out

    def _block_calls(self, block: _Block) -> list[tuple[str, str]]:
        text = block.text.strip()
        if block.shape in ("mistral", "llama"):
            return self._json_calls(text, offered_only=False)
        parsed = parse_call_text(text, self.schemas)
        return [parsed] if parsed is not None and parsed[0] else []

    def _json_calls(self, text: str, offered_only: bool = True) -> list[tuple[str, str]]:
        """The calls in `text` read as JSON (an object or a list of them, in a code fence or not); [] unless each
        is a call (of an offered tool, with `offered_only`)."""
        body = text.strip()
        if body.startswith("```"):
            body = body.split("\n", 1)[1] if "\n" in body else ""
            body = body.rsplit("```", 1)[0]
        try:
            value = loads_lenient(body)
        except ValueError:
            return []
        items: list[Any] = value if isinstance(value, list) else [value]  # pyright: ignore[reportUnknownVariableType]
        calls: list[tuple[str, str]] = []
        for item in items:
            if not isinstance(item, dict):
                return []
            parsed = parse_call_text(_dumps(item), self.schemas)
            if parsed is None or (offered_only and parsed[0] not in self.schemas):
                return []
            calls.append(parsed)
        return calls


def _dumps(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


def _log_once(model: str, shape: str) -> None:
    with _logged_lock:
        if (model, shape) in _logged:
            return
        _logged.add((model, shape))
    logger.warning(
        "%s was asked with native tools but wrote its tool calls as text (%s): recovered as calls (fix the server's "
        "tool-call parser to skip this)",
        model,
        shape,
    )


# Hosts of APIs that parse their models' tool calls themselves: nothing is recovered from their replies by default.
HOSTED_APIS = (
    "api.openai.com", "openai.azure.com", "aliyuncs.com", "api.anthropic.com", "googleapis.com", "api.mistral.ai",
    "api.groq.com", "api.together.xyz", "api.fireworks.ai", "api.deepseek.com", "openrouter.ai", "api.x.ai",
    "api.perplexity.ai", "api.cohere.com", "inference.ai.azure.com", "bigmodel.cn", "moonshot.cn", "api.moonshot.ai",
)  # fmt: skip


def recovers_calls(backend: object, request: ModelRequest) -> bool:
    """Whether calls left in the text of the reply to `request` are recovered: `generate_cfg['recover_calls']` if it
    is set; else only from a self-hosted OpenAI-compatible server (its `base_url` names a host that is none of
    `HOSTED_APIS`), where a missing or wrong tool-call parser is what leaves calls in the text. Never when the
    request offers no tools or `function_choice` is 'none'."""
    settings = request.settings
    if not request.functions or settings.function_choice == "none":
        return False
    if settings.recover_calls is not None:
        return bool(settings.recover_calls)
    server = getattr(backend, "base_url", None)  # an OpenAI-compatible backend's server (None: api.openai.com)
    if not isinstance(server, str) or not server:
        return False
    host = urlsplit(server).hostname or ""
    return not any(host == h or host.endswith("." + h) for h in HOSTED_APIS)


__all__ = ["HOSTED_APIS", "CallRecovery", "recovers_calls"]

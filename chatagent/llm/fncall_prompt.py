"""Prompt-based function calling, for servers without native tools.

The tools are described in the system prompt, earlier calls and results are written into the
conversation as text, the backend is asked *without* functions, and the calls are parsed back out
of the text it streams. Two formats (generate_cfg `fncall_prompt_type`):

- ``'nous'`` (Hermes, Qwen2.5, Qwen3): tools as JSON lines in ``<tools></tools>``; a call is
  ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`` in the assistant's text; results
  go back in a user turn as ``<tool_response>\\n...\\n</tool_response>``. Text after a call is dropped
  (the model's own chat template never shows any); further calls are still taken.
- ``'qwen'``: ``✿FUNCTION✿: name`` then ``✿ARGS✿: {...}``, results as ``✿RESULT✿: ...`` and
  ``✿RETURN✿: answer`` in the assistant's turn. The server stops at ``✿RESULT✿``, so nothing follows
  the last call's arguments.

`BaseChatModel._call` routes here (see `chat`). Parsing is streaming-aware and linear in the reply:
plain text streams as it arrives, only a suffix that may be the start of a tag is held back, a call
inside ``<think>…</think>`` is thought (sent as `reasoning_content`), not a call, and a call whose
closing tag never came is still taken when the stream ends.
"""

from __future__ import annotations

import ast
import functools
import json
import logging
import re
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from chatagent.jsonlenient import loads_lenient
from chatagent.lang import conversation_lang
from chatagent.schema import ASSISTANT, FUNCTION, SYSTEM, USER, ContentItem, FunctionCall, Message, content_text
from chatagent.stream import INDEX, collect

if TYPE_CHECKING:
    from chatagent.llm.base import BaseChatModel, Settings, Usage

logger = logging.getLogger("chatagent.llm")

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
RESPONSE_OPEN = "<tool_response>"
FN_NAME, FN_ARGS, FN_RESULT, FN_EXIT = "✿FUNCTION✿", "✿ARGS✿", "✿RESULT✿", "✿RETURN✿"
MAX_STOP_WORDS = 4  # OpenAI rejects more; stop words that do not fit are still cut out here

# The prompts below are the wording the models were trained on: keep them as they are.
NOUS_TEMPLATE = """# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{tool_descs}
</tools>

For each function call, return a json object with function name and arguments within \
<tool_call></tool_call> XML tags:
<tool_call>
{{"name": <function-name>, "arguments": <args-json-object>}}
</tool_call>"""

QWEN_TOOLS = {
    "en": "# Tools\n\n## You have access to the following tools:\n\n{tool_descs}",
    "zh": "# 工具\n\n## 你拥有如下工具：\n\n{tool_descs}",
}
QWEN_TOOL_DESC = {
    "en": "### {name}\n\n{name}: {description} Parameters: {parameters} Format the arguments as a JSON object.",
    "zh": "### {name}\n\n{name}: {description} 输入参数：{parameters} 此工具的输入应为JSON对象。",
}
QWEN_USAGE = {
    "en": f"""## When you need to call a tool, please insert the following command in your reply, \
which can be called zero or multiple times according to your needs:

{FN_NAME}: The tool to use, should be one of [{{tool_names}}]
{FN_ARGS}: The input of the tool
{FN_RESULT}: Tool results
{FN_EXIT}: Reply based on tool results. Images need to be rendered as ![](url)""",
    "zh": f"""## 你可以在回复中插入零次、一次或多次以下命令以调用工具：

{FN_NAME}: 工具名称，必须是[{{tool_names}}]之一。
{FN_ARGS}: 工具输入
{FN_RESULT}: 工具结果
{FN_EXIT}: 根据工具结果进行回复，需将图片用![](url)渲染出来""",
}
QWEN_USAGE_PARALLEL = {
    "en": f"""## Insert the following command in your reply when you need to call N tools in parallel:

{FN_NAME}: The name of tool 1, should be one of [{{tool_names}}]
{FN_ARGS}: The input of tool 1
{FN_NAME}: The name of tool 2
{FN_ARGS}: The input of tool 2
...
{FN_NAME}: The name of tool N
{FN_ARGS}: The input of tool N
{FN_RESULT}: The result of tool 1
{FN_RESULT}: The result of tool 2
...
{FN_RESULT}: The result of tool N
{FN_EXIT}: Reply based on tool results. Images need to be rendered as ![](url)""",
    "zh": f"""## 你可以在回复中插入以下命令以并行调用N个工具：

{FN_NAME}: 工具1的名称，必须是[{{tool_names}}]之一
{FN_ARGS}: 工具1的输入
{FN_NAME}: 工具2的名称
{FN_ARGS}: 工具2的输入
...
{FN_NAME}: 工具N的名称
{FN_ARGS}: 工具N的输入
{FN_RESULT}: 工具1的结果
{FN_RESULT}: 工具2的结果
...
{FN_RESULT}: 工具N的结果
{FN_EXIT}: 根据工具结果进行回复，需将图片用![](url)渲染出来""",
}
CHOICE_REQUIRED = {"en": "You must call at least one tool in this reply.", "zh": "本次回复必须至少调用一个工具。"}
CHOICE_NAMED = {"en": "You must call the tool {name} in this reply.", "zh": "本次回复必须调用工具 {name}。"}


# ---- the entry point ----------------------------------------------------------------------------------------


def chat(
    model: BaseChatModel,
    msgs: list[Message],
    funcs: list[dict],
    cfg: dict,
    settings: Settings,
    usage: Usage | None,
    stream: bool,
) -> Iterator[list[Message]]:
    """Answer `msgs` with tools `funcs` through a prompt; yields fragments like a backend's `_chat_stream`.

    `settings.fncall_prompt_type` picks the format, `function_choice` ('auto', 'none', 'required' or a
    tool's name) and `parallel_function_calls` are honoured. The backend is called without functions,
    through the model's retry logic; the format's stop words are added to the user's own `stop`.
    """
    from chatagent.llm.base import attempt_cfg

    converted, cfg, parser = _prepare(msgs, funcs, cfg, settings)
    if stream:
        raw = model._retrying(lambda: model._chat_stream(converted, None, attempt_cfg(cfg, settings), usage), settings)
    else:
        raw = model._retrying(
            lambda: iter([model._chat_once(converted, None, attempt_cfg(cfg, settings), usage)]), settings
        )
    return parser.run(raw)


async def achat(
    model: BaseChatModel,
    msgs: list[Message],
    funcs: list[dict],
    cfg: dict,
    settings: Settings,
    usage: Usage | None,
    stream: bool,
) -> AsyncIterator[list[Message]]:
    """`chat` for asyncio."""
    from chatagent.llm.base import attempt_cfg

    converted, cfg, parser = _prepare(msgs, funcs, cfg, settings)
    if stream:
        raw = model._aretrying(
            lambda: model._achat_stream(converted, None, attempt_cfg(cfg, settings), usage), settings
        )
    else:

        async def once() -> AsyncIterator[list[Message]]:
            yield await model._achat_once(converted, None, attempt_cfg(cfg, settings), usage)

        raw = model._aretrying(once, settings)
    async with aclosing(raw) as parts:  # type: ignore[type-var]
        async for fragments in parts:
            out = parser.push(fragments)
            if out:
                yield out
    out = parser.end()
    if out:
        yield out


def _prepare(
    msgs: list[Message], funcs: list[dict], cfg: dict, settings: Settings
) -> tuple[list[Message], dict, StreamParser]:
    """The conversation in the prompt format, the cfg with its stop words, and the parser for the reply."""
    fmt = get_format(settings.fncall_prompt_type or "nous")
    choice = settings.function_choice or "auto"
    use_tools = bool(funcs) and choice != "none"
    converted, continued = fmt.convert(msgs, funcs if use_tools else None, choice, settings.parallel_function_calls)
    if use_tools and fmt.stop_words:
        cfg = with_stop_words(cfg, fmt.stop_words)
    parser = StreamParser(
        fmt.name,
        parse_calls=use_tools,
        single_call=not settings.parallel_function_calls,
        continued=continued,
        functions=funcs,
    )
    return converted, cfg, parser


def get_format(name: str) -> PromptFormat:
    """The prompt format called `name` ('nous' or 'qwen')."""
    fmt = FORMATS.get(name)
    if fmt is None:
        raise ValueError(f"unknown fncall_prompt_type {name!r}; use one of: {', '.join(sorted(FORMATS))}")
    return fmt


def with_stop_words(cfg: dict, words: Iterable[str]) -> dict:
    """`cfg` (a copy) with `words` added to its `stop` list, keeping the user's own stop words first."""
    stop = cfg.get("stop")
    stops = [] if stop is None else [stop] if isinstance(stop, str) else list(stop)
    for w in words:
        if w not in stops and len(stops) < MAX_STOP_WORDS:
            stops.append(w)
    return {**cfg, "stop": stops}


def parse_reply(text: str, fncall_prompt_type: str = "nous", functions: list[dict] | None = None) -> list[Message]:
    """A whole model reply (raw text) as assistant messages: text first, then one message per call."""
    parser = StreamParser(fncall_prompt_type, functions=functions)
    return collect(parser.run([[Message._make(ASSISTANT, text, None, None, None, {INDEX: 0})]]))


# ---- rendering the conversation -------------------------------------------------------------------------------


class PromptFormat:
    """One prompt format: how tools, calls and results are written into the conversation."""

    name = ""
    #: Stop words sent to the server (the parser cuts at them too, whether the server did or not).
    stop_words: tuple[str, ...] = ()

    def convert(
        self, msgs: list[Message], funcs: list[dict] | None, choice: str = "auto", parallel: bool = True
    ) -> tuple[list[Message], bool]:
        """The conversation for a backend without tools, and whether the model continues a turn.

        Function calls and results become text; `funcs` (None: no tools offered) go into the system
        message. The input messages are not changed.
        """
        raise NotImplementedError

    @staticmethod
    def _with_system(out: list[Message], text: str) -> list[Message]:
        if out and out[0].role == SYSTEM:
            first = out[0]
            sep = "\n\n" if content_text(first.content).strip() else ""
            return [first.copy(content=_cat(first.content, sep, text)), *out[1:]]
        return [Message._make(SYSTEM, text), *out]


class NousFormat(PromptFormat):
    """Hermes / Qwen2.5 / Qwen3: `<tool_call>` JSON in the assistant's text, `<tool_response>` in a user turn."""

    name = "nous"

    def convert(
        self, msgs: list[Message], funcs: list[dict] | None, choice: str = "auto", parallel: bool = True
    ) -> tuple[list[Message], bool]:
        out: list[Message] = []
        in_results = False  # out[-1] is a user message we made from function results
        for m in msgs:
            if m.role == ASSISTANT:
                content = m.content
                if m.function_call is not None:
                    content = _join(content, render_nous_call(m.function_call))
                if out and out[-1].role == ASSISTANT:
                    out[-1] = out[-1].copy(content=_join(out[-1].content, content))
                else:
                    out.append(Message._make(ASSISTANT, content, m.name, None, m.reasoning_content))
                in_results = False
            elif m.role == FUNCTION:
                result = _cat(RESPONSE_OPEN + "\n", m.content, "\n</tool_response>")
                if in_results:
                    out[-1] = out[-1].copy(content=_cat(out[-1].content, "\n", result))
                else:
                    out.append(Message._make(USER, result))
                in_results = True
            else:
                out.append(m)
                in_results = False
        if funcs:
            lines = "\n".join(json.dumps({"type": "function", "function": f}, ensure_ascii=False) for f in funcs)
            out = self._with_system(out, NOUS_TEMPLATE.format(tool_descs=lines) + _choice_text(choice, "en"))
        return out, False


class QwenFormat(PromptFormat):
    """Qwen's ✿FUNCTION✿ format: calls, results and the answer all inside the assistant's turn."""

    name = "qwen"
    # Not ✿RETURN✿: after the results the model often starts its new turn with it, and the answer follows.
    stop_words = (FN_RESULT,)

    def convert(
        self, msgs: list[Message], funcs: list[dict] | None, choice: str = "auto", parallel: bool = True
    ) -> tuple[list[Message], bool]:
        out: list[Message] = []
        open_results = False  # out[-1] ends with results that still need their ✿RETURN✿

        def close_results(last: bool) -> None:
            out[-1] = out[-1].copy(content=_cat(out[-1].content, f"\n{FN_EXIT}" if last else f"\n{FN_EXIT}: "))

        for m in msgs:
            if m.role == ASSISTANT:
                call = m.function_call
                call_text = f"{FN_NAME}: {call.name}\n{FN_ARGS}: {call.arguments}" if call is not None else ""
                if open_results:  # the answer after ✿RETURN✿: continues the same turn
                    close_results(last=False)
                    out[-1] = out[-1].copy(content=_join(_cat(out[-1].content, m.content), call_text))
                elif out and out[-1].role == ASSISTANT:
                    out[-1] = out[-1].copy(content=_join(_join(out[-1].content, m.content), call_text))
                else:
                    content = _join(m.content, call_text)
                    out.append(Message._make(ASSISTANT, content, m.name, None, m.reasoning_content))
                open_results = False
            elif m.role == FUNCTION:
                if not out or out[-1].role != ASSISTANT:  # a result without its call: keep it readable
                    out.append(Message._make(ASSISTANT, ""))
                out[-1] = out[-1].copy(content=_cat(out[-1].content, f"\n{FN_RESULT}: ", m.content))
                open_results = True
            else:
                if open_results:
                    close_results(last=False)
                out.append(m)
                open_results = False
        continued = False
        if open_results:
            # The model must go on after the results. Chat servers start a new turn after an assistant
            # message, so the turn so far is handed over at the end of the user's message instead.
            close_results(last=True)
            if len(out) >= 2 and out[-2].role == USER:
                turn = out.pop()
                out[-1] = out[-1].copy(content=_cat(out[-1].content, "\n\n", turn.content))
            continued = True
        if funcs:
            lang = "zh" if conversation_lang(msgs) == "zh" else "en"  # prompts exist in these two
            descs = "\n\n".join(
                QWEN_TOOL_DESC[lang].format(
                    name=f["name"],
                    description=f.get("description", ""),
                    parameters=json.dumps(f["parameters"], ensure_ascii=False),
                )
                for f in funcs
            )
            usage = QWEN_USAGE_PARALLEL if parallel else QWEN_USAGE
            names = ",".join(f["name"] for f in funcs)
            text = QWEN_TOOLS[lang].format(tool_descs=descs) + "\n\n" + usage[lang].format(tool_names=names)
            out = self._with_system(out, text + _choice_text(choice, lang))
        return out, continued


FORMATS: dict[str, PromptFormat] = {"nous": NousFormat(), "qwen": QwenFormat()}


def render_nous_call(call: FunctionCall) -> str:
    """A call as the nous format writes it (arguments as a JSON object when they parse)."""
    try:
        args: Any = loads_lenient(call.arguments) if call.arguments.strip() else {}
    except ValueError:
        args = call.arguments
    body = json.dumps({"name": call.name, "arguments": args}, ensure_ascii=False)
    return f"{CALL_OPEN}\n{body}\n{CALL_CLOSE}"


def _choice_text(choice: str, lang: str) -> str:
    if choice in ("auto", "none", ""):
        return ""
    if choice in ("required", "any"):
        return "\n\n" + CHOICE_REQUIRED[lang]
    return "\n\n" + CHOICE_NAMED[lang].format(name=choice)


def _cat(*parts: str | list[ContentItem]) -> str | list[ContentItem]:
    """Contents concatenated: a string if all are strings, else a list of content items."""
    if all(isinstance(p, str) for p in parts):
        return "".join(parts)  # type: ignore[arg-type]
    items: list[ContentItem] = []
    for p in parts:
        if isinstance(p, str):
            if p:
                items.append(ContentItem(text=p))
        else:
            items.extend(p)
    return items


def _join(a: str | list[ContentItem], b: str | list[ContentItem]) -> str | list[ContentItem]:
    """`a` then `b` on a new line (no separator when either is empty or `a` already ends a line)."""
    if not a or not b:
        return a or b
    a_text = a if isinstance(a, str) else (a[-1].text or "")
    return _cat(a, b) if a_text.endswith("\n") else _cat(a, "\n", b)


# ---- parsing the reply ------------------------------------------------------------------------------------

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


class StreamParser:
    """Turns a backend's fragment stream of raw text into text, reasoning and function-call fragments.

    Work per chunk is proportional to the chunk (plus a held-back suffix no longer than a tag), so a
    reply costs time linear in its length however it is chunked. Use `run(fragment_stream)`.
    """

    def __init__(
        self,
        fmt: str = "nous",
        *,
        parse_calls: bool = True,
        single_call: bool = False,
        continued: bool = False,
        functions: list[dict] | None = None,
    ) -> None:
        self.fmt = fmt
        self._tables = _tables(fmt, parse_calls)
        self._single_call = single_call
        self._schemas = {f["name"]: f.get("parameters") or {} for f in functions or ()}
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

    def run(self, stream: Iterable[list[Message]]) -> Iterator[list[Message]]:
        """Parse a stream of fragment lists (or whole messages); yield our fragments.

        A reply the backend marks as cut off by the token limit (extra['stop_reason'] == 'length') keeps the
        mark on its text; if it was cut in the middle of a call, ModelServiceError('length') is raised and the
        call is not emitted.
        """
        for fragments in stream:
            out = self.push(fragments)
            if out:
                yield out
        out = self.end()
        if out:
            yield out

    def push(self, fragments: list[Message]) -> list[Message]:
        """Read one list of the backend's fragments; our fragments so far."""
        for f in fragments:
            if f.extra and f.extra.get("stop_reason") == "length":
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

    def end(self) -> list[Message]:
        """The stream ended: the last fragments (see `run`)."""
        cut = self._cut
        if cut and self._mode in (_CALL, _NAME, _ARGS):
            from chatagent.llm.base import cut_call_error

            raise cut_call_error(partial=self._head)
        self.close()
        out = self.take()
        if not out and not self._head and not self._emitted:
            out = [Message._make(ASSISTANT, "", None, None, None, {INDEX: 0})]
        if cut and (self._head or not self._emitted):  # index 0 is the text: say that it was cut off
            out.append(Message._make(ASSISTANT, "", None, None, None, {INDEX: 0, "stop_reason": "length"}))
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

    def take(self) -> list[Message]:
        """The fragments produced since the last call."""
        out = []
        make = Message._make
        texts, thoughts = self._text_out, self._reasoning_out
        if texts or thoughts:
            text = texts[0] if len(texts) == 1 else "".join(texts)
            reasoning = ("".join(thoughts) or None) if thoughts else None
            texts.clear()
            thoughts.clear()
            out.append(make(ASSISTANT, text, None, None, reasoning, {INDEX: 0}))
            self._head = True
        if self._calls_out:
            for call, fid in self._calls_out:
                index = self._emitted + (1 if self._head else 0)
                out.append(make(ASSISTANT, "", None, call, None, {INDEX: index, "function_id": fid}))
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


# ---- reading one call ---------------------------------------------------------------------------------------

_NAME_KEYS = ("name", "function", "tool", "tool_name", "function_name")
_ARGS_KEYS = ("arguments", "parameters", "args", "input", "params")
_NAME_RE = re.compile(r"""["']?(?:name|function|tool_name)["']?\s*:\s*["']([^"'\n]+)["']""")
_ARGS_RE = re.compile(r"""["']?(?:arguments|parameters|args)["']?\s*:\s*""")
_XML_FUNCTION = re.compile(r"<function=([^>\s]+)\s*>")
_XML_PARAM = re.compile(r"<parameter=([^>\s]+)\s*>\n?(.*?)(?:\n?</parameter>|$)", re.DOTALL)
_FENCE = re.compile(r"^```[\w+-]*[ \t]*\n?(.*?)(?:\n?```\s*)?$", re.DOTALL)


def parse_call_text(text: str, schemas: dict[str, dict] | None = None) -> tuple[str, str] | None:
    """(name, arguments as JSON) from the text inside one `<tool_call>`, or None if no name is found.

    Lenient about what models really write: code fences, decoration before the JSON, Python dicts,
    single quotes, trailing commas, truncated JSON, `parameters` for `arguments`, arguments given as
    a JSON string, `name(key=value)` calls, and Qwen3-Coder's `<function=name><parameter=k>v</parameter>`.
    """
    text = text.strip()
    if "<function=" in text:
        return _parse_xml_call(text, schemas or {})
    start = text.find("{")
    if start != -1:
        try:
            obj = loads_lenient(text[start:])
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            found = _name_and_args(obj)
            if found is not None:
                return found
        m = _NAME_RE.search(text, start)
        if m:
            a = _ARGS_RE.search(text, m.end()) or _ARGS_RE.search(text, start)
            raw = text[a.end() :].strip() if a else "{}"
            if raw.endswith("}") and raw.count("{") < raw.count("}"):
                raw = raw[:-1]  # the closing brace of the outer object
            return m.group(1).strip(), _arguments_json(raw)
    return _parse_python_call(_strip_fence(text))


def parse_qwen_args(text: str) -> str:
    """The text after `✿ARGS✿` as JSON arguments (kept as written if it is no JSON object, e.g. code)."""
    text = text.strip().lstrip(":：").strip()
    if not text:
        return "{}"
    if text.startswith("{"):
        end = text.rfind("}")
        if end > 0:
            text = text[: end + 1]  # drop comments after the object
    return _arguments_json(text)


def _name_and_args(obj: dict) -> tuple[str, str] | None:
    if isinstance(obj.get("function"), dict):  # {"type": "function", "function": {...}}
        return _name_and_args(obj["function"])
    name_key = next((k for k in _NAME_KEYS if isinstance(obj.get(k), str) and obj[k].strip()), None)
    if name_key is None:
        return None
    args_key = next((k for k in _ARGS_KEYS if k in obj), None)
    if args_key is not None:
        args = obj[args_key]
    else:  # the arguments written beside the name
        args = {k: v for k, v in obj.items() if k != name_key and k != "type"}
    return obj[name_key].strip(), _arguments_json(args)


def _arguments_json(args: Any) -> str:
    """Arguments as a JSON string: objects dumped, strings parsed leniently first, else kept as they are."""
    if isinstance(args, str):
        text = args.strip()
        if not text:
            return "{}"
        try:
            args = loads_lenient(text)
        except ValueError:
            return args
        if isinstance(args, str):  # a JSON string holding the JSON
            try:
                inner = loads_lenient(args)
            except ValueError:
                return text
            args = inner if isinstance(inner, dict) else args
        if not isinstance(args, dict):
            return text
    if args is None:
        return "{}"
    return json.dumps(args, ensure_ascii=False)


def _parse_xml_call(text: str, schemas: dict[str, dict]) -> tuple[str, str] | None:
    m = _XML_FUNCTION.search(text)
    if m is None:
        return None
    name = m.group(1).strip()
    props = (schemas.get(name) or {}).get("properties") or {}
    args: dict[str, Any] = {}
    for p in _XML_PARAM.finditer(text, m.end()):
        key, value = p.group(1).strip(), p.group(2)
        value = value.split("</function>")[0].strip("\n")
        kind = (props.get(key) or {}).get("type")
        if kind != "string":
            try:
                value = loads_lenient(value)
            except ValueError:
                pass
        args[key] = value
    return name, json.dumps(args, ensure_ascii=False)


def _parse_python_call(text: str) -> tuple[str, str] | None:
    """`name(key=value, ...)` or `name({...})`, as some small models write calls."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return None
    if not isinstance(node, ast.Call) or not isinstance(node.func, (ast.Name, ast.Attribute)):
        return None
    name = ast.unparse(node.func)
    try:
        args = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
        if len(node.args) == 1 and not node.keywords:
            value = ast.literal_eval(node.args[0])
            args = value if isinstance(value, dict) else {"input": value}
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return None
    return name, json.dumps(args, ensure_ascii=False)


def _strip_fence(text: str) -> str:
    if text.startswith("```"):
        m = _FENCE.match(text)
        if m:
            return m.group(1).strip()
    return text

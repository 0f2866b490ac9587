"""ReActChat: tool use in plain text (Thought / Action / Action Input / Observation / Final Answer), for
models without native function calling.

    bot = ReActChat(llm=cfg, function_list=[get_weather])
    for response in bot.run([{'role': 'user', 'content': 'Weather in Paris?'}]):
        ...

The tools are described in the system message with the format (English or Chinese, by the language of
the conversation). Generation stops at `Observation:` (`stop` in generate_cfg; a model that writes an
observation anyway is cut there). Each step of the loop adds to the response, as every agent does:

- an assistant message whose `reasoning_content` is the model's Thought and whose `content` is its
  Final Answer (or, for a reply with no ReAct markers at all, the whole reply: it is taken as the answer);
- for an action, an assistant message with `function_call` (the tool's real name, arguments as JSON)
  and the function message with the tool's result, exactly as FnCallAgent's; the model reads the result
  as `Observation: ...`.

**Parsing** is lenient about what models really write: markers at the start of a line in any case,
with extra spaces, a full-width colon or Markdown (`**Action:**`, `**Action**:`, `### Thought:`);
Action Input as JSON, json5, in a code fence, or a bare value (wrapped into the tool's only required parameter);
a missing Action Input (no arguments); arguments on the line after `Action:` without `Action Input:`;
a tool name in a different case or in backticks. **When a reply has both an Action and a Final Answer,
the one that comes first wins**: an Action followed by a Final Answer means the model guessed the result
before seeing it, so the tool runs and the guess is dropped; a Final Answer followed by an Action is the
answer, and the action is ignored (logged).

A malformed reply (a Thought with neither Action nor Final Answer, `Action:` without a tool name,
`Action Input:` without `Action:`, an empty reply) is answered with a short correction and counts as
one of `max_llm_calls`. When they are used up the model is asked once for a final answer, which carries
`extra['stop_reason'] = 'max_llm_calls'`. Tool failures (unknown tool, bad arguments, an exception, a
timeout) come back as the observation, through the same tool layer FnCallAgent uses.

**Streaming** shows the Thought (as reasoning) and the Final Answer as they form, but never a
half-written action: from `Action:` on, text is held back until the reply is complete. Each chunk is
examined once, and only the start of a line that may still become a marker is held, so a whole reply
costs time linear in its length.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from chatagent.agent import current_run, map_fragments
from chatagent.agents.fncall import CallHistory, FnCallAgent, loop_message
from chatagent.effects import View
from chatagent.logs import quote
from chatagent.schema import ASSISTANT, FUNCTION, SYSTEM, USER, FunctionCall, Message, content_text
from chatagent.stream import INDEX
from chatagent.tools.arguments import ToolArgumentError, parse_arguments, parse_json
from chatagent.tools.base import BaseTool

logger = logging.getLogger("chatagent.react")

STOP_WORDS = ["Observation:", "Observation:\n"]

REACT_PROMPT = {
    "en": """Answer the user as well as you can. You can use these tools:

{tool_descs}

Use exactly this format:

Thought: think about what to do next
Action: the tool to use, one of [{tool_names}]
Action Input: the tool's arguments, a JSON object
Observation: the tool's result (it is given to you; never write it yourself)
... (Thought / Action / Action Input / Observation may repeat)
Thought: I now know the final answer
Final Answer: the final answer to the user

Write one Action per reply and stop after its Action Input.""",
    "zh": """尽你所能回答用户的问题。你可以使用以下工具：

{tool_descs}

请严格使用以下格式：

Thought: 思考下一步该做什么
Action: 要使用的工具，必须是 [{tool_names}] 之一
Action Input: 工具的参数，一个 JSON 对象
Observation: 工具的结果（由系统提供，你不要自己写）
……（Thought / Action / Action Input / Observation 可以重复多次）
Thought: 我现在知道最终答案了
Final Answer: 给用户的最终答案

每次回复只写一个 Action，写完 Action Input 后就停止。""",
}
TOOL_DESC = {
    "en": "{name}: {description} Parameters: {parameters}",
    "zh": "{name}：{description} 参数：{parameters}",
}
OBSERVATION = "Observation: {}"
CORRECTIONS = {
    "en": {
        "no_action": "Your reply had neither an Action nor a Final Answer. Either write 'Action:' with a tool "
        "name and 'Action Input:' with its arguments, or write 'Final Answer:' with your answer.",
        "no_tool_name": "Your reply had 'Action:' without a tool name. Write 'Action:' followed by one of "
        "[{tool_names}], then 'Action Input:' with a JSON object.",
        "input_without_action": "Your reply had 'Action Input:' without 'Action:'. Write 'Action:' with the "
        "tool name (one of [{tool_names}]) on the line before 'Action Input:'.",
        "empty": "Your reply was empty. Continue: write 'Action:' and 'Action Input:' to use a tool, or "
        "'Final Answer:' to answer.",
    },
    "zh": {
        "no_action": "你的回复既没有 Action 也没有 Final Answer。请写 'Action:'（工具名）和 'Action Input:'"
        "（参数）来使用工具，或写 'Final Answer:' 给出答案。",
        "no_tool_name": "你的回复中 'Action:' 后面没有工具名。请在 'Action:' 后写 [{tool_names}] 之一，"
        "再写 'Action Input:' 和一个 JSON 对象。",
        "input_without_action": "你的回复有 'Action Input:' 却没有 'Action:'。请在 'Action Input:' 的上一行写 "
        "'Action:' 和工具名（[{tool_names}] 之一）。",
        "empty": "你的回复是空的。请继续：用 'Action:' 和 'Action Input:' 使用工具，或用 'Final Answer:' 回答。",
    },
}
FINAL_PROMPT = {
    "en": "You have used all the steps available. Do not use any more tools: reply now with 'Final Answer:' "
    "and the best answer you can give from what you have found, saying briefly what is missing, if anything.",
    "zh": "可用的步骤已经用完。请不要再使用工具，现在就以 'Final Answer:' 开头，根据已有信息给出最好的回答，"
    "如有缺失请简要说明。",
}

# ---- the parser -------------------------------------------------------------------------------------------

_MARKER = re.compile(
    r"[ \t]*[*_#>`]*[ \t]*(thought|action[ \t]*input|action|observation|final[ \t]*answer)"
    r"[ \t]*[*_`]*[ \t]*[:：][*_`]*",
    re.IGNORECASE,
)
_KEYWORDS = ("thought", "action input", "action", "observation", "final answer")
_SPACES = re.compile(r"[ \t]+")
_AFTER_KEYWORD = re.compile(r"[ \t*_`]*")
MAX_MARKER_PREFIX = 40  # a line start longer than this without a colon is not a marker

PLAIN, THOUGHT, FINAL, ACTION = "plain", "thought", "final", "action"


def _kind(keyword: str) -> str:
    k = _SPACES.sub("", keyword.lower())
    return {"actioninput": "input", "finalanswer": "final"}.get(k, k)


def _maybe_marker(line: str) -> bool:
    """Whether `line` (the start of a line, no newline yet) may still become a marker."""
    if len(line) > MAX_MARKER_PREFIX:
        return False
    s = _SPACES.sub(" ", line.lstrip(" \t*_#>`").lower())
    if not s:
        return True
    return any(k.startswith(s) or (s.startswith(k) and _AFTER_KEYWORD.fullmatch(s, len(k))) for k in _KEYWORDS)


@dataclass
class ReActStep:
    """What one reply asked for: `kind` is 'final', 'action' or 'malformed' (then `problem` says why)."""

    kind: str
    thought: str = ""
    answer: str = ""
    action: str | None = None
    action_input: str | None = None
    problem: str | None = None
    raw: str = ""


class ReActParser:
    """Reads a ReAct reply chunk by chunk: `feed()` returns the (reasoning, content) text that can be shown
    now; `finish()` the rest and the parsed step. Text from `Action:` on is never shown."""

    def __init__(self) -> None:
        self.mode = PLAIN
        self.cut = False  # the reply is over (an observation or a second action began): ignore the rest
        self._line_start = True
        self._pending = ""  # the start of a line held while it may still become a marker
        self._newlines = ""  # newlines held back: dropped when a marker follows, else shown before the next text
        self._skip_space = False
        self._skip_decor = 0  # closing `*`/`_` of a Markdown marker still to drop (split across chunks)
        self._raw: list[str] = []
        self._reasoning: list[str] = []
        self._content: list[str] = []
        self._name: list[str] | None = None
        self._input: list[str] | None = None
        self._section: list[str] = []
        self._thought_seen = self._final_seen = self._ignored_action = False
        self._out_r: list[str] = []
        self._out_c: list[str] = []

    def feed(self, chunk: str, _last: bool = False) -> tuple[str, str]:
        """Add a piece of the reply; the (reasoning, content) text to show now."""
        if self.cut or not chunk:
            return "", ""
        text = self._pending + chunk if self._pending else chunk
        self._pending = ""
        pos, n = 0, len(text)
        while pos < n:
            nl = text.find("\n", pos)
            end = n if nl < 0 else nl + 1
            if self._line_start:
                match = _MARKER.match(text, pos, end)
                if match is not None and match.end() == n and not _last and n - pos <= MAX_MARKER_PREFIX:
                    self._pending = text[pos:]  # the marker's decoration (`**`) may go on in the next chunk
                    break
                if match is not None and self._marker(_kind(match.group(1))):
                    if self.cut:
                        break
                    pos = match.end()
                    self._line_start = False
                    self._skip_space = True
                    marker = match.group(0).strip()
                    opened = len(marker) - len(marker.lstrip("*_"))
                    closed = len(marker) - len(marker.rstrip("*_"))
                    self._skip_decor = max(opened - closed, 0)
                    continue
                if match is None and nl < 0 and not _last and _maybe_marker(text[pos:]):
                    self._pending = text[pos:]
                    break
            self._text(text[pos:end])
            pos = end
            self._line_start = nl >= 0
        self._raw.append(text[:pos])
        return self._take()

    def finish(self) -> tuple[str, str, ReActStep]:
        """The end of the reply: the last (reasoning, content) text to show, and the parsed step."""
        reasoning = content = ""
        if self._pending and not self.cut:
            pending, self._pending = self._pending, ""
            reasoning, content = self.feed(pending, _last=True)
        r, c = self._take()
        return reasoning + r, content + c, self._step()

    # ---- internals -------------------------------------------------------------------------------------

    def _take(self) -> tuple[str, str]:
        r, c = "".join(self._out_r), "".join(self._out_c)
        self._out_r.clear()
        self._out_c.clear()
        return r, c

    def _marker(self, kind: str) -> bool:
        """Act on a marker; False when it is to be read as ordinary text."""
        if kind == "observation":
            self.cut = True
            return True
        if self.mode == ACTION:
            if kind == "input" and self._input is None:
                self._input = self._section = []
            else:
                self.cut = True
            return True
        if self.mode == FINAL:
            if kind in ("action", "input"):
                self._ignored_action = self.cut = True
                return True
            return False
        if kind == "thought":
            self._newlines = "\n" if self._reasoning else ""
            self.mode, self._thought_seen = THOUGHT, True
        elif kind == "final":
            self._newlines = "\n\n" if self._content else ""
            self.mode, self._final_seen = FINAL, True
        else:
            self._newlines = ""
            self.mode = ACTION
            if kind == "action":
                self._name = self._section = []
            else:
                self._input = self._section = []
        return True

    def _text(self, s: str) -> None:
        if self._skip_space:
            if self._skip_decor:
                rest = s.lstrip(" \t")
                decor = len(rest) - len(rest.lstrip("*_"))
                s = rest[min(decor, self._skip_decor) :]
                self._skip_decor -= min(decor, self._skip_decor)
            stripped = s.lstrip()
            if not stripped:
                return
            s = stripped
            self._skip_space = False
        if self.mode == ACTION:
            self._section.append(s)
            return
        body = s.rstrip("\r\n")
        if body:
            out = self._newlines + body if self._newlines else body
            self._newlines = ""
            if self.mode == THOUGHT:
                self._reasoning.append(out)
                self._out_r.append(out)
            else:
                self._content.append(out)
                self._out_c.append(out)
        if len(body) < len(s):
            self._newlines += s[len(body) :].replace("\r", "")

    def _step(self) -> ReActStep:
        thought, answer, raw = "".join(self._reasoning), "".join(self._content), "".join(self._raw).strip()
        if self._ignored_action:
            logger.warning("ReAct: the reply had an Action after its Final Answer; the action was ignored")
        if self._name is not None or self._input is not None:
            name_text = "".join(self._name).strip() if self._name is not None else None
            inp = "".join(self._input).strip() if self._input is not None else None
            if name_text is None:
                return ReActStep("malformed", thought, answer, None, inp, "input_without_action", raw)
            name, _, rest = name_text.partition("\n")
            if inp is None and rest.strip():
                inp = rest.strip()  # arguments on the next line, without "Action Input:"
            name = name.strip().strip("*`'\"[]").strip()
            name = name.removesuffix("()").strip()
            if not name:
                return ReActStep("malformed", thought, answer, None, inp, "no_tool_name", raw)
            return ReActStep("action", thought, answer, name, inp, None, raw)
        if self._final_seen:
            return ReActStep("final", thought, answer, raw=raw)
        if self._thought_seen:
            return ReActStep("malformed", thought, answer, problem="no_action", raw=raw)
        if not answer.strip():
            return ReActStep("malformed", thought, answer, problem="empty", raw=raw)
        return ReActStep("final", thought, answer, raw=raw)


def parse_react(text: str) -> ReActStep:
    """Parse a complete ReAct reply (the same code path as streaming)."""
    parser = ReActParser()
    parser.feed(text)
    return parser.finish()[2]


# ---- the agent --------------------------------------------------------------------------------------------


class _ReActView(View):
    """Shows a streamed ReAct reply as the parser reads it: the thought as reasoning, the answer as text."""

    def __init__(self, count: int) -> None:
        self.parser = ReActParser()
        self.count = count
        self.shown = False

    def __call__(self, fragments: list[Message]) -> list[Message]:
        out = []
        count, parser = self.count, self.parser
        for f in fragments:
            assert f.extra is not None  # a fragment always carries its index
            if f.extra[INDEX] != count:
                continue  # no tools are sent, so nothing but the text message is expected
            reasoning, content = parser.feed(f.content) if isinstance(f.content, str) else ("", "")
            if f.reasoning_content:  # a thinking model's own reasoning
                reasoning = f.reasoning_content + reasoning
            if reasoning or content:
                out.append(Message.unchecked(ASSISTANT, content, None, None, reasoning or None, {INDEX: count}))
                self.shown = True
        self.done = parser.cut
        return out


class ReActChat(FnCallAgent):
    """Tool use through the ReAct text format; works with any chat model (see the module docstring).

    Args: as FnCallAgent (`function_list`, `llm`, `system_message`, `name`, `description`,
    `max_llm_calls` — every reply counts, malformed ones too), and
        transcript: True gives the response as Qwen-Agent's ReActChat does: one assistant message holding
            the whole Thought / Action / Action Input / Observation / Final Answer text
            (see `chatagent.agents.react_transcript`).
    """

    async_safe = True

    def __init__(self, *args: Any, transcript: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.transcript = transcript

    @property
    def functions(self) -> list[dict] | None:
        return None  # the tools are described in the prompt, never sent as native tools

    def _run(self, messages: list[Message], lang: str = "en", **kwargs: Any) -> Iterator[list[Message]]:
        if self.transcript:
            from chatagent.agents.react_transcript import Transcript

            transcript = Transcript()
            result = yield from map_fragments(self._react(messages, lang, **kwargs), transcript)
            tail = transcript.finish()
            if tail:
                yield tail
            return result
        return (yield from self._react(messages, lang, **kwargs))

    def _react(self, messages: list[Message], lang: str = "en", **kwargs: Any) -> Iterator[list[Message]]:
        lang = lang if lang in REACT_PROMPT else "en"
        prompt = self._prompt(messages, lang)
        cfg = {"stop": self._stop_words()}
        scratch: list[Message] = []  # the conversation with the model in ReAct text
        count = 0  # messages in the response so far
        history = CallHistory()
        for _ in range(self.max_llm_calls):
            step, count = yield from self._step(prompt + scratch, count, cfg)
            if step.raw:
                scratch.append(Message.unchecked(ASSISTANT, step.raw))
            if step.kind == "final":
                return
            if step.kind == "malformed":
                logger.warning("ReAct: malformed reply (%s): %s", step.problem, quote(step.raw))
                note = CORRECTIONS[lang][step.problem].format(tool_names=", ".join(self.function_map))
                scratch.append(Message.unchecked(USER, note))
                continue
            observation, count = yield from self._act(step, count, history, messages, lang, kwargs)
            scratch.append(Message.unchecked(USER, OBSERVATION.format(observation)))
        logger.warning(
            "%s used all %d model calls; asking for a final answer", self.name or "ReAct", self.max_llm_calls
        )
        scratch.append(Message.unchecked(USER, FINAL_PROMPT[lang]))
        start = count
        step, count = yield from self._step(prompt + scratch, count, cfg)
        extra = {INDEX: start, "stop_reason": "max_llm_calls"}
        if count == start or not step.answer.strip():
            text = f"Stopped after {self.max_llm_calls} model calls without reaching a final answer."
            yield [Message.unchecked(ASSISTANT, "\n\n" + text if count > start else text, None, None, None, extra)]
        else:
            yield [Message.unchecked(ASSISTANT, "", None, None, None, extra)]

    def _step(self, messages: list[Message], count: int, cfg: dict[str, Any]) -> Iterator[list[Message]]:
        """One model reply, streamed through the parser; returns (the step, the response length after it)."""
        view = _ReActView(count)
        yield from self._call_llm(messages, None, start=count, extra_generate_cfg=cfg, view=view)
        reasoning, content, step = view.parser.finish()
        if reasoning or content:
            yield [Message.unchecked(ASSISTANT, content, None, None, reasoning or None, {INDEX: count})]
            view.shown = True
        return step, count + (1 if view.shown else 0)

    def _act(
        self,
        step: ReActStep,
        count: int,
        history: CallHistory,
        messages: list[Message],
        lang: str,
        kwargs: dict[str, Any],
    ) -> Iterator[list[Message]]:
        """Run the step's action; yields the call and its result, returns (the observation text, new count)."""
        tool = self._match_tool(step.action or "")
        name = tool.name if tool is not None else step.action or ""
        arguments = _arguments(step.action_input, tool)
        call_id = f"react_{count}"
        yield [
            Message.unchecked(
                ASSISTANT, "", None, FunctionCall(name, arguments), None, {INDEX: count, "function_id": call_id}
            )
        ]
        if history.repeated(name, arguments):
            result: Any = loop_message(name)
        else:
            result = yield from self._run_tool(name, arguments, call_id=call_id, messages=messages, lang=lang, **kwargs)
        extra = {INDEX: count + 1, "function_id": call_id}
        yield [Message.unchecked(FUNCTION, result, name, None, None, extra)]
        current_run().check_deadline()
        return content_text(result) if isinstance(result, list) else str(result), count + 2

    def _match_tool(self, name: str) -> BaseTool | None:
        tools = self.function_map
        if name in tools:
            return tools[name]
        folded = name.casefold()
        return next((t for n, t in tools.items() if n.casefold() == folded), None)

    def _stop_words(self) -> list[str]:
        cfg = {**self.llm.generate_cfg, **self.extra_generate_cfg, **(current_run().generate_cfg or {})}
        stop = cfg.get("stop") or []
        stop = [stop] if isinstance(stop, str) else list(stop)
        return stop + [w for w in STOP_WORDS if w not in stop]

    def _prompt(self, messages: list[Message], lang: str) -> list[Message]:
        """The system message with the tools and the format, then the conversation in ReAct text."""
        descs = "\n\n".join(
            TOOL_DESC[lang].format(
                name=t.name,
                description=t.description,
                parameters=json.dumps(t.function.get("parameters", {}), ensure_ascii=False),
            )
            for t in self.function_map.values()
        )
        system = REACT_PROMPT[lang].format(tool_descs=descs, tool_names=", ".join(self.function_map))
        out: list[Message] = []
        for m in messages:
            if m.role == SYSTEM:
                system = content_text(m.content) + "\n\n" + system
            elif m.role == FUNCTION:
                out.append(Message.unchecked(USER, OBSERVATION.format(content_text(m.content))))
            elif m.role == ASSISTANT:
                text = content_text(m.content)
                if m.function_call is not None:
                    call = m.function_call
                    text = f"{text}\n" if text else ""
                    text += f"Action: {call.name}\nAction Input: {call.arguments}"
                if out and out[-1].role == ASSISTANT:
                    out[-1] = out[-1].copy(content=content_text(out[-1].content) + "\n" + text)
                else:
                    out.append(Message.unchecked(ASSISTANT, text))
            else:
                out.append(m)
        return [Message.unchecked(SYSTEM, system)] + out


def _arguments(text: str | None, tool: BaseTool | None) -> str:
    """The Action Input as a JSON object string; a bare value goes into the tool's only (required) parameter."""
    if not text:
        return "{}"
    try:
        return json.dumps(parse_arguments(text), ensure_ascii=False)
    except ToolArgumentError:
        pass
    schema = (tool.function.get("parameters") or {}) if tool is not None else {}
    props, required = schema.get("properties") or {}, schema.get("required") or []
    target = required[0] if len(required) == 1 else next(iter(props)) if len(props) == 1 else None
    if target is None:
        return text  # the tool layer explains what is wrong
    try:
        value = parse_json(text)
    except ToolArgumentError:
        value = text.strip().strip("`")
    return json.dumps({target: value}, ensure_ascii=False)


__all__ = ["ReActChat", "ReActParser", "ReActStep", "parse_react"]

"""ReActChat: tool use in plain text (Thought / Action / Action Input / Observation / Final Answer), for
models without native function calling.

    bot = ReActChat(llm=cfg, function_list=[get_weather])
    for response in bot.run([{'role': 'user', 'content': 'Weather in Paris?'}]):
        ...

The tools are described in the system message with the format (English or Chinese, by the language of
the conversation). Generation stops at `Observation:` (`stop` in generate_cfg; a model that writes an
observation anyway is cut there). The response is, as in Qwen-Agent, one assistant message holding the whole
ReAct text (`transcript=True`, the default). With `transcript=False` each step of the loop adds to the
response, as every agent does:

- an assistant message whose `reasoning_content` is the model's Thought and whose `content` is its
  Final Answer (or, for a reply with no ReAct markers at all, the whole reply: it is taken as the answer);
- for an action, an assistant message with `function_call` (the tool's real name, arguments as JSON)
  and the function message with the tool's result, exactly as FnCallAgent's; the model reads the result
  as `Observation: ...`.

Reading the reply, whole or as it streams, is `react_parser`'s: lenient about markers (any case, Markdown,
a full-width colon), the first of an Action and a Final Answer wins, and a half-written action is never
shown. Action Input may be JSON, json5, in a code fence, or a bare value (wrapped into the tool's only
required parameter); a tool name may differ in case.

A malformed reply (a Thought with neither Action nor Final Answer, `Action:` without a tool name,
`Action Input:` without `Action:`, an empty reply) is answered with a short correction and counts as
one of `max_llm_calls`. When they are used up the model is asked once for a final answer, which carries
`extra['stop_reason'] = 'max_llm_calls'`. Tool failures (unknown tool, bad arguments, an exception, a
timeout) come back as the observation, through the same tool layer FnCallAgent uses.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

from chatagent.agent import current_run, map_fragments
from chatagent.agents.fncall import CallHistory, FnCallAgent, loop_message
from chatagent.agents.react_parser import ReActParser, ReActStep, parse_react
from chatagent.agents.react_transcript import Transcript
from chatagent.run.requests import View
from chatagent.schema import ASSISTANT, FUNCTION, SYSTEM, USER, FunctionCall, Message, content_text
from chatagent.schema.fragment import Fragment
from chatagent.tools.arguments import ToolArgumentError, parse_arguments, parse_json
from chatagent.tools.base import BaseTool
from chatagent.utils.logs import quote

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

# ---- the agent --------------------------------------------------------------------------------------------


class _ReActView(View):
    """Shows a streamed ReAct reply as the parser reads it: the thought as reasoning, the answer as text."""

    def __init__(self, count: int) -> None:
        self.parser = ReActParser()
        self.count = count
        self.shown = False

    def __call__(self, fragments: list[Fragment]) -> list[Fragment]:
        out: list[Fragment] = []
        count, parser = self.count, self.parser
        for f in fragments:
            if f.index != count:
                continue  # no tools are sent, so nothing but the text message is expected
            if f.reasoning_content:  # a thinking model's own reasoning
                out.append(Fragment.unchecked(ASSISTANT, "", None, None, f.reasoning_content, None, count))
            if isinstance(f.content, str):
                out += shown_pieces(parser.pieces(f.content), count)
        self.shown = self.shown or bool(out)
        self.done = parser.cut
        return out


def shown_pieces(pieces: list[tuple[str, str]], index: int) -> list[Fragment]:
    """The parser's pieces of reasoning and content as fragments of message `index`, in the reply's order (a
    transcript writes them in that order, whatever the chunking)."""
    return [Fragment.unchecked(ASSISTANT, content, None, None, reasoning or None, None, index)
            for reasoning, content in pieces]  # fmt: skip


class ReActChat(FnCallAgent):
    """Tool use through the ReAct text format; works with any chat model (see the module docstring).

    Args: as FnCallAgent (`function_list`, `llm`, `system_message`, `name`, `description`,
    `max_llm_calls` — every reply counts, malformed ones too), and
        transcript: True (the default, as in Qwen-Agent) gives the response as one assistant message holding
            the whole Thought / Action / Action Input / Observation / Final Answer text (see
            `chatagent.agents.react_transcript`); False gives structured messages: the Thought as
            `reasoning_content`, each action as a function call and its result, the Final Answer as `content`.
    """

    async_safe = True
    fragment_native = True

    def __init__(self, *args: Any, transcript: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.transcript = transcript

    @property
    def functions(self) -> list[dict] | None:
        return None  # the tools are described in the prompt, never sent as native tools

    def _run(self, messages: list[Message], lang: str = "en", **kwargs: Any) -> Iterator[list[Message]]:
        if self.transcript:
            transcript = Transcript()
            result = yield from map_fragments(self._react(messages, lang, **kwargs), transcript)
            tail = transcript.finish()
            if tail:
                yield [*tail]
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
        extra = {"stop_reason": "max_llm_calls"}
        if count == start or not step.answer.strip():
            text = f"Stopped after {self.max_llm_calls} model calls without reaching a final answer."
            yield [
                Fragment.unchecked(ASSISTANT, "\n\n" + text if count > start else text, None, None, None, extra, start)
            ]
        else:
            yield [Fragment.unchecked(ASSISTANT, "", None, None, None, extra, start)]

    def _step(self, messages: list[Message], count: int, cfg: dict[str, Any]) -> Iterator[list[Message]]:
        """One model reply, streamed through the parser; returns (the step, the response length after it)."""
        view = _ReActView(count)
        yield from self._call_llm(messages, None, start=count, extra_generate_cfg=cfg, view=view)
        tail = shown_pieces(view.parser.pieces(None), count)
        if tail:
            yield [*tail]
            view.shown = True
        return view.parser.step(), count + (1 if view.shown else 0)

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
        call = FunctionCall(name, arguments)
        yield [Fragment.unchecked(ASSISTANT, "", None, call, None, {"function_id": call_id}, count)]
        if history.repeated(name, arguments):
            result: Any = loop_message(name)
        else:
            result = yield from self._run_tool(name, arguments, call_id=call_id, messages=messages, lang=lang, **kwargs)
        yield [Fragment.unchecked(FUNCTION, result, name, None, None, {"function_id": call_id}, count + 1)]
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

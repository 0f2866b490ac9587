"""The prompt formats of prompt-based function calling: their markers, the prompts, and the conversation
rendered for a backend without tools (calls and results written as text, tools in the system message).

- ``'nous'`` (Hermes, Qwen2.5, Qwen3): tools as JSON lines in ``<tools></tools>``; a call is
  ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``; results go back in a user turn as
  ``<tool_response>\\n...\\n</tool_response>``.
- ``'qwen'``: ``✿FUNCTION✿: name`` then ``✿ARGS✿: {...}``, results as ``✿RESULT✿: ...`` and ``✿RETURN✿: answer``
  in the assistant's turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from chatagent.schema import ASSISTANT, FUNCTION, USER, ContentItem, FunctionCall, Message, with_system_text
from chatagent.schema.history import conversation_lang
from chatagent.utils.jsonlenient import loads_lenient

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


class PromptFormat:
    """One prompt format: how tools, calls and results are written into the conversation."""

    name = ""
    #: Stop words sent to the server (the parser cuts at them too, whether the server did or not).
    stop_words: tuple[str, ...] = ()

    def convert(
        self, msgs: list[Message], funcs: list[dict[str, Any]] | None, choice: str = "auto", parallel: bool = True
    ) -> tuple[list[Message], bool]:
        """The conversation for a backend without tools, and whether the model continues a turn.

        Function calls and results become text; `funcs` (None: no tools offered) go into the system
        message. The input messages are not changed.
        """
        raise NotImplementedError


class NousFormat(PromptFormat):
    """Hermes / Qwen2.5 / Qwen3: `<tool_call>` JSON in the assistant's text, `<tool_response>` in a user turn."""

    name = "nous"

    def convert(
        self, msgs: list[Message], funcs: list[dict[str, Any]] | None, choice: str = "auto", parallel: bool = True
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
                    out.append(Message(ASSISTANT, content, m.reasoning_content, m.name))
                in_results = False
            elif m.role == FUNCTION:
                result = _cat(RESPONSE_OPEN + "\n", m.content, "\n</tool_response>")
                if in_results:
                    out[-1] = out[-1].copy(content=_cat(out[-1].content, "\n", result))
                else:
                    out.append(Message(USER, result))
                in_results = True
            else:
                out.append(m)
                in_results = False
        if funcs:
            lines = "\n".join(json.dumps({"type": "function", "function": f}, ensure_ascii=False) for f in funcs)
            out = with_system_text(out, NOUS_TEMPLATE.format(tool_descs=lines) + _choice_text(choice, "en"))
        return out, False


class QwenFormat(PromptFormat):
    """Qwen's ✿FUNCTION✿ format: calls, results and the answer all inside the assistant's turn."""

    name = "qwen"
    # Not ✿RETURN✿: after the results the model often starts its new turn with it, and the answer follows.
    stop_words = (FN_RESULT,)

    def convert(
        self, msgs: list[Message], funcs: list[dict[str, Any]] | None, choice: str = "auto", parallel: bool = True
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
                    out.append(Message(ASSISTANT, content, m.reasoning_content, m.name))
                open_results = False
            elif m.role == FUNCTION:
                if not out or out[-1].role != ASSISTANT:  # a result without its call: keep it readable
                    out.append(Message(ASSISTANT, ""))
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
            out = with_system_text(out, text + _choice_text(choice, lang))
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
    texts = [p for p in parts if isinstance(p, str)]
    if len(texts) == len(parts):
        return "".join(texts)
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


def get_format(name: str) -> PromptFormat:
    """The prompt format called `name` ('nous' or 'qwen')."""
    fmt = FORMATS.get(name)
    if fmt is None:
        raise ValueError(f"unknown fncall_prompt_type {name!r}; use one of: {', '.join(sorted(FORMATS))}")
    return fmt


def with_stop_words(cfg: dict[str, Any], words: Iterable[str]) -> dict[str, Any]:
    """`cfg` (a copy) with `words` added to its `stop` list, keeping the user's own stop words first."""
    stop = cfg.get("stop")
    stops: list[str] = [] if stop is None else [stop] if isinstance(stop, str) else list(stop)
    for w in words:
        if w not in stops and len(stops) < MAX_STOP_WORDS:
            stops.append(w)
    return {**cfg, "stop": stops}

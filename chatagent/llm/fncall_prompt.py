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

`chatagent.llm.routing` sends a call here (see `chat`), and this module drives the model through its public
`backend_reply` / `abackend_reply`. The work is split by job in `chatagent.llm.fncall`: `formats` (markers,
prompts, rendering), `parser` (the streaming parser, linear in the reply), `calls` (reading one call).
Their public names are re-exported here.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from chatagent.errors import ModelErrorCode, ModelServiceError
from chatagent.llm.fncall.calls import parse_call_text, parse_qwen_args
from chatagent.llm.fncall.formats import (
    CALL_CLOSE,
    CALL_OPEN,
    CHOICE_NAMED,
    CHOICE_REQUIRED,
    FN_ARGS,
    FN_EXIT,
    FN_NAME,
    FN_RESULT,
    FORMATS,
    MAX_STOP_WORDS,
    NOUS_TEMPLATE,
    QWEN_TOOL_DESC,
    QWEN_TOOLS,
    QWEN_USAGE,
    QWEN_USAGE_PARALLEL,
    RESPONSE_OPEN,
    THINK_CLOSE,
    THINK_OPEN,
    NousFormat,
    PromptFormat,
    QwenFormat,
    get_format,
    render_nous_call,
    with_stop_words,
)
from chatagent.llm.fncall.parser import StreamParser
from chatagent.llm.stream_modes import closing_stream
from chatagent.schema import ASSISTANT, Message
from chatagent.schema.fragment import Fragment
from chatagent.schema.stream import collect
from chatagent.utils.jsonlenient import loads_lenient

if TYPE_CHECKING:
    from chatagent.llm.base import BaseChatModel, Settings, Usage

logger = logging.getLogger("chatagent.llm")


def chat(
    model: BaseChatModel,
    msgs: list[Message],
    funcs: list[dict[str, Any]],
    cfg: dict[str, Any],
    settings: Settings,
    usage: Usage | None,
    stream: bool,
) -> Iterator[list[Fragment]]:
    """Answer `msgs` with tools `funcs` through a prompt; yields fragments like a backend's `_chat_stream`.

    `settings.fncall_prompt_type` picks the format, `function_choice` ('auto', 'none', 'required' or a
    tool's name) and `parallel_function_calls` are honoured. The backend is called without functions,
    through the model's retry logic; the format's stop words are added to the user's own `stop`.
    """
    converted, cfg, parser = _prepare(msgs, funcs, cfg, settings)
    return parser.run(model.backend_reply(converted, None, cfg, settings, usage, stream))


async def achat(
    model: BaseChatModel,
    msgs: list[Message],
    funcs: list[dict[str, Any]],
    cfg: dict[str, Any],
    settings: Settings,
    usage: Usage | None,
    stream: bool,
) -> AsyncIterator[list[Fragment]]:
    """`chat` for asyncio."""
    converted, cfg, parser = _prepare(msgs, funcs, cfg, settings)
    async with closing_stream(parser.arun(model.abackend_reply(converted, None, cfg, settings, usage, stream))) as outs:
        async for out in outs:
            yield out


def falling_back(
    model: BaseChatModel,
    native: Iterator[list[Fragment]],
    msgs: list[Message],
    funcs: list[dict[str, Any]],
    cfg: dict[str, Any],
    settings: Settings,
    usage: Usage | None,
    stream: bool,
) -> Iterator[list[Fragment]]:
    """The `native` reply (native tool calling); if the server rejects `tools` (code 'tools_unsupported'), switch
    `model` to prompt-based function calling for good and answer this call that way."""
    try:
        yield from native
    except ModelServiceError as e:
        _give_up_native_tools(model, e)
        settings.fncall_prompt_type = settings.fncall_prompt_type or "nous"
        yield from chat(model, msgs, funcs, cfg, settings, usage, stream)


async def afalling_back(
    model: BaseChatModel,
    native: AsyncIterator[list[Fragment]],
    msgs: list[Message],
    funcs: list[dict[str, Any]],
    cfg: dict[str, Any],
    settings: Settings,
    usage: Usage | None,
    stream: bool,
) -> AsyncIterator[list[Fragment]]:
    """`falling_back` for asyncio."""
    try:
        async with closing_stream(native) as parts:
            async for f in parts:
                yield f
        return
    except ModelServiceError as e:
        _give_up_native_tools(model, e)
    settings.fncall_prompt_type = settings.fncall_prompt_type or "nous"
    async with closing_stream(achat(model, msgs, funcs, cfg, settings, usage, stream)) as parts:
        async for f in parts:
            yield f


def _give_up_native_tools(model: BaseChatModel, e: ModelServiceError) -> None:
    """After `e` from a call with native tools: re-raise it, unless the server rejects tools (then `model` uses
    prompt-based function calling from now on)."""
    if e.code != ModelErrorCode.TOOLS_UNSUPPORTED or e.partial:
        raise e
    logger.warning("%s rejects native tools (%s): using prompt-based function calling", model.model, e.message)
    model.native_tools = False


def _prepare(
    msgs: list[Message], funcs: list[dict[str, Any]], cfg: dict[str, Any], settings: Settings
) -> tuple[list[Message], dict[str, Any], StreamParser]:
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


def parse_reply(
    text: str, fncall_prompt_type: str = "nous", functions: list[dict[str, Any]] | None = None
) -> list[Message]:
    """A whole model reply (raw text) as assistant messages: text first, then one message per call."""
    parser = StreamParser(fncall_prompt_type, functions=functions)
    return collect(parser.run([[Fragment(ASSISTANT, text, index=0)]]))


__all__ = [
    "CALL_CLOSE",
    "CALL_OPEN",
    "CHOICE_NAMED",
    "CHOICE_REQUIRED",
    "FN_ARGS",
    "FN_EXIT",
    "FN_NAME",
    "FN_RESULT",
    "FORMATS",
    "MAX_STOP_WORDS",
    "NOUS_TEMPLATE",
    "QWEN_TOOL_DESC",
    "QWEN_TOOLS",
    "QWEN_USAGE",
    "QWEN_USAGE_PARALLEL",
    "RESPONSE_OPEN",
    "THINK_CLOSE",
    "THINK_OPEN",
    "NousFormat",
    "PromptFormat",
    "QwenFormat",
    "StreamParser",
    "achat",
    "afalling_back",
    "chat",
    "falling_back",
    "get_format",
    "loads_lenient",
    "parse_call_text",
    "parse_qwen_args",
    "parse_reply",
    "render_nous_call",
    "with_stop_words",
]

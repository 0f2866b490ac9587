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

`chatagent.llm.routing` plans a call this way with `prompt_request`: the backend is asked the rewritten request
(`chatagent.llm.request.Backend`), its reply read through the `StreamParser` it gives; a server that turns native
tools down is switched over for good (`give_up_native_tools`).
The work is split by job in `chatagent.llm.fncall`: `formats` (markers, prompts, rendering), `parser` (the
streaming parser, linear in the reply), `calls` (reading one call). Their public names are re-exported here.
"""

from __future__ import annotations

import logging
from typing import Any

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
from chatagent.llm.request import Backend, ModelRequest
from chatagent.schema import ASSISTANT, Message
from chatagent.schema.fragment import Fragment
from chatagent.schema.stream import collect
from chatagent.utils.jsonlenient import loads_lenient

logger = logging.getLogger("chatagent.llm")


def give_up_native_tools(backend: Backend, e: ModelServiceError) -> None:
    """After `e` from a call with native tools: re-raise it, unless the server rejects tools (then `backend` uses
    prompt-based function calling from now on)."""
    if e.code != ModelErrorCode.TOOLS_UNSUPPORTED or e.partial:
        raise e
    logger.warning("%s rejects native tools (%s): using prompt-based function calling", backend.model, e.message)
    backend.native_tools = False


def prompt_request(request: ModelRequest) -> tuple[ModelRequest, StreamParser]:
    """`request` as the backend gets it (the conversation in the prompt format, no functions, the format's stop
    words in the cfg) and the parser for the reply."""
    settings, funcs = request.settings, request.functions or []
    fmt = get_format(settings.fncall_prompt_type or "nous")
    choice = settings.function_choice or "auto"
    use_tools = bool(funcs) and choice != "none"
    converted, continued = fmt.convert(
        request.messages, funcs if use_tools else None, choice, settings.parallel_function_calls
    )
    cfg = with_stop_words(request.cfg, fmt.stop_words) if use_tools and fmt.stop_words else request.cfg
    parser = StreamParser(
        fmt.name,
        parse_calls=use_tools,
        single_call=not settings.parallel_function_calls,
        continued=continued,
        functions=funcs,
    )
    return request.replace(messages=converted, functions=None, cfg=cfg), parser


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
    "get_format",
    "give_up_native_tools",
    "loads_lenient",
    "parse_call_text",
    "parse_qwen_args",
    "parse_reply",
    "prompt_request",
    "render_nous_call",
    "with_stop_words",
]

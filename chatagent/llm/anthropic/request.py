"""The body of a Messages API request (`POST /v1/messages`): system blocks, alternating turns with `tool_use` and
`tool_result` blocks, images and PDFs inline, tools, `tool_choice`, extended thinking, and prompt caching decided
here.

Prompt caching: with `prompt_cache` on (the default), `cache_control` marks the last tool, the system text, and the
conversation's stable prefix: the last block of the newest message (what the next turn will read back) and of the
user turn before it (what this turn reads, however many blocks it added since). That is four breakpoints, the most
the API takes. A `response_format` with a JSON Schema goes as a forced tool whose input is the answer.
"""

from __future__ import annotations

from typing import Any, cast

from chatagent.llm.request_options import RequestOptions, notice
from chatagent.llm.turns import (
    REASONING_STATE,
    Call,
    Turn,
    call_input,
    conversation_turns,
    media_data,
    placeholder,
    system_text,
)
from chatagent.schema import ContentItem, Message

PROVIDER = "anthropic"
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 8192
MIN_THINKING_BUDGET = 1024  # the API's least budget_tokens
RESPONSE_TOOL_DESCRIPTION = "Give the final answer: its input is the answer, matching the schema."
_EPHEMERAL = {"type": "ephemeral"}
_OURS = frozenset({"prompt_cache"})  # cfg keys this backend reads and never sends


def request_body(
    model: str,
    messages: list[Message],
    functions: list[dict[str, Any]] | None,
    opts: RequestOptions,
    *,
    stream: bool,
    prompt_cache: bool,
) -> tuple[dict[str, Any], str | None]:
    """The JSON body, and the name of the response tool when the schema goes as a forced tool (else None)."""
    body: dict[str, Any] = {"model": model}
    thinking = _thinking(opts)
    max_tokens = opts.max_tokens
    if thinking is not None:
        budget = thinking["budget_tokens"]
        if max_tokens is None:
            max_tokens = budget + DEFAULT_MAX_TOKENS
        elif max_tokens <= budget:
            raise ValueError(
                f"generate_cfg['max_tokens'] ({max_tokens}) must be more than the thinking budget ({budget}, from "
                "reasoning_effort) on Anthropic: the answer comes after the thinking"
            )
        body["thinking"] = thinking
    body["max_tokens"] = max_tokens or DEFAULT_MAX_TOKENS
    system = system_text(messages)
    if system:
        block: dict[str, Any] = {"type": "text", "text": system}
        if prompt_cache:
            block["cache_control"] = _EPHEMERAL
        body["system"] = [block]
    body["messages"] = anthropic_messages(conversation_turns(messages), prompt_cache)
    tools: list[dict[str, Any]] = [
        {"name": f["name"], "description": f.get("description") or "", "input_schema": _input_schema(f)}
        for f in functions or ()
    ]
    response_tool = None
    schema = opts.schema()
    if schema is not None:
        if thinking is not None and not tools:
            notice(PROVIDER, "response_format", "goes through the prompt with thinking on (a forced tool is refused)")
        else:
            response_tool = schema[0]
            tools.append({"name": response_tool, "description": RESPONSE_TOOL_DESCRIPTION, "input_schema": schema[1]})
    elif opts.response_format is not None:  # json_object: no schema to force
        notice(PROVIDER, "response_format", "json_object has no native form here: the prompt asks for JSON")
    if tools:
        if prompt_cache:
            tools[-1]["cache_control"] = _EPHEMERAL
        body["tools"] = tools
        choice = _tool_choice(opts, response_tool, bool(functions), thinking is not None)
        if choice is not None:
            body["tool_choice"] = choice
    if opts.temperature is not None:
        if thinking is not None:
            notice(PROVIDER, "temperature", "is not sent with thinking on (the API refuses both)")
        else:
            body["temperature"] = opts.temperature
    if opts.top_p is not None:
        body["top_p"] = opts.top_p
    if opts.top_k is not None:
        body["top_k"] = opts.top_k
    if opts.stop:
        body["stop_sequences"] = opts.stop
    if opts.seed is not None:
        notice(PROVIDER, "seed", "is not sent: the Messages API has no seed")
    if stream:
        body["stream"] = True
    body.update({k: v for k, v in opts.rest.items() if k not in _OURS})
    body.update(opts.extra_body)
    return body, response_tool


def anthropic_messages(turns: list[Turn], prompt_cache: bool) -> list[dict[str, Any]]:
    """The turns as Messages API messages, the stable prefix marked for the cache."""
    out: list[dict[str, Any]] = []
    for turn in turns:
        if turn.role == "assistant":
            blocks = _assistant_blocks(turn)
            if blocks:
                out.append({"role": "assistant", "content": blocks})
            continue
        blocks = [_tool_result(r.call_id, r.content) for r in turn.results]
        blocks += _content_blocks(turn.content)
        if blocks:
            out.append({"role": "user", "content": blocks})
    if prompt_cache and out:
        _mark(out[-1])
        users = [m for m in out[:-1] if m["role"] == "user"]
        if users:
            _mark(users[-1])
    return out


def _mark(message: dict[str, Any]) -> None:
    """`cache_control` on the message's last block that can carry one (thinking blocks cannot)."""
    for block in reversed(cast("list[dict[str, Any]]", message["content"])):
        if block["type"] not in ("thinking", "redacted_thinking"):
            block["cache_control"] = _EPHEMERAL
            return


def _assistant_blocks(turn: Turn) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    state = turn.state
    if state is not None and state.get("provider") == PROVIDER:  # signed thinking goes back as it came
        blocks += [dict(b) for b in cast("list[dict[str, Any]]", state.get("blocks") or [])]
    for part in turn.parts:
        if isinstance(part, Call):
            blocks.append({"type": "tool_use", "id": part.id, "name": part.name, "input": _arguments(part.arguments)})
        elif part.strip():
            blocks.append({"type": "text", "text": part})
    return blocks


def _content_blocks(content: list[ContentItem]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for item in content:
        kind = item.kind
        if kind == "text":
            if item.value.strip():  # the API refuses empty text blocks
                blocks.append({"type": "text", "text": item.value})
        elif kind == "image":
            blocks.append({"type": "image", "source": _source(item.value)})
        elif kind == "file" and _is_pdf(item.value):
            blocks.append({"type": "document", "source": _source(item.value)})
        else:
            blocks.append({"type": "text", "text": placeholder(item)})
    return blocks


def _tool_result(call_id: str, content: str | list[ContentItem]) -> dict[str, Any]:
    if isinstance(content, str):
        return {"type": "tool_result", "tool_use_id": call_id, "content": content or "(no output)"}
    blocks = [b for b in _content_blocks(content) if b["type"] in ("text", "image")]
    return {"type": "tool_result", "tool_use_id": call_id, "content": blocks or "(no output)"}


def _source(value: str) -> dict[str, Any]:
    data = media_data(value)
    if isinstance(data, str):
        return {"type": "url", "url": data}
    return {"type": "base64", "media_type": data[0], "data": data[1]}


def _is_pdf(value: str) -> bool:
    return value.lower().split("?", 1)[0].endswith(".pdf") or value.startswith("data:application/pdf")


def _arguments(arguments: str) -> dict[str, Any]:
    return call_input(arguments)


def _input_schema(f: dict[str, Any]) -> dict[str, Any]:
    schema = f.get("parameters")
    if isinstance(schema, dict) and schema:
        return cast("dict[str, Any]", schema)
    return {"type": "object", "properties": {}}


def _thinking(opts: RequestOptions) -> dict[str, Any] | None:
    budget = opts.thinking_budget()
    if not budget:
        return None
    if budget < MIN_THINKING_BUDGET:
        notice(PROVIDER, "reasoning_effort", f"budget {budget} is below the API's least: {MIN_THINKING_BUDGET} sent")
        budget = MIN_THINKING_BUDGET
    return {"type": "enabled", "budget_tokens": budget}


def _tool_choice(opts: RequestOptions, response_tool: str | None, has_functions: bool, thinking: bool) -> Any:
    """The `tool_choice` field; None for the API's default (auto, parallel calls allowed)."""
    tc = opts.tool_choice
    if response_tool is not None and not has_functions:
        return {"type": "tool", "name": response_tool, "disable_parallel_tool_use": True}
    choice: dict[str, Any]
    if tc.choice == "auto":
        choice = {"type": "auto"}
    elif tc.choice == "none":
        choice = {"type": "none"}
    elif tc.choice == "required":
        choice = {"type": "any"}
    else:
        choice = {"type": "tool", "name": tc.choice}
    if thinking and choice["type"] in ("any", "tool"):
        raise ValueError(
            f"function_choice {tc.choice!r} cannot be honoured on Anthropic with thinking on (reasoning_effort): "
            "the API takes only 'auto' or 'none' then"
        )
    if not tc.parallel and choice["type"] != "none":
        choice["disable_parallel_tool_use"] = True
    return None if choice == {"type": "auto"} else choice


__all__ = ["API_VERSION", "PROVIDER", "REASONING_STATE", "anthropic_messages", "request_body"]

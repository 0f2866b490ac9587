"""The body of a Bedrock Converse / ConverseStream request: `messages` of content blocks (`text`, `image`,
`document`, `toolUse`, `toolResult`, the `reasoningContent` of earlier turns sent back), `system`, `toolConfig`,
`inferenceConfig`, and `additionalModelRequestFields` for what only the model takes (Claude's thinking, `top_k`).

Prompt caching (`prompt_cache`, on by default for the Claude and Nova models, which take it): `cachePoint` blocks
after the tools, the system text, and the conversation's stable prefix (the user turn before the newest, and the
newest), as chatagent decides it for Anthropic. A `response_format` with a JSON Schema goes as a forced tool.
"""

from __future__ import annotations

from typing import Any, cast

from chatagent.llm.request_options import RequestOptions, notice
from chatagent.llm.turns import Call, Turn, call_input, conversation_turns, media_data, placeholder, system_text
from chatagent.schema import ContentItem, Message

PROVIDER = "bedrock"
RESPONSE_TOOL_DESCRIPTION = "Give the final answer: its input is the answer, matching the schema."
_CACHE_POINT = {"cachePoint": {"type": "default"}}
_IMAGE_FORMATS = {"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif", "image/webp": "webp"}
_DOCUMENT_FORMATS = {"application/pdf": "pdf", "text/csv": "csv", "text/plain": "txt", "text/markdown": "md",
                     "text/html": "html"}  # fmt: skip
_OURS = frozenset({"prompt_cache"})


def caches_prompts(model: str) -> bool:
    """Whether the model takes `cachePoint` blocks (Anthropic's Claude and Amazon's Nova on Bedrock)."""
    name = model.lower()
    return "anthropic." in name or "claude" in name or "amazon.nova" in name


def is_claude(model: str) -> bool:
    return "anthropic." in model.lower() or "claude" in model.lower()


def request_body(
    model: str, messages: list[Message], functions: list[dict[str, Any]] | None, opts: RequestOptions, cache: bool
) -> tuple[dict[str, Any], str | None]:
    """The JSON body (the model is in the URL), and the name of the response tool when the schema goes as one."""
    body: dict[str, Any] = {"messages": bedrock_messages(conversation_turns(messages), cache)}
    system = system_text(messages)
    if system:
        body["system"] = [{"text": system}, *([_CACHE_POINT] if cache else [])]
    inference: dict[str, Any] = {}
    for key, value in (("maxTokens", opts.max_tokens), ("temperature", opts.temperature), ("topP", opts.top_p)):
        if value is not None:
            inference[key] = value
    if opts.stop:
        inference["stopSequences"] = opts.stop
    extra: dict[str, Any] = {}
    budget = opts.thinking_budget()
    if budget:
        if is_claude(model):
            extra["thinking"] = {"type": "enabled", "budget_tokens": max(budget, 1024)}
            inference.pop("temperature", None)
        else:
            notice(PROVIDER, "reasoning_effort", f"is sent only to Claude models on Bedrock, not to {model}")
    if opts.top_k is not None:
        if is_claude(model):
            extra["top_k"] = opts.top_k
        else:
            notice(PROVIDER, "top_k", f"is sent only to Claude models on Bedrock, not to {model}")
    if opts.seed is not None:
        notice(PROVIDER, "seed", "is not sent: Converse has no seed")
    tools: list[dict[str, Any]] = [
        {"toolSpec": {"name": f["name"], "description": f.get("description") or f["name"],
                      "inputSchema": {"json": f.get("parameters") or {"type": "object", "properties": {}}}}}
        for f in functions or ()
    ]  # fmt: skip
    response_tool = None
    schema = opts.schema()
    if schema is not None and not extra.get("thinking"):
        response_tool = schema[0]
        tools.append({"toolSpec": {"name": response_tool, "description": RESPONSE_TOOL_DESCRIPTION,
                                   "inputSchema": {"json": schema[1]}}})  # fmt: skip
    elif opts.response_format is not None:
        notice(PROVIDER, "response_format", "goes through the prompt here (no schema to force, or thinking on)")
    if tools:
        config: dict[str, Any] = {"tools": [*tools, *([_CACHE_POINT] if cache else [])]}
        choice = _tool_choice(opts, response_tool, bool(functions))
        if choice is not None:
            config["toolChoice"] = choice
        body["toolConfig"] = config
    if inference:
        body["inferenceConfig"] = inference
    rest = {k: v for k, v in opts.rest.items() if k not in _OURS}
    extra.update(rest.pop("additionalModelRequestFields", None) or {})
    if extra:
        body["additionalModelRequestFields"] = extra
    body.update(rest)
    body.update(opts.extra_body)
    return body, response_tool


def bedrock_messages(turns: list[Turn], cache: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for turn in turns:
        if turn.role == "assistant":
            blocks = _assistant_blocks(turn)
            if blocks:
                out.append({"role": "assistant", "content": blocks})
            continue
        blocks = [
            {"toolResult": {"toolUseId": r.call_id, "content": _result(r.content), "status": "success"}}
            for r in turn.results
        ]
        blocks += _content_blocks(turn.content)
        if blocks:
            out.append({"role": "user", "content": blocks})
    if cache and out:
        cast("list[Any]", out[-1]["content"]).append(dict(_CACHE_POINT))
        users = [m for m in out[:-1] if m["role"] == "user"]
        if users:
            cast("list[Any]", users[-1]["content"]).append(dict(_CACHE_POINT))
    return out


def _assistant_blocks(turn: Turn) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    state = turn.state
    if state is not None and state.get("provider") == PROVIDER:
        blocks += [dict(b) for b in cast("list[dict[str, Any]]", state.get("blocks") or [])]
    for part in turn.parts:
        if isinstance(part, Call):
            blocks.append({"toolUse": {"toolUseId": part.id, "name": part.name, "input": call_input(part.arguments)}})
        elif part.strip():
            blocks.append({"text": part})
    return blocks


def _content_blocks(content: list[ContentItem]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for item in content:
        if item.kind == "text":
            if item.value.strip():
                blocks.append({"text": item.value})
            continue
        data = media_data(item.value) if item.kind in ("image", "file") else None
        if isinstance(data, tuple) and item.kind == "image" and data[0] in _IMAGE_FORMATS:
            blocks.append({"image": {"format": _IMAGE_FORMATS[data[0]], "source": {"bytes": data[1]}}})
        elif isinstance(data, tuple) and item.kind == "file" and data[0] in _DOCUMENT_FORMATS:
            name = "".join(c if c.isalnum() else "-" for c in item.value.rsplit("/", 1)[-1].rsplit(".", 1)[0])[:64]
            blocks.append({"document": {"format": _DOCUMENT_FORMATS[data[0]], "name": name or "document",
                                        "source": {"bytes": data[1]}}})  # fmt: skip
        else:  # a URL, or a kind Converse does not take
            blocks.append({"text": placeholder(item)})
    return blocks


def _result(content: str | list[ContentItem]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": content or "(no output)"}]
    return [b for b in _content_blocks(content) if "text" in b or "image" in b] or [{"text": "(no output)"}]


def _tool_choice(opts: RequestOptions, response_tool: str | None, has_functions: bool) -> dict[str, Any] | None:
    tc = opts.tool_choice
    if response_tool is not None and not has_functions:
        return {"tool": {"name": response_tool}}
    if not tc.parallel:
        notice(PROVIDER, "parallel_tool_calls", "has no Converse setting: the model may still call several at once")
    if tc.choice == "auto":
        return None
    if tc.choice == "required":
        return {"any": {}}
    if tc.choice == "none":
        notice(PROVIDER, "function_choice", "'none' has no Converse form: the tools are offered with 'auto'")
        return None
    return {"tool": {"name": tc.choice}}


__all__ = ["PROVIDER", "bedrock_messages", "caches_prompts", "request_body"]

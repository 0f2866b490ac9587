"""OpenAI's Responses API (`POST /v1/responses`), natively: `{'model_type': 'oai', 'api': 'responses'}`.

    llm = get_chat_model({'model_type': 'oai', 'api': 'responses', 'model': 'gpt-5-mini'})   # OPENAI_API_KEY

The conversation goes as input items (messages, `function_call`, `function_call_output`, and the `reasoning` items
of earlier turns, kept in the assistant message's `extra['reasoning_state']`); the system text as `instructions`.
By default every request is stateless (`store: false`, the reasoning items' `encrypted_content` asked for and sent
back); with generate_cfg `previous_response_id: True` the server keeps the conversation (`store: true`) and each
request sends only what came after the last answer, with that answer's `previous_response_id`.

Settings: `max_tokens` as `max_output_tokens`, `temperature`, `top_p`, `reasoning_effort` as `reasoning.effort`
(with summaries asked for), `response_format` as `text.format`, `tool_choice`, `parallel_tool_calls`; the API has
no `seed`, `stop` or `top_k` (a notice says so). The reply: `chatagent.llm.openai.responses_reply`.
"""

from __future__ import annotations

import os
from typing import Any, cast

from chatagent.llm.http_backend import HTTPCall, HTTPModel, Prompt, StreamReader, json_body, server_url
from chatagent.llm.openai.responses_reply import PROVIDER, ResponsesReader, whole_response
from chatagent.llm.request import Usage
from chatagent.llm.request_options import RequestOptions, notice, request_options, strict_schema
from chatagent.llm.settings import ToolChoice
from chatagent.llm.turns import Call, Turn, conversation_turns, media_data, placeholder, system_text
from chatagent.schema import ContentItem, Message, content_text
from chatagent.utils.keys import clean_api_key

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_OURS = frozenset({"previous_response_id"})  # cfg keys this backend reads itself


class OpenAIResponsesModel(HTTPModel):
    """A model behind the Responses API (see the module docstring); made by `get_chat_model` for
    `{'model_type': 'oai', 'api': 'responses'}`."""

    provider = "OpenAI"
    key_hint = "api_key / OPENAI_API_KEY"
    cfg_keys = frozenset({"api", "base_url", "api_base"})

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        super().__init__(cfg)
        cfg = self.cfg
        if cfg.get("api", "responses") != "responses":
            raise ValueError(f"OpenAIResponsesModel speaks api 'responses', got {cfg['api']!r}")
        server = cfg.get("model_server") or cfg.get("base_url") or cfg.get("api_base")
        self.base_url = server_url(server, ("openai",), os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL)
        self.api_key = clean_api_key(cfg.get("api_key") or os.environ.get("OPENAI_API_KEY"))

    def build_call(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        tool_choice: ToolChoice,
        stream: bool,
    ) -> HTTPCall:
        opts = request_options(cfg, tool_choice)
        chain = cfg.get("previous_response_id") is True
        body = responses_body(self.model, messages, functions, opts, stream=stream, chain=chain)
        headers = {"Content-Type": "application/json", **opts.extra_headers}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        native = opts.schema() is not None
        url = self.base_url + "/responses"
        return HTTPCall(url, headers, json_body(body), opts.timeout, stream, bool(functions), native)

    def stream_reader(self, call: HTTPCall, prompt: Prompt) -> StreamReader:
        return ResponsesReader(self, prompt, call.context)

    def whole_reply(self, call: HTTPCall, body: bytes, usage: Usage | None, prompt: Prompt) -> list[Message]:
        return whole_response(self, body, usage, prompt, call.context)


def responses_body(
    model: str,
    messages: list[Message],
    functions: list[dict[str, Any]] | None,
    opts: RequestOptions,
    *,
    stream: bool,
    chain: bool,
) -> dict[str, Any]:
    """The JSON body of one request (see the module docstring)."""
    body: dict[str, Any] = {"model": model}
    instructions = system_text(messages)
    if instructions:
        body["instructions"] = instructions
    turns = conversation_turns(messages)
    if chain:
        body["store"] = True
        last = max((n for n, t in enumerate(turns) if _response_id(t)), default=None)
        if last is not None:
            body["previous_response_id"] = _response_id(turns[last])
            turns = turns[last + 1 :]
    else:
        body["store"] = False
        body["include"] = ["reasoning.encrypted_content"]
    body["input"] = [item for turn in turns for item in _items(turn)]
    if functions:
        body["tools"] = [
            {"type": "function", "name": f["name"], "description": f.get("description") or "",
             "parameters": f.get("parameters") or {"type": "object", "properties": {}}, "strict": False}
            for f in functions
        ]  # fmt: skip
        tc = opts.tool_choice
        if tc.choice in ("none", "required"):
            body["tool_choice"] = tc.choice
        elif tc.choice != "auto":
            body["tool_choice"] = {"type": "function", "name": tc.choice}
        if not tc.parallel:
            body["parallel_tool_calls"] = False
    if opts.max_tokens is not None:
        body["max_output_tokens"] = opts.max_tokens
    if opts.temperature is not None:
        body["temperature"] = opts.temperature
    if opts.top_p is not None:
        body["top_p"] = opts.top_p
    effort = opts.effort(PROVIDER)
    if effort is not None:
        body["reasoning"] = {"effort": effort, "summary": "auto"} if effort != "none" else {"effort": "none"}
    schema = opts.schema()
    if schema is not None:
        name, spec, strict = schema
        if strict:
            spec = strict_schema(spec)
        body["text"] = {"format": {"type": "json_schema", "name": name, "schema": spec, "strict": strict}}
    elif opts.response_format is not None:
        body["text"] = {"format": {"type": "json_object"}}
    for key, value in (("seed", opts.seed), ("stop", opts.stop), ("top_k", opts.top_k)):
        if value:
            notice(PROVIDER, key, "is not sent: the Responses API has no such setting")
    if stream:
        body["stream"] = True
    body.update({k: v for k, v in opts.rest.items() if k not in _OURS})
    body.update(opts.extra_body)
    return body


def _response_id(turn: Turn) -> str | None:
    state = turn.state
    if turn.role != "assistant" or state is None or state.get("provider") != PROVIDER:
        return None
    rid = state.get("response_id")
    return rid if isinstance(rid, str) else None


def _items(turn: Turn) -> list[dict[str, Any]]:
    if turn.role != "assistant":
        items: list[dict[str, Any]] = [
            {"type": "function_call_output", "call_id": r.call_id, "output": _output(r.content)} for r in turn.results
        ]
        if turn.content:
            items.append({"role": "user", "content": _content(turn.content)})
        return items
    items = []
    state = turn.state
    if state is not None and state.get("provider") == PROVIDER:
        items += [dict(i) for i in cast("list[dict[str, Any]]", state.get("items") or [])]
    for part in turn.parts:
        if isinstance(part, Call):
            items.append({"type": "function_call", "call_id": part.id, "name": part.name, "arguments": part.arguments})
        elif part:
            items.append({"role": "assistant", "content": part})
    return items


def _content(content: list[ContentItem]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for item in content:
        if item.kind == "text":
            parts.append({"type": "input_text", "text": item.value})
        elif item.kind == "image":
            parts.append({"type": "input_image", "image_url": _url(item.value), "detail": "auto"})
        elif item.kind == "file" and item.value.lower().endswith(".pdf"):
            parts.append(
                {"type": "input_file", "filename": os.path.basename(item.value), "file_data": _url(item.value)}
            )
        else:
            parts.append({"type": "input_text", "text": placeholder(item)})
    return parts


def _output(content: str | list[ContentItem]) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(item.value if item.kind == "text" else placeholder(item) for item in content) or content_text(
        content
    )


def _url(value: str) -> str:
    data = media_data(value)
    return data if isinstance(data, str) else f"data:{data[0]};base64,{data[1]}"


__all__ = ["OpenAIResponsesModel", "responses_body"]

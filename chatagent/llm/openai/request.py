"""The request to an OpenAI-compatible `/chat/completions`: its JSON body, built once and sent as built by the sync and
the async path alike (`ChatRequest`, `http_request`), images inlined, and which servers refused `stream_options`
(not sent them again)."""

from __future__ import annotations

import base64
import logging
import mimetypes
import os
import re
from typing import Any, cast

import httpx
import orjson

from chatagent.errors import ModelErrorCode, ModelServiceError
from chatagent.llm.http_pool import request_url
from chatagent.llm.settings import ToolChoice
from chatagent.schema import Message, to_openai
from chatagent.utils import keys

logger = logging.getLogger("chatagent.llm")

_MULTIMODAL = re.compile(
    r"(?<![a-z])vl(?![a-z])|vision|gpt-4o|gpt-4\.1|gpt-5|omni|qvq|llava|pixtral|gemini|claude|internvl|minicpm-v|glm-4v",
    re.IGNORECASE,
)
# servers (by base URL) that refused `stream_options` (older Azure api-versions, some proxies): not sent again
_NO_STREAM_OPTIONS: set[str] = set()
# servers (by base URL) that refused a JSON-schema `response_format`: the prompt alone asks for the schema there
_NO_SCHEMA: set[str] = set()
_SCHEMA_REFUSED = re.compile(r"response_format|json_schema|guided_json|structured output", re.IGNORECASE)
TEXT_ONLY_TOOL_MESSAGES = ("api.openai.com", ".openai.azure.com")  # servers whose tool messages take only text
_USE_CLIENT_DEFAULT = httpx.USE_CLIENT_DEFAULT  # a request without its own timeout: the client's


def looks_multimodal(model: str) -> bool:
    """Whether a model name suggests it takes images (Qwen-VL, GPT-4o, LLaVA, ...)."""
    return bool(_MULTIMODAL.search(model or ""))


def image_url(value: str) -> str:
    """A media item's value (image, audio, video) as a URL the server can read: local files (paths or file://) as
    base64 data URLs."""
    if value.startswith(("http://", "https://", "data:")):
        return value
    path = value[len("file://") :] if value.startswith("file://") else value
    path = os.path.expanduser(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"media file not found: {value!r} (give a local file path, a file:// or an http(s) URL)"
        )
    mime = mimetypes.guess_type(path)[0] or "image/png"
    with open(path, "rb") as f:
        return f"data:{mime};base64,{base64.b64encode(f.read()).decode('ascii')}"


class ChatRequest:
    """One request to `/chat/completions`: its JSON body (built once, sent as built) and what goes beside the body
    (`headers` from generate_cfg's `extra_headers`, `query` from its `extra_query`, `timeout` from its
    `request_timeout`)."""

    __slots__ = ("body", "headers", "query", "timeout")

    def __init__(
        self,
        body: dict[str, Any],
        headers: dict[str, Any] | None = None,
        query: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> None:
        self.body = body
        self.headers = headers
        self.query = query
        self.timeout = timeout


def chat_request(
    model: str,
    endpoint: str,
    messages: list[Message],
    functions: list[dict[str, Any]] | None,
    cfg: dict[str, Any],
    tool_choice: ToolChoice,
    stream: bool,
) -> ChatRequest:
    """The request for `model` on the server `endpoint`: every key of `cfg` in the JSON body (generate_cfg's own
    `extra_body` merged in last: it has the last word) but the transport's (`request_timeout`, `extra_headers`,
    `extra_query`); with `functions`, `tool_choice` as the request's `tool_choice` and `parallel_tool_calls`."""
    # media reach here only for a model that takes them (`_prepare` left placeholders for the others); OpenAI's own
    # API (and Azure's) takes only text in a tool message: a tool's images follow in a user message there
    tool_media = "user" if any(host in endpoint for host in TEXT_ONLY_TOOL_MESSAGES) else "tool"
    messages_out = to_openai(messages, image_url, placeholder_kinds=("file",), tool_media=tool_media)
    body: dict[str, Any] = {"model": model, "messages": messages_out}
    request = ChatRequest(body)
    if functions:
        body["tools"] = [{"type": "function", "function": f} for f in functions]
    if stream:
        body["stream"] = True
        if endpoint not in _NO_STREAM_OPTIONS:
            body["stream_options"] = {"include_usage": True}
    given_body: dict[str, Any] = {}  # generate_cfg's own extra_body: it has the last word
    for key, value in cfg.items():
        if key in ("stream", "messages"):
            logger.warning("generate_cfg[%r] is ignored: chatagent sets it", key)
        elif key == "request_timeout":
            request.timeout = value
        elif key == "extra_headers":
            request.headers = keys.clean_headers(value)
        elif key == "extra_query":
            request.query = value
        elif key == "extra_body":
            given_body.update(value or {})
        else:  # every other key is a field of the body (temperature, top_k, enable_thinking, ...)
            body[key] = value
    if functions:  # generate_cfg's own `tool_choice` / `parallel_tool_calls`, if given, are sent as given
        choice = tool_choice.request_field()
        if choice is not None:
            body.setdefault("tool_choice", choice)
        if not tool_choice.parallel:
            body.setdefault("parallel_tool_calls", False)
    body.update(given_body)
    if endpoint in _NO_SCHEMA and sends_schema(request):
        del body["response_format"]
    return request


def sends_schema(request: ChatRequest) -> bool:
    """Whether the request asks the server to enforce a JSON schema (`response_format` of type json_schema: OpenAI's
    strict structured output, vLLM's and SGLang's guided decoding through the same field)."""
    fmt: Any = request.body.get("response_format")
    return isinstance(fmt, dict) and cast("dict[str, Any]", fmt).get("type") == "json_schema"


def drop_refused(e: ModelServiceError, request: ChatRequest, endpoint: str) -> None:
    """After `e`: re-raise it, unless the server refused `stream_options` or a JSON-schema `response_format`; then
    remember that (for every model on this server, as with tools: detected once) and take it out of the request to
    ask again. Without the schema the prompt still asks for it, and the answer is validated as ever."""
    if e.code == ModelErrorCode.STREAM_OPTIONS_UNSUPPORTED and "stream_options" in request.body:
        logger.warning("%s rejects stream_options (%s): usage will be estimated", endpoint, e.message)
        _NO_STREAM_OPTIONS.add(endpoint)
        del request.body["stream_options"]
    elif e.code in (400, 422) and sends_schema(request) and _SCHEMA_REFUSED.search(e.message):
        logger.warning(
            "%s rejects a JSON-schema response_format (%s): the prompt alone asks for it", endpoint, e.message
        )
        _NO_SCHEMA.add(endpoint)
        del request.body["response_format"]
    else:
        raise e


def http_request(client: Any, request: ChatRequest, url: str, api_key: str | None) -> Any:
    """The `httpx.Request` on `client` (sync or async) that POSTs `request` to `url`: its body encoded once by
    orjson, the key as a bearer token (the client's own headers, an Azure `api-key`, come with the client)."""
    headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
    if request.headers:
        headers.update(request.headers)
    timeout = request.timeout if request.timeout is not None else _USE_CLIENT_DEFAULT
    return client.build_request(
        "POST",
        request_url(url),
        content=orjson.dumps(request.body),
        headers=headers,
        params=request.query,
        timeout=timeout,
    )


__all__ = [
    "ChatRequest", "chat_request", "drop_refused", "http_request", "image_url", "looks_multimodal", "sends_schema",
]  # fmt: skip

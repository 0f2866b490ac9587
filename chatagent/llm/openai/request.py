"""The request to an OpenAI-compatible `/chat/completions`: its keyword arguments (for the openai SDK) or its HTTP
request (for the async path), images inlined, and which servers refused `stream_options` (not sent them again)."""

from __future__ import annotations

import base64
import inspect
import logging
import mimetypes
import os
import re
from typing import Any

import orjson

from chatagent.errors import ModelErrorCode, ModelServiceError
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
_params: frozenset[str] | None = None  # chat.completions.create's, read once
TEXT_ONLY_TOOL_MESSAGES = ("api.openai.com", ".openai.azure.com")  # servers whose tool messages take only text
TRANSPORT_OPTIONS = frozenset({"extra_headers", "extra_query", "timeout"})  # what `http_request` takes out of the body


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


def request_kwargs(
    model: str,
    endpoint: str,
    messages: list[Message],
    functions: list[dict[str, Any]] | None,
    cfg: dict[str, Any],
    tool_choice: ToolChoice,
    stream: bool,
    known: frozenset[str],
) -> dict[str, Any]:
    """The keyword arguments of `chat.completions.create` for `model` on the server `endpoint`: keys of `cfg` in
    `known` as arguments, the others in `extra_body` (generate_cfg's own `extra_body` has the last word); with
    `functions`, `tool_choice` as the request's `tool_choice` and `parallel_tool_calls`."""
    # media reach here only for a model that takes them (`_prepare` left placeholders for the others); OpenAI's own
    # API (and Azure's) takes only text in a tool message: a tool's images follow in a user message there
    tool_media = "user" if any(host in endpoint for host in TEXT_ONLY_TOOL_MESSAGES) else "tool"
    messages_out = to_openai(messages, image_url, placeholder_kinds=("file",), tool_media=tool_media)
    kwargs: dict[str, Any] = {"model": model, "messages": messages_out}
    if functions:
        kwargs["tools"] = [{"type": "function", "function": f} for f in functions]
    if stream:
        kwargs["stream"] = True
        if endpoint not in _NO_STREAM_OPTIONS:
            kwargs["stream_options"] = {"include_usage": True}
    extra_body: dict[str, Any] = {}
    given_body: dict[str, Any] = {}  # generate_cfg's own extra_body: it has the last word
    for key, value in cfg.items():
        if key in ("stream", "messages"):
            logger.warning("generate_cfg[%r] is ignored: chatagent sets it", key)
        elif key == "request_timeout":
            kwargs["timeout"] = value
        elif key == "extra_headers":
            kwargs["extra_headers"] = keys.clean_headers(value)
        elif key == "extra_body":
            given_body.update(value or {})
        elif key in known:
            kwargs[key] = value
        else:  # a key the SDK does not know (top_k, repetition_penalty, enable_thinking, ...): into the body
            extra_body[key] = value
    if functions:  # generate_cfg's own `tool_choice` / `parallel_tool_calls`, if given, are sent as given
        choice = tool_choice.request_field()
        if choice is not None:
            kwargs.setdefault("tool_choice", choice)
        if not tool_choice.parallel:
            kwargs.setdefault("parallel_tool_calls", False)
    extra_body.update(given_body)
    if extra_body:
        kwargs["extra_body"] = extra_body
    return kwargs


def sdk_params(client: Any) -> frozenset[str]:
    """Names `chat.completions.create` takes (known request fields go as arguments, the rest in extra_body)."""
    global _params
    if _params is None:
        _params = frozenset(inspect.signature(client.chat.completions.create).parameters) - {"stream", "messages"}
    return _params


def drop_stream_options(e: ModelServiceError, kwargs: dict[str, Any], endpoint: str) -> None:
    """After `e`: re-raise it, unless the server refused `stream_options`; then remember that (for every model
    on this server, as with tools) and take it out of `kwargs` to ask again."""
    if e.code != ModelErrorCode.STREAM_OPTIONS_UNSUPPORTED or "stream_options" not in kwargs:
        raise e
    logger.warning("%s rejects stream_options (%s): usage will be estimated", endpoint, e.message)
    _NO_STREAM_OPTIONS.add(endpoint)
    del kwargs["stream_options"]


def http_request(client: Any, kwargs: dict[str, Any], api_key: str | None, base_url: str | None) -> Any:
    """The `httpx.Request` on `client` for the keyword arguments of `request_kwargs` (made with
    `TRANSPORT_OPTIONS` known): every key but the transport options in the JSON body."""
    import httpx

    kwargs = dict(kwargs)
    timeout = kwargs.pop("timeout", None)
    headers = {
        "Authorization": f"Bearer {api_key}",
        **(keys.clean_headers(kwargs.pop("extra_headers", None)) or {}),
    }
    query = kwargs.pop("extra_query", None)
    extra_body: dict[str, Any] = kwargs.pop("extra_body", None) or {}
    body = {**kwargs, **extra_body}
    url = (base_url or "https://api.openai.com/v1") + "/chat/completions"
    headers["Content-Type"] = "application/json"
    return client.build_request(
        "POST", url, content=orjson.dumps(body), headers=headers, params=query,
        timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT,
    )  # fmt: skip

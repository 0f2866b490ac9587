"""The part every native HTTP backend shares (Anthropic, Gemini, Bedrock, the Responses API): its requests go through
`chatagent.llm.http_transport` (the shared clients, the stream fed chunk by chunk to the protocol's reader, HTTP
failures as `ModelServiceError`, retryable where a retry may help).

A backend says how to build its request (`build_call`), how to read a stream (`stream_reader`: bytes in, fragment
lists out) and a whole answer (`whole_reply`), and how its server reports errors (`status_error`); signing
(Bedrock's SigV4) is a hook. No SDK runs on the hot path: the body is bytes from orjson, the events are parsed as
they arrive.
"""

from __future__ import annotations

from typing import Any, ClassVar, cast

# imported with the backend, in the thread that makes the model (see chatagent.llm.openai.chat)
import httpx
import orjson

from chatagent.errors import ModelErrorCode, ModelServiceError
from chatagent.llm.http_errors import error_body, error_from_status, snippet
from chatagent.llm.http_pool import request_url
from chatagent.llm.http_transport import HTTPCall, Prompt, StreamReader, Transported
from chatagent.llm.request import Usage
from chatagent.schema.fragment import Fragment, fragment


class HTTPModel(Transported):
    """A model behind a provider's own HTTP API (see the module docstring). Subclasses set `provider` (its name in
    messages), `stream_type` (the content type of a streamed answer) and `key_hint` (where the key comes from)."""

    provider: ClassVar[str] = "the model server"
    stream_type: ClassVar[str] = "text/event-stream"
    key_hint: ClassVar[str] = "api_key"
    support_multimodal_input = True
    #: whether a json_schema `response_format` is enforced by the server (chatagent.plugins.structured sends it)
    native_structured_output = True

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        super().__init__(cfg)
        self.base_url = ""  # set by the subclass

    # ---- what a protocol implements besides build_call, stream_reader and whole_reply ------------------

    def stream_reader(self, call: HTTPCall, prompt: Prompt) -> StreamReader:
        raise NotImplementedError

    def sign(self, call: HTTPCall) -> None:
        """Add what authenticates `call` when it is not a plain header (Bedrock's SigV4 signs the body)."""

    def status_error(self, status: int, headers: Any, body: bytes, has_tools: bool) -> ModelServiceError:
        """The ModelServiceError for an HTTP error from this server (never TOOLS_UNSUPPORTED: a native API takes tools,
        so an error that names them is the request's, not a server without tools)."""
        return error_from_status(
            status, _Headers(headers), error_body(body), False, where=self.endpoint(), model=self.model,
            api_key=self.api_key, key_hint=self.key_hint,
        )  # fmt: skip

    def endpoint(self) -> str:
        """The server, as messages name it."""
        return self.base_url or self.provider

    # ---- the transport's protocol ------------------------------------------------------------------------

    def pool(self) -> tuple[str, dict[str, Any]]:
        return self.base_url, {}

    def http_request(self, client: httpx.Client | httpx.AsyncClient, call: HTTPCall) -> httpx.Request:
        self.sign(call)
        timeout = httpx.Timeout(call.timeout) if call.timeout is not None else httpx.USE_CLIENT_DEFAULT
        return client.build_request(
            "POST", request_url(call.url), content=call.body, headers=call.headers, timeout=timeout
        )

    def refused(self, call: HTTPCall, response: httpx.Response, body: bytes) -> None:
        raise self.status_error(response.status_code, response.headers, body, call.has_tools)

    def reader_for(self, call: HTTPCall, headers: httpx.Headers, prompt: Prompt) -> StreamReader | None:
        return self.stream_reader(call, prompt) if self.stream_type in headers.get("content-type", "") else None

    def unstreamed(
        self, call: HTTPCall, headers: httpx.Headers, body: bytes, usage: Usage | None, prompt: Prompt
    ) -> list[list[Fragment]]:
        """A streaming request answered without a stream: a whole JSON answer (some gateways), else junk."""
        ctype = headers.get("content-type", "")
        if "json" in ctype:
            reply = self.whole_reply(call, body, usage, prompt)
            return [[fragment(m, i) for i, m in enumerate(reply)]]
        raise ModelServiceError(
            ModelErrorCode.BAD_RESPONSE,
            f"{self.endpoint()} answered {ctype or 'no content type'}, not a stream "
            f"(is model_server the API's base URL?): {snippet(body)}",
        )


def server_url(server: Any, names: tuple[str, ...], default: str) -> str:
    """The base URL a backend calls: `server` if it is a URL, `default` when it is empty or one of the backend's own
    `names`; ValueError naming them for anything else (refused when the model is built, not at its first call)."""
    given = str(server or "").strip()
    if not given or given.lower() in names:
        return default.rstrip("/")
    if given.startswith(("http://", "https://")):
        return given.rstrip("/")
    raise ValueError(
        f"model_server {given!r} is neither a URL (http:// or https://) nor {' or '.join(map(repr, names))}"
    )


def json_body(obj: Any) -> bytes:
    """A request body as JSON bytes."""
    return orjson.dumps(obj)


def loads(data: bytes, where: str) -> Any:
    """A JSON answer or event; BAD_RESPONSE (retryable) if it is not JSON."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        raise ModelServiceError(
            ModelErrorCode.BAD_RESPONSE, f"malformed answer from {where}: {snippet(data)}", retryable=True
        ) from None


def as_object(value: Any) -> dict[str, Any]:
    """`value` if it is a JSON object, else an empty one (for reading fields a server may leave out)."""
    return cast("dict[str, Any]", value) if isinstance(value, dict) else {}


class _Headers:
    """httpx's headers as `error_from_status` reads a response (`response.headers.get`)."""

    __slots__ = ("headers",)

    def __init__(self, headers: Any) -> None:
        self.headers = headers


__all__ = ["HTTPCall", "HTTPModel", "Prompt", "StreamReader", "as_object", "json_body", "loads", "server_url"]

"""The part every native HTTP backend shares (Anthropic, Gemini, Bedrock, the Responses API): one httpx client per
model for the synchronous path, the shared async client of `http_pool` for asyncio, the streamed body fed chunk by
chunk to the protocol's reader, and HTTP failures as `ModelServiceError` (retryable where a retry may help).

A backend says how to build its request (`build_call`), how to read a stream (`stream_reader`: bytes in, fragment
lists out) and a whole answer (`whole_reply`), and how its server reports errors (`status_error`); signing
(Bedrock's SigV4) is a hook. No SDK runs on the hot path: the body is bytes from orjson, the events are parsed as
they arrive.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, cast

# imported with the backend, in the thread that makes the model (see chatagent.llm.openai.chat)
import httpx
import orjson

from chatagent.errors import ModelErrorCode, ModelServiceError
from chatagent.llm.base import DEFAULT_TOOL_CHOICE, BaseChatModel, ToolChoice
from chatagent.llm.http_pool import no_cookies, shared_client
from chatagent.llm.openai.errors import broken_body, error_body, error_from_status, no_answer, snippet, unreachable
from chatagent.llm.request import Usage
from chatagent.schema import Message
from chatagent.schema.fragment import Fragment, fragment

Prompt = tuple[list[Message], "list[dict[str, Any]] | None"]  # what a request asked: the messages and the functions


@dataclass(slots=True)
class HTTPCall:
    """One request: where it goes, its headers and JSON body (bytes), its timeout, whether it streams."""

    url: str
    headers: dict[str, str]
    body: bytes
    timeout: float | None
    stream: bool
    has_tools: bool = False
    context: Any = None  # what the protocol's reader needs to know of the request (its own)


class StreamReader(Protocol):
    """A protocol's streamed reply, read as the bytes arrive: `feed` gives the fragment lists a chunk completes,
    `finish` what the end of the body amounts to (the rest, the usage added to `usage`, or the error)."""

    def feed(self, chunk: bytes) -> list[list[Fragment]]: ...

    def finish(self, usage: Usage | None) -> list[list[Fragment]]: ...


class HTTPModel(BaseChatModel):
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
        self._client: httpx.Client | None = None
        self._client_lock = threading.Lock()

    # ---- what a protocol implements --------------------------------------------------------------------

    def build_call(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        tool_choice: ToolChoice,
        stream: bool,
    ) -> HTTPCall:
        raise NotImplementedError

    def stream_reader(self, call: HTTPCall, prompt: Prompt) -> StreamReader:
        raise NotImplementedError

    def whole_reply(self, call: HTTPCall, body: bytes, usage: Usage | None, prompt: Prompt) -> list[Message]:
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

    # ---- synchronous ---------------------------------------------------------------------------------

    @property
    def client(self) -> httpx.Client:
        """This model's HTTP client (made on first use; its connections are reused, it keeps no cookies)."""
        if self._client is None:
            with self._client_lock:
                if self._client is None:
                    self._client = httpx.Client(timeout=httpx.Timeout(600.0, connect=5.0), cookies=no_cookies())
        return self._client

    def _chat_stream(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        usage: Usage | None,
        *,
        tool_choice: ToolChoice = DEFAULT_TOOL_CHOICE,
    ) -> Iterator[list[Fragment]]:
        call = self.build_call(messages, functions, cfg, tool_choice, stream=True)
        response = self._send(call)
        try:
            prompt = (messages, functions)
            if self.stream_type not in response.headers.get("content-type", ""):
                yield from self._not_a_stream(call, response.headers, self._read(response), usage, prompt)
                return
            reader = self.stream_reader(call, prompt)
            feed = reader.feed
            try:
                for chunk in response.iter_bytes():
                    yield from feed(chunk)
            except httpx.HTTPError as e:
                raise broken_body(self.endpoint(), e, self.api_key) from None
            yield from reader.finish(usage)
        finally:
            response.close()

    def _chat_once(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        usage: Usage | None,
        *,
        tool_choice: ToolChoice = DEFAULT_TOOL_CHOICE,
    ) -> list[Message]:
        call = self.build_call(messages, functions, cfg, tool_choice, stream=False)
        response = self._send(call)
        try:
            body = self._read(response)
        finally:
            response.close()
        return self.whole_reply(call, body, usage, (messages, functions))

    def _send(self, call: HTTPCall) -> httpx.Response:
        self.sign(call)
        client = self.client
        request = client.build_request(
            "POST", call.url, content=call.body, headers=call.headers, timeout=_timeout(call)
        )
        try:
            response = client.send(request, stream=True)
        except httpx.TimeoutException:
            raise no_answer(self.endpoint()) from None
        except httpx.HTTPError as e:
            raise unreachable(self.endpoint(), e, self.api_key) from None
        if response.status_code >= 400:
            try:
                data = self._read(response)
            finally:
                response.close()
            raise self.status_error(response.status_code, response.headers, data, call.has_tools)
        return response

    def _read(self, response: httpx.Response) -> bytes:
        try:
            return response.read()
        except httpx.HTTPError as e:
            raise broken_body(self.endpoint(), e, self.api_key) from None

    # ---- asyncio ---------------------------------------------------------------------------------------

    async def _achat_stream(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        usage: Usage | None,
        *,
        tool_choice: ToolChoice = DEFAULT_TOOL_CHOICE,
    ) -> AsyncIterator[list[Fragment]]:
        call = self.build_call(messages, functions, cfg, tool_choice, stream=True)
        response = await self._asend(call)
        try:
            prompt = (messages, functions)
            if self.stream_type not in response.headers.get("content-type", ""):
                for out in self._not_a_stream(call, response.headers, await self._aread(response), usage, prompt):
                    yield out
                return
            reader = self.stream_reader(call, prompt)
            feed = reader.feed
            try:
                async for chunk in response.aiter_bytes():
                    for out in feed(chunk):
                        yield out
            except httpx.HTTPError as e:
                raise broken_body(self.endpoint(), e, self.api_key) from None
            for out in reader.finish(usage):
                yield out
        finally:
            await response.aclose()

    async def _achat_once(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        usage: Usage | None,
        *,
        tool_choice: ToolChoice = DEFAULT_TOOL_CHOICE,
    ) -> list[Message]:
        call = self.build_call(messages, functions, cfg, tool_choice, stream=False)
        response = await self._asend(call)
        try:
            body = await self._aread(response)
        finally:
            await response.aclose()
        return self.whole_reply(call, body, usage, (messages, functions))

    async def _asend(self, call: HTTPCall) -> httpx.Response:
        self.sign(call)
        client = await shared_client(self.base_url, {})
        request = client.build_request(
            "POST", call.url, content=call.body, headers=call.headers, timeout=_timeout(call)
        )
        try:
            response = await client.send(request, stream=True)
        except httpx.TimeoutException:
            raise no_answer(self.endpoint()) from None
        except httpx.HTTPError as e:
            raise unreachable(self.endpoint(), e, self.api_key) from None
        if response.status_code >= 400:
            try:
                data = await self._aread(response)
            finally:
                await response.aclose()
            raise self.status_error(response.status_code, response.headers, data, call.has_tools)
        return response

    async def _aread(self, response: httpx.Response) -> bytes:
        try:
            return await response.aread()
        except httpx.HTTPError as e:
            raise broken_body(self.endpoint(), e, self.api_key) from None

    # ---- shared --------------------------------------------------------------------------------------

    def _not_a_stream(
        self, call: HTTPCall, headers: Any, body: bytes, usage: Usage | None, prompt: Prompt
    ) -> Iterator[list[Fragment]]:
        """A streaming request answered without a stream: a whole JSON answer (some gateways), else junk."""
        ctype = headers.get("content-type", "")
        if "json" in ctype:
            reply = self.whole_reply(call, body, usage, prompt)
            yield [fragment(m, i) for i, m in enumerate(reply)]
            return
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


def _timeout(call: HTTPCall) -> Any:
    return httpx.Timeout(call.timeout) if call.timeout is not None else httpx.USE_CLIENT_DEFAULT


class _Headers:
    """httpx's headers as `error_from_status` reads a response (`response.headers.get`)."""

    __slots__ = ("headers",)

    def __init__(self, headers: Any) -> None:
        self.headers = headers


__all__ = ["HTTPCall", "HTTPModel", "Prompt", "StreamReader", "as_object", "json_body", "loads", "server_url"]

"""Every OpenAI-compatible chat server: OpenAI, vLLM, Ollama, llama.cpp server, SGLang, DashScope's compatible mode.

    llm = get_chat_model({'model': 'Qwen2.5-7B-Instruct', 'model_server': 'http://127.0.0.1:8000/v1',
                          'api_key': 'EMPTY', 'generate_cfg': {'temperature': 0.2, 'extra_body': {'top_k': 20}}})

The request goes through the openai SDK (one client per model, so connections are reused; the SDK's own
retries are off because BaseChatModel retries); the async path posts it with httpx and never imports the SDK, on
a client shared by every model calling the same server on the same event loop (`http_pool.shared_client`).
The streamed answer is read from the raw HTTP response and parsed with orjson, event by event: no pydantic
object per chunk. The parts: the request (`request`), the reply (`reply`, over `chatagent.llm.sse`), the
errors (`errors`); this module sends, reads and retries without `stream_options` when a server refuses it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

# The HTTP stack is imported with the backend, in the thread that makes the model: imported first by threads and
# tasks calling at once (the SDK in one, the async pool in another), CPython's import locks could hand one of them
# a half-initialised httpx ("partially initialized module 'httpx' has no attribute 'Timeout'").
import httpx

from chatagent.errors import ModelServiceError
from chatagent.llm.base import DEFAULT_TOOL_CHOICE, BaseChatModel, ToolChoice, Usage
from chatagent.llm.openai.errors import (
    broken_body,
    error_body,
    error_from_status,
    is_http_error,
    no_answer,
    unreachable,
)
from chatagent.llm.openai.reply import Prompt, ReplyReader, non_sse_reply, parse_completion
from chatagent.llm.openai.request import (
    TRANSPORT_OPTIONS,
    drop_stream_options,
    http_request,
    image_url,
    looks_multimodal,
    request_kwargs,
    sdk_params,
)
from chatagent.llm.registry import register_llm
from chatagent.llm.sse import SSESplitter, sse_data
from chatagent.schema import Message
from chatagent.schema.fragment import Fragment
from chatagent.utils.keys import clean_api_key, remember_endpoint

__all__ = ["OpenAICompatModel", "image_url", "looks_multimodal"]


@register_llm("oai")
class OpenAICompatModel(BaseChatModel):
    """A model behind an OpenAI-compatible `/chat/completions` endpoint.

    cfg: `model`; `model_server` (the base URL, e.g. `http://127.0.0.1:8000/v1`; missing or 'openai' means
    `OPENAI_BASE_URL` or api.openai.com); `api_key` (else `OPENAI_API_KEY`, else 'EMPTY' for local servers);
    `multimodal` (else guessed from the model name); `generate_cfg`: every key but the framework's goes
    into the request (`temperature`, `max_tokens`, `stop`, `seed`, `extra_body`, `extra_headers`, and keys
    the SDK does not know, such as vLLM's `top_k`, are sent in the JSON body); `request_timeout` (seconds)
    is the connect and read timeout.
    """

    cfg_keys = frozenset({"base_url", "api_base"})  # other names of model_server

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        super().__init__(cfg)
        cfg = self.cfg
        server = str(cfg.get("model_server") or cfg.get("base_url") or cfg.get("api_base") or "").strip()
        if not server or server.lower() == "openai":
            server = os.environ.get("OPENAI_BASE_URL", "")
        self.base_url: str | None = server.rstrip("/") or None
        remember_endpoint(self.endpoint())  # $OPENAI_BASE_URL or api.openai.com too: never named to a client
        self.api_key = clean_api_key(cfg.get("api_key") or os.environ.get("OPENAI_API_KEY")) or "EMPTY"
        if "multimodal" not in cfg:
            self.support_multimodal_input = looks_multimodal(self.model)
        self._client: Any = None
        self._client_lock = threading.Lock()

    @property
    def client(self) -> Any:
        """The openai.OpenAI client of this model (made on first use)."""
        if self._client is None:
            with self._client_lock:
                if self._client is None:
                    import openai

                    options = self._client_options(openai)
                    self._client = openai.OpenAI(api_key=self.api_key, base_url=self.base_url, max_retries=0, **options)
        return self._client

    def _client_options(self, openai: Any) -> dict[str, Any]:
        """Extra keyword arguments for `openai.OpenAI` (subclasses: headers, an own HTTP client)."""
        return {}

    async def _aclient(self) -> Any:
        """The `httpx.AsyncClient` on the running event loop that every model calling this server with the same
        options shares (a client cannot move between loops); built off the loop the first time."""
        from chatagent.llm.http_pool import shared_client  # httpx: on the first async call

        return await shared_client(self.base_url or "https://api.openai.com/v1", self._aclient_options())

    def _aclient_options(self) -> dict[str, Any]:
        """Extra keyword arguments for the `httpx.AsyncClient` of the async path (subclasses: headers, no proxy)."""
        return {}

    # ---- requests ------------------------------------------------------------------------------------

    def _request(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        tool_choice: ToolChoice,
        stream: bool,
        aio: bool = False,
    ) -> dict[str, Any]:
        """The keyword arguments of `chat.completions.create` (`aio`: for `_asend`, which puts every key but the
        transport options into the JSON body, so that the async path never imports the openai SDK)."""
        known = TRANSPORT_OPTIONS if aio else sdk_params(self.client)
        return request_kwargs(self.model, self.endpoint(), messages, functions, cfg, tool_choice, stream, known)

    def _send(self, kwargs: dict[str, Any], has_tools: bool) -> Any:
        """POST the request; the raw (unread when streaming) httpx response. Errors as ModelServiceError."""
        import openai

        try:
            return self.client.chat.completions.with_raw_response.create(**kwargs).http_response
        except openai.APIStatusError as e:
            raise self.status_error(e.status_code, e.response, e.body, has_tools) from None
        except openai.APITimeoutError:
            raise no_answer(self.endpoint()) from None
        except openai.APIConnectionError as e:
            raise unreachable(self.endpoint(), e.__cause__ or e, self.api_key) from None

    def endpoint(self) -> str:
        """The server, as messages name it: the base URL, or api.openai.com."""
        return self.base_url or "api.openai.com"

    def status_error(self, status: int, response: Any, body: Any, has_tools: bool) -> ModelServiceError:
        """The ModelServiceError for an HTTP error (or an error object in a 200 response) from this server."""
        return error_from_status(
            status, response, body, has_tools, where=self.endpoint(), model=self.model, api_key=self.api_key
        )

    # ---- streaming -----------------------------------------------------------------------------------

    def _chat_stream(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        usage: Usage | None,
        *,
        tool_choice: ToolChoice = DEFAULT_TOOL_CHOICE,
    ) -> Iterator[list[Fragment]]:
        kwargs = self._request(messages, functions, cfg, tool_choice, stream=True)
        try:
            response = self._send(kwargs, bool(functions))
        except ModelServiceError as e:
            drop_stream_options(e, kwargs, self.endpoint())
            response = self._send(kwargs, bool(functions))
        try:
            yield from self._read_stream(response, usage, (messages, functions))
        finally:
            response.close()

    def _read_stream(self, response: Any, usage: Usage | None, prompt: Prompt) -> Iterator[list[Fragment]]:
        ctype = response.headers.get("content-type", "")
        if "event-stream" not in ctype:
            yield from non_sse_reply(self, self._read_body(response), ctype, usage, prompt)
            return
        reader = ReplyReader(self, prompt)
        event = reader.event
        try:
            for data in sse_data(response.iter_bytes()):
                out = event(data)
                if out is not None:
                    yield out
        except Exception as e:
            if not is_http_error(e):
                raise
            raise broken_body(self.endpoint(), e, self.api_key) from None
        yield from reader.finish(usage)

    def _read_body(self, response: Any) -> bytes:
        """The whole response body; an httpx failure becomes a retryable ModelServiceError."""
        try:
            return response.read()
        except Exception as e:
            if not is_http_error(e):
                raise
            raise broken_body(self.endpoint(), e, self.api_key) from None

    # ---- non-streaming -------------------------------------------------------------------------------

    def _chat_once(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        usage: Usage | None,
        *,
        tool_choice: ToolChoice = DEFAULT_TOOL_CHOICE,
    ) -> list[Message]:
        kwargs = self._request(messages, functions, cfg, tool_choice, stream=False)
        response = self._send(kwargs, bool(functions))
        try:
            body = self._read_body(response)
        finally:
            response.close()
        return parse_completion(self, body, usage, (messages, functions))

    # ---- asyncio: the same request and parsing over httpx.AsyncClient ------------------------------------

    async def _achat_stream(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        usage: Usage | None,
        *,
        tool_choice: ToolChoice = DEFAULT_TOOL_CHOICE,
    ) -> AsyncIterator[list[Fragment]]:
        kwargs = self._request(messages, functions, cfg, tool_choice, stream=True, aio=True)
        prompt = (messages, functions)
        try:
            response = await self._asend(kwargs, bool(functions))
        except ModelServiceError as e:
            drop_stream_options(e, kwargs, self.endpoint())
            response = await self._asend(kwargs, bool(functions))
        try:
            ctype = response.headers.get("content-type", "")
            if "event-stream" not in ctype:
                for out in non_sse_reply(self, await self._aread_body(response), ctype, usage, prompt):
                    yield out
                return
            reader = ReplyReader(self, prompt)
            event = reader.event
            sse = SSESplitter()
            try:
                async for chunk in response.aiter_bytes():
                    for data in sse.feed(chunk):
                        out = event(data)
                        if out is not None:
                            yield out
            except Exception as e:
                if not is_http_error(e):
                    raise
                raise broken_body(self.endpoint(), e, self.api_key) from None
            for data in sse.end():
                out = event(data)
                if out is not None:
                    yield out
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
        kwargs = self._request(messages, functions, cfg, tool_choice, stream=False, aio=True)
        response = await self._asend(kwargs, bool(functions))
        try:
            body = await self._aread_body(response)
        finally:
            await response.aclose()
        return parse_completion(self, body, usage, (messages, functions))

    async def _asend(self, kwargs: dict[str, Any], has_tools: bool) -> Any:
        """POST the request on the async client; the response, its body unread. Errors as ModelServiceError."""
        client = await self._aclient()
        request = http_request(client, kwargs, self.api_key, self.base_url)
        try:
            response = await client.send(request, stream=True)
        except httpx.TimeoutException:
            raise no_answer(self.endpoint()) from None
        except httpx.HTTPError as e:
            raise unreachable(self.endpoint(), e, self.api_key) from None
        if response.status_code >= 400:
            try:
                data = await self._aread_body(response)
            finally:
                await response.aclose()
            raise self.status_error(response.status_code, response, error_body(data), has_tools)
        return response

    async def _aread_body(self, response: Any) -> bytes:
        """The whole response body; an httpx failure becomes a retryable ModelServiceError."""
        try:
            return await response.aread()
        except Exception as e:
            if not is_http_error(e):
                raise
            raise broken_body(self.endpoint(), e, self.api_key) from None

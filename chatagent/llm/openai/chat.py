"""Every OpenAI-compatible chat server: OpenAI, vLLM, Ollama, llama.cpp server, SGLang, DashScope's compatible mode.

    llm = get_chat_model({'model': 'Qwen2.5-7B-Instruct', 'model_server': 'http://127.0.0.1:8000/v1',
                          'api_key': 'EMPTY', 'generate_cfg': {'temperature': 0.2, 'extra_body': {'top_k': 20}}})

One request path for `run()` and `arun()`: the request's JSON body is built once (`request.chat_request`)
and posted with httpx, on a client shared by every model calling the same server (`http_pool`: one per process
for the synchronous path, one per event loop for asyncio); no SDK, and no typed object per message, per schema
or per chunk. The streamed answer is read from the raw HTTP response and parsed with orjson, event by event. The
parts: the request (`request`), the reply (`reply`, over `chatagent.llm.sse`), the errors (`errors`);
this module sends, reads and retries without `stream_options` when a server refuses it.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

# The HTTP stack is imported with the backend, in the thread that makes the model: imported first by threads and
# tasks calling at once, CPython's import locks could hand one of them a half-initialised httpx ("partially
# initialized module 'httpx' has no attribute 'Timeout'").
import httpx

from chatagent.errors import ModelServiceError
from chatagent.llm.base import DEFAULT_TOOL_CHOICE, BaseChatModel, ToolChoice, Usage
from chatagent.llm.http_pool import shared_client, shared_sync_client
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
    ChatRequest,
    chat_request,
    drop_stream_options,
    http_request,
    image_url,
    looks_multimodal,
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
    into the request's JSON body (`temperature`, `max_tokens`, `stop`, `seed`, vLLM's `top_k`, ...;
    `extra_body`'s keys too, last), but `extra_headers` (HTTP headers), `extra_query` (URL parameters) and
    `request_timeout` (seconds: the read timeout of each request).
    """

    cfg_keys = frozenset({"base_url", "api_base", "api"})  # other names of model_server; api: 'chat' (see registry)

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        super().__init__(cfg)
        cfg = self.cfg
        if cfg.get("api", "chat") != "chat":  # get_chat_model makes the Responses API's own backend for 'responses'
            raise ValueError(f"OpenAICompatModel speaks api 'chat' (Chat Completions), got {cfg['api']!r}")
        server = str(cfg.get("model_server") or cfg.get("base_url") or cfg.get("api_base") or "").strip()
        if not server or server.lower() == "openai":
            server = os.environ.get("OPENAI_BASE_URL", "")
        self.base_url: str | None = server.rstrip("/") or None
        remember_endpoint(self.endpoint())  # $OPENAI_BASE_URL or api.openai.com too: never named to a client
        self.api_key = clean_api_key(cfg.get("api_key") or os.environ.get("OPENAI_API_KEY")) or "EMPTY"
        if "multimodal" not in cfg:
            self.support_multimodal_input = looks_multimodal(self.model)
        self.url = (self.base_url or "https://api.openai.com/v1") + "/chat/completions"

    def _client(self) -> httpx.Client:
        """The synchronous `httpx.Client` every model calling this server with the same options shares."""
        return shared_sync_client(self.base_url or "https://api.openai.com/v1", self._http_options())

    async def _aclient(self) -> httpx.AsyncClient:
        """The `httpx.AsyncClient` on the running event loop that every model calling this server with the same
        options shares (a client cannot move between loops); built off the loop the first time."""
        return await shared_client(self.base_url or "https://api.openai.com/v1", self._http_options())

    def _http_options(self) -> dict[str, Any]:
        """Extra keyword arguments for this model's `httpx.Client` and `httpx.AsyncClient` (subclasses: headers,
        URL parameters, no proxy)."""
        return {}

    # ---- requests ------------------------------------------------------------------------------------

    def _request(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        tool_choice: ToolChoice,
        stream: bool,
    ) -> ChatRequest:
        """The request, built once for either path."""
        return chat_request(self.model, self.endpoint(), messages, functions, cfg, tool_choice, stream)

    def _send(self, request: ChatRequest, has_tools: bool) -> httpx.Response:
        """POST the request; the response, its body unread. Errors as ModelServiceError."""
        client = self._client()
        try:
            response = client.send(http_request(client, request, self.url, self.api_key), stream=True)
        except httpx.TimeoutException as e:
            raise no_answer(self.endpoint(), e) from None
        except httpx.HTTPError as e:
            raise unreachable(self.endpoint(), e, self.api_key) from None
        if response.status_code >= 400:
            try:
                data = self._read_body(response)
            finally:
                response.close()
            raise self.status_error(response.status_code, response, error_body(data), has_tools)
        return response

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
        request = self._request(messages, functions, cfg, tool_choice, stream=True)
        try:
            response = self._send(request, bool(functions))
        except ModelServiceError as e:
            drop_stream_options(e, request, self.endpoint())
            response = self._send(request, bool(functions))
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
        request = self._request(messages, functions, cfg, tool_choice, stream=False)
        response = self._send(request, bool(functions))
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
        request = self._request(messages, functions, cfg, tool_choice, stream=True)
        prompt = (messages, functions)
        try:
            response = await self._asend(request, bool(functions))
        except ModelServiceError as e:
            drop_stream_options(e, request, self.endpoint())
            response = await self._asend(request, bool(functions))
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
        request = self._request(messages, functions, cfg, tool_choice, stream=False)
        response = await self._asend(request, bool(functions))
        try:
            body = await self._aread_body(response)
        finally:
            await response.aclose()
        return parse_completion(self, body, usage, (messages, functions))

    async def _asend(self, request: ChatRequest, has_tools: bool) -> httpx.Response:
        """`_send` on the async client."""
        client = await self._aclient()
        try:
            response = await client.send(http_request(client, request, self.url, self.api_key), stream=True)
        except httpx.TimeoutException as e:
            raise no_answer(self.endpoint(), e) from None
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

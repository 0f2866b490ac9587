"""Every OpenAI-compatible chat server: OpenAI, vLLM, Ollama, llama.cpp server, SGLang, DashScope's compatible mode.

    llm = get_chat_model({'model': 'Qwen2.5-7B-Instruct', 'model_server': 'http://127.0.0.1:8000/v1',
                          'api_key': 'EMPTY', 'generate_cfg': {'temperature': 0.2, 'extra_body': {'top_k': 20}}})

One request path for `run()` and `arun()`: the request's JSON body is built once (`request.chat_request`)
and posted with httpx, on a client shared by every model calling the same server (`http_pool`: one per process
for the synchronous path, one per event loop for asyncio); no SDK, and no typed object per message, per schema
or per chunk. The streamed answer is read from the raw HTTP response and parsed with orjson, event by event. The
parts: the request (`request`), the reply (`reply`, over `chatagent.llm.sse`), the errors (`errors`);
this module is the protocol the shared transport (`chatagent.llm.http_transport`) sends, reads and retries
without `stream_options` when a server refuses it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

# The HTTP stack is imported with the backend, in the thread that makes the model: imported first by threads and
# tasks calling at once, CPython's import locks could hand one of them a half-initialised httpx ("partially
# initialized module 'httpx' has no attribute 'Timeout'").
import httpx

from chatagent.errors import ModelServiceError
from chatagent.llm.base import ToolChoice, Usage
from chatagent.llm.http_errors import error_body, error_from_status
from chatagent.llm.http_pool import request_url
from chatagent.llm.http_transport import HTTPCall, StreamReader, Transported
from chatagent.llm.openai.reply import Prompt, ReplyReader, non_sse_reply, parse_completion
from chatagent.llm.openai.request import chat_request, drop_refused, image_url, looks_multimodal, sends_schema
from chatagent.llm.openai.request import http_request as post_request
from chatagent.llm.registry import register_llm
from chatagent.llm.sse import SSESplitter
from chatagent.schema import Message
from chatagent.schema.fragment import Fragment
from chatagent.utils.keys import clean_api_key, remember_endpoint

__all__ = ["OpenAICompatModel", "image_url", "looks_multimodal"]


@register_llm("oai")
class OpenAICompatModel(Transported):
    """A model behind an OpenAI-compatible `/chat/completions` endpoint.

    cfg: `model`; `model_server` (the base URL, e.g. `http://127.0.0.1:8000/v1`; missing or 'openai' means
    `OPENAI_BASE_URL` or api.openai.com); `api_key` (else `OPENAI_API_KEY`, else 'EMPTY' for local servers);
    `multimodal` (else guessed from the model name); `generate_cfg`: every key but the framework's goes
    into the request's JSON body (`temperature`, `max_tokens`, `stop`, `seed`, vLLM's `top_k`, ...;
    `extra_body`'s keys too, last), but `extra_headers` (HTTP headers), `extra_query` (URL parameters) and
    `request_timeout` (seconds: the read timeout of each request).
    """

    #: a json_schema `response_format` goes to the server (OpenAI's strict structured output, vLLM's and SGLang's
    #: guided decoding); a server that refuses it is remembered and gets the prompt alone (`drop_refused`)
    native_structured_output = True
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
        request_url(self.url)  # parsed where the model is built (off the event loop under arun), not at a request

    def pool(self) -> tuple[str, dict[str, Any]]:
        """The shared client of every model calling this server with the same options (`http_pool`)."""
        return self.base_url or "https://api.openai.com/v1", self._http_options()

    def _http_options(self) -> dict[str, Any]:
        """Extra keyword arguments for this model's `httpx.Client` and `httpx.AsyncClient` (subclasses: headers,
        URL parameters, no proxy)."""
        return {}

    def endpoint(self) -> str:
        """The server, as messages name it: the base URL, or api.openai.com."""
        return self.base_url or "api.openai.com"

    def status_error(self, status: int, response: Any, body: Any, has_tools: bool) -> ModelServiceError:
        """The ModelServiceError for an HTTP error (or an error object in a 200 response) from this server."""
        return error_from_status(
            status, response, body, has_tools, where=self.endpoint(), model=self.model, api_key=self.api_key
        )

    # ---- the transport's protocol (chatagent.llm.http_transport) -----------------------------------------

    def build_call(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        tool_choice: ToolChoice,
        stream: bool,
    ) -> HTTPCall:
        """The request, built once (its body encoded as each try sends it: a refused field is taken out)."""
        request = chat_request(self.model, self.endpoint(), messages, functions, cfg, tool_choice, stream)
        return HTTPCall(self.url, {}, b"", request.timeout, stream, bool(functions), request)

    def http_request(self, client: httpx.Client | httpx.AsyncClient, call: HTTPCall) -> httpx.Request:
        return post_request(client, call.context, self.url, self.api_key)

    def refused(self, call: HTTPCall, response: httpx.Response, body: bytes) -> None:
        """The server's error, unless it refused what can be left out (`drop_refused`: each field at most once)."""
        drop_refused(self.status_error(response.status_code, response, error_body(body), call.has_tools),
                     call.context, self.endpoint())  # fmt: skip

    def reader_for(self, call: HTTPCall, headers: httpx.Headers, prompt: Prompt) -> StreamReader | None:
        if "event-stream" not in headers.get("content-type", ""):
            return None
        return EventReader(ReplyReader(self, prompt, sends_schema(call.context)))

    def unstreamed(
        self, call: HTTPCall, headers: httpx.Headers, body: bytes, usage: Usage | None, prompt: Prompt
    ) -> Iterable[list[Fragment]]:
        ctype = headers.get("content-type", "")
        return non_sse_reply(self, body, ctype, usage, prompt, sends_schema(call.context))

    def whole_reply(self, call: HTTPCall, body: bytes, usage: Usage | None, prompt: Prompt) -> list[Message]:
        return parse_completion(self, body, usage, prompt, sends_schema(call.context))


class EventReader:
    """A streamed completion's bytes as server-sent events, each read by `ReplyReader.event` (a `StreamReader`)."""

    __slots__ = ("sse", "event", "reader")

    def __init__(self, reader: ReplyReader) -> None:
        self.sse = SSESplitter()
        self.event = reader.event
        self.reader = reader

    def feed(self, chunk: bytes) -> list[list[Fragment]]:
        out: list[list[Fragment]] = []
        event = self.event
        for data in self.sse.feed(chunk):
            fragments = event(data)
            if fragments is not None:
                out.append(fragments)
        return out

    def finish(self, usage: Usage | None) -> list[list[Fragment]]:
        event = self.event
        return [out for out in map(event, self.sse.end()) if out is not None] + self.reader.finish(usage)

"""Every OpenAI-compatible chat server: OpenAI, vLLM, Ollama, llama.cpp server, SGLang, DashScope's compatible mode.

    llm = get_chat_model({'model': 'Qwen2.5-7B-Instruct', 'model_server': 'http://127.0.0.1:8000/v1',
                          'api_key': 'EMPTY', 'generate_cfg': {'temperature': 0.2, 'extra_body': {'top_k': 20}}})

The request goes through the openai SDK (one client per model, so connections are reused; the SDK's own
retries are off because BaseChatModel retries). The streamed answer is read from the raw HTTP response
and parsed with orjson, event by event: no pydantic object per chunk.

Streamed tool calls are assembled by their index and each is yielded, complete, when the stream ends:
the reply is not acted on before it is complete anyway, servers may interleave the deltas of parallel
calls, and the text (at index 0) always comes before the calls, even when a server sends more text after
a call has started. A stream that ends without `[DONE]` or a finish_reason is an error, never a reply.
"""

from __future__ import annotations

import base64
import email.utils
import inspect
import logging
import mimetypes
import os
import re
import threading
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any, cast

import orjson

from chatagent import keys
from chatagent.errors import ModelErrorCode, ModelServiceError
from chatagent.keys import clean_api_key, mask_secrets
from chatagent.llm.base import BaseChatModel, Usage
from chatagent.llm.cut_off import cut_call_error
from chatagent.llm.prepare import json_object
from chatagent.llm.registry import register_llm
from chatagent.schema import ASSISTANT, FunctionCall, Message, to_openai

logger = logging.getLogger("chatagent.llm")
# the unvalidated constructor, bound once for fragments built per chunk
_make = Message.unchecked

_MULTIMODAL = re.compile(
    r"(?<![a-z])vl(?![a-z])|vision|gpt-4o|gpt-4\.1|gpt-5|omni|qvq|llava|pixtral|gemini|claude|internvl|minicpm-v|glm-4v",
    re.IGNORECASE,
)
_CONTEXT = re.compile(
    r"context[ _-]?length|context window|maximum context|too many tokens|prompt is too long|input is too long"
    r"|input length|reduce the length|maximum input length|exceeds? the model",
    re.IGNORECASE,
)
_TOOLS = re.compile(r"\btools?\b|tool_choice|function[ _]?call", re.IGNORECASE)
_UNSUPPORTED = re.compile(
    r"support|require|unrecogni[sz]ed|unknown|not allowed|not permitted|extra|--jinja", re.IGNORECASE
)
_RETRYABLE_STATUS = {408, 409, 425, 429}
_STREAM_OPTIONS = re.compile(r"stream_options|include_usage", re.IGNORECASE)
# servers (by base URL) that refused `stream_options` (older Azure api-versions, some proxies): not sent again
_NO_STREAM_OPTIONS: set[str] = set()


def looks_multimodal(model: str) -> bool:
    """Whether a model name suggests it takes images (Qwen-VL, GPT-4o, LLaVA, ...)."""
    return bool(_MULTIMODAL.search(model or ""))


def image_url(value: str) -> str:
    """An image item's value as a URL the server can read: local files (paths or file://) as base64 data URLs."""
    if value.startswith(("http://", "https://", "data:")):
        return value
    path = value[len("file://") :] if value.startswith("file://") else value
    path = os.path.expanduser(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"image not found: {value!r} (give a local file path, a file:// or an http(s) URL)")
    mime = mimetypes.guess_type(path)[0] or "image/png"
    with open(path, "rb") as f:
        return f"data:{mime};base64,{base64.b64encode(f.read()).decode('ascii')}"


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
        self.api_key = clean_api_key(cfg.get("api_key") or os.environ.get("OPENAI_API_KEY")) or "EMPTY"
        if "multimodal" not in cfg:
            self.support_multimodal_input = looks_multimodal(self.model)
        self._client: Any = None
        self._client_lock = threading.Lock()
        self._aclients: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()  # event loop -> client

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

    def _aclient(self) -> Any:
        """This model's `httpx.AsyncClient` on the running event loop (a client cannot move between loops)."""
        import asyncio

        loop = asyncio.get_running_loop()
        client = self._aclients.get(loop)
        if client is None:
            import httpx

            from chatagent.llm.http_pool import ShardedTransport

            options: dict[str, Any] = {"timeout": httpx.Timeout(600.0, connect=5.0), **self._aclient_options()}
            # several small connection pools: one pool's bookkeeping grows with the square of its streams
            transport = ShardedTransport(trust_env=options.get("trust_env", True))
            client = self._aclients[loop] = httpx.AsyncClient(transport=transport, **options)
        return client

    def _aclient_options(self) -> dict[str, Any]:
        """Extra keyword arguments for the `httpx.AsyncClient` of the async path (subclasses: headers, no proxy)."""
        return {}

    # ---- requests ------------------------------------------------------------------------------------

    def _request(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        stream: bool,
        aio: bool = False,
    ) -> dict[str, Any]:
        """The keyword arguments of `chat.completions.create` (`aio`: for `_asend`, which puts every key but the
        transport options into the JSON body, so that the async path never imports the openai SDK)."""
        known = _TRANSPORT_OPTIONS if aio else _create_params(self.client)
        kwargs: dict[str, Any] = {"model": self.model, "messages": to_openai(messages, image_url=image_url)}
        if functions:
            kwargs["tools"] = [{"type": "function", "function": f} for f in functions]
        if stream:
            kwargs["stream"] = True
            if self.endpoint() not in _NO_STREAM_OPTIONS:
                kwargs["stream_options"] = {"include_usage": True}
        extra_body: dict[str, Any] = {}
        given_body: dict[str, Any] = {}  # generate_cfg's own extra_body: it has the last word
        for key, value in cfg.items():
            if key == "_function_choice":
                if functions:
                    choice: Any = (
                        value if value in ("none", "required") else {"type": "function", "function": {"name": value}}
                    )
                    kwargs["tool_choice"] = choice
            elif key == "_parallel_function_calls":
                if functions:
                    kwargs["parallel_tool_calls"] = value
            elif key in ("stream", "messages"):
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
        extra_body.update(given_body)
        if extra_body:
            kwargs["extra_body"] = extra_body
        return kwargs

    def _send(self, kwargs: dict[str, Any], has_tools: bool) -> Any:
        """POST the request; the raw (unread when streaming) httpx response. Errors as ModelServiceError."""
        import openai

        try:
            return self.client.chat.completions.with_raw_response.create(**kwargs).http_response
        except openai.APIStatusError as e:
            raise self.status_error(e.status_code, e.response, e.body, has_tools) from None
        except openai.APITimeoutError:
            raise ModelServiceError(
                ModelErrorCode.TIMEOUT, f"no answer from {self.endpoint()} in time", retryable=True
            ) from None
        except openai.APIConnectionError as e:
            cause = e.__cause__ or e
            raise ModelServiceError(
                ModelErrorCode.CONNECTION_ERROR,
                f"cannot reach {self.endpoint()}: {_scrub(str(cause), self.api_key)}",
                retryable=True,
            ) from None

    def endpoint(self) -> str:
        """The server, as messages name it: the base URL, or api.openai.com."""
        return self.base_url or "api.openai.com"

    def status_error(self, status: int, response: Any, body: Any, has_tools: bool) -> ModelServiceError:
        """The ModelServiceError for an HTTP error (or an error object in a 200 response): its code, and whether
        it is retryable, from the status and the server's message."""
        message, code = _error_message(body, response)
        message = _scrub(message, self.api_key)
        retry_after = _retry_after(response.headers) if response is not None else None
        if status in _RETRYABLE_STATUS or status >= 500:
            return ModelServiceError(status, message, retryable=True, retry_after=retry_after)
        if status in (400, 413, 422):
            if code == "context_length_exceeded" or _CONTEXT.search(message):
                return ModelServiceError(ModelErrorCode.CONTEXT_TOO_LONG, message)
            if has_tools and _TOOLS.search(message) and _UNSUPPORTED.search(message):
                return ModelServiceError(ModelErrorCode.TOOLS_UNSUPPORTED, message)
            if _STREAM_OPTIONS.search(message):
                return ModelServiceError(ModelErrorCode.STREAM_OPTIONS_UNSUPPORTED, message)
        if status in (401, 403):
            message = f"{message} (check api_key / OPENAI_API_KEY for {self.endpoint()})"
        elif status == 404:
            message = f"{message} (check the model name {self.model!r} and model_server {self.endpoint()!r})"
        return ModelServiceError(status, message)

    # ---- streaming -----------------------------------------------------------------------------------

    def _chat_stream(
        self, messages: list[Message], functions: list[dict[str, Any]] | None, cfg: dict[str, Any], usage: Usage | None
    ) -> Iterator[list[Message]]:
        kwargs = self._request(messages, functions, cfg, stream=True)
        try:
            response = self._send(kwargs, bool(functions))
        except ModelServiceError as e:
            self._drop_stream_options(e, kwargs)
            response = self._send(kwargs, bool(functions))
        try:
            yield from self._read_stream(response, usage, (messages, functions))
        finally:
            response.close()

    def _drop_stream_options(self, e: ModelServiceError, kwargs: dict[str, Any]) -> None:
        """After `e`: re-raise it, unless the server refused `stream_options`; then remember that (for every model
        on this server, as with tools) and take it out of `kwargs` to ask again."""
        if e.code != ModelErrorCode.STREAM_OPTIONS_UNSUPPORTED or "stream_options" not in kwargs:
            raise e
        logger.warning("%s rejects stream_options (%s): usage will be estimated", self.endpoint(), e.message)
        _NO_STREAM_OPTIONS.add(self.endpoint())
        del kwargs["stream_options"]

    def _read_stream(self, response: Any, usage: Usage | None, prompt: _Prompt) -> Iterator[list[Message]]:
        ctype = response.headers.get("content-type", "")
        if "event-stream" not in ctype:
            yield from self._non_sse_body(self._read_body(response), ctype, usage, prompt)
            return
        reader = _ReplyReader(self, prompt)
        event = reader.event
        try:
            for data in _sse_data(response.iter_bytes()):
                out = event(data)
                if out is not None:
                    yield out
        except Exception as e:
            if not _is_http_error(e):
                raise
            raise self._transport_error(e) from None
        yield from reader.finish(usage)

    def _non_sse_body(self, body: bytes, ctype: str, usage: Usage | None, prompt: _Prompt) -> Iterator[list[Message]]:
        """A streaming request answered without an event stream: a whole JSON completion, an error, or junk."""
        if "json" in ctype:
            reply = self._parse_completion(body, usage, prompt)
            yield [m.copy(extra={**(m.extra or {}), "index": i}) for i, m in enumerate(reply)]
            return
        raise ModelServiceError(
            ModelErrorCode.BAD_RESPONSE,
            f"{self.endpoint()} answered {ctype or 'no content type'}, not an event stream "
            f"(is model_server the API's base URL, ending in /v1?): {_snippet(body)}",
        )

    def _read_body(self, response: Any) -> bytes:
        """The whole response body; an httpx failure becomes a retryable ModelServiceError."""
        try:
            return response.read()
        except Exception as e:
            if not _is_http_error(e):
                raise
            raise self._transport_error(e) from None

    def _transport_error(self, e: Exception) -> ModelServiceError:
        """An httpx failure while reading the body, as a retryable ModelServiceError."""
        if "Timeout" in type(e).__name__:
            return ModelServiceError(
                ModelErrorCode.TIMEOUT, f"{self.endpoint()} stopped sending (read timeout)", retryable=True
            )
        return ModelServiceError(
            ModelErrorCode.STREAM_BROKEN,
            f"connection to {self.endpoint()} broke: {_scrub(str(e), self.api_key)}",
            retryable=True,
        )

    # ---- non-streaming -------------------------------------------------------------------------------

    def _chat_once(
        self, messages: list[Message], functions: list[dict[str, Any]] | None, cfg: dict[str, Any], usage: Usage | None
    ) -> list[Message]:
        kwargs = self._request(messages, functions, cfg, stream=False)
        response = self._send(kwargs, bool(functions))
        try:
            body = self._read_body(response)
        finally:
            response.close()
        return self._parse_completion(body, usage, (messages, functions))

    # ---- asyncio: the same request and parsing over httpx.AsyncClient ------------------------------------

    async def _achat_stream(
        self, messages: list[Message], functions: list[dict[str, Any]] | None, cfg: dict[str, Any], usage: Usage | None
    ) -> AsyncIterator[list[Message]]:
        kwargs = self._request(messages, functions, cfg, stream=True, aio=True)
        prompt = (messages, functions)
        try:
            response = await self._asend(kwargs, bool(functions))
        except ModelServiceError as e:
            self._drop_stream_options(e, kwargs)
            response = await self._asend(kwargs, bool(functions))
        try:
            ctype = response.headers.get("content-type", "")
            if "event-stream" not in ctype:
                for out in self._non_sse_body(await self._aread_body(response), ctype, usage, prompt):
                    yield out
                return
            reader = _ReplyReader(self, prompt)
            event = reader.event
            sse = _SSESplitter()
            try:
                async for chunk in response.aiter_bytes():
                    for data in sse.feed(chunk):
                        out = event(data)
                        if out is not None:
                            yield out
            except Exception as e:
                if not _is_http_error(e):
                    raise
                raise self._transport_error(e) from None
            for data in sse.end():
                out = event(data)
                if out is not None:
                    yield out
            for out in reader.finish(usage):
                yield out
        finally:
            await response.aclose()

    async def _achat_once(
        self, messages: list[Message], functions: list[dict[str, Any]] | None, cfg: dict[str, Any], usage: Usage | None
    ) -> list[Message]:
        kwargs = self._request(messages, functions, cfg, stream=False, aio=True)
        response = await self._asend(kwargs, bool(functions))
        try:
            body = await self._aread_body(response)
        finally:
            await response.aclose()
        return self._parse_completion(body, usage, (messages, functions))

    async def _asend(self, kwargs: dict[str, Any], has_tools: bool) -> Any:
        """POST the request on the async client; the response, its body unread. Errors as ModelServiceError."""
        import httpx

        client = self._aclient()
        kwargs = dict(kwargs)
        timeout = kwargs.pop("timeout", None)
        headers = {
            "Authorization": f"Bearer {self.api_key}",
            **(keys.clean_headers(kwargs.pop("extra_headers", None)) or {}),
        }
        query = kwargs.pop("extra_query", None)
        extra_body: dict[str, Any] = kwargs.pop("extra_body", None) or {}
        body = {**kwargs, **extra_body}
        url = (self.base_url or "https://api.openai.com/v1") + "/chat/completions"
        headers["Content-Type"] = "application/json"
        request = client.build_request(
            "POST", url, content=orjson.dumps(body), headers=headers, params=query,
            timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT,
        )  # fmt: skip
        try:
            response = await client.send(request, stream=True)
        except httpx.TimeoutException:
            raise ModelServiceError(
                ModelErrorCode.TIMEOUT, f"no answer from {self.endpoint()} in time", retryable=True
            ) from None
        except httpx.HTTPError as e:
            raise ModelServiceError(
                ModelErrorCode.CONNECTION_ERROR,
                f"cannot reach {self.endpoint()}: {_scrub(str(e), self.api_key)}",
                retryable=True,
            ) from None
        if response.status_code >= 400:
            try:
                data = await self._aread_body(response)
            finally:
                await response.aclose()
            try:
                parsed: Any = orjson.loads(data)
            except orjson.JSONDecodeError:
                parsed = data.decode("utf-8", "replace")
            error = json_object(parsed_obj.get("error")) if (parsed_obj := json_object(parsed)) is not None else None
            if error is not None:
                parsed = error  # as the SDK hands over an error body
            raise self.status_error(response.status_code, response, parsed, has_tools)
        return response

    async def _aread_body(self, response: Any) -> bytes:
        """The whole response body; an httpx failure becomes a retryable ModelServiceError."""
        try:
            return await response.aread()
        except Exception as e:
            if not _is_http_error(e):
                raise
            raise self._transport_error(e) from None

    def _parse_completion(self, body: bytes, usage: Usage | None, prompt: _Prompt) -> list[Message]:
        has_tools = bool(prompt[1])
        try:
            obj: _Json = orjson.loads(body)
        except orjson.JSONDecodeError:
            obj = _loads_lone_surrogates(body)
        if obj is None:
            raise ModelServiceError(
                ModelErrorCode.BAD_RESPONSE,
                f"{self.endpoint()} answered with a body that is not JSON "
                f"(is model_server the API's base URL, ending in /v1?): {_snippet(body)}",
            )
        if not isinstance(obj, dict):
            raise ModelServiceError(ModelErrorCode.BAD_RESPONSE, f"unexpected answer: {_snippet(body)}")
        if obj.get("error") and not obj.get("choices"):
            status = _error_status(obj["error"])
            raise self.status_error(status, None, obj, has_tools)
        choices = obj.get("choices")
        if not choices:
            raise ModelServiceError(ModelErrorCode.EMPTY_RESPONSE, f"{self.endpoint()} sent no choices", retryable=True)
        msg: dict[str, Any] = choices[0].get("message") or {}
        out: list[Message] = []
        text = msg.get("content") or ""
        if type(text) is not str:
            text = _parts_text(text)
        reasoning = msg.get("reasoning_content") or msg.get("reasoning")
        if text or reasoning:
            out.append(_make(ASSISTANT, text, None, None, reasoning or None, None))
        tool_calls: list[Any] = msg.get("tool_calls") or []
        if not tool_calls and msg.get("function_call"):
            tool_calls = [{"function": msg["function_call"]}]
        cut = choices[0].get("finish_reason") == "length"
        if cut and tool_calls:
            raise cut_call_error()
        for tc in tool_calls:
            fn: dict[str, Any] = tc.get("function") or {}
            call = FunctionCall(fn.get("name") or "", _call_arguments(fn.get("arguments")))
            out.append(_make(ASSISTANT, "", None, call, None, {"function_id": tc.get("id") or _call_id()}))
        if not out:
            out.append(_make(ASSISTANT, "", None, None, None, None))
        if cut:
            out[0].extra = {**(out[0].extra or {}), "stop_reason": "length"}
        if usage is not None:
            _add_usage(usage, obj.get("usage"), prompt, "".join(map(_said, out)))
        return out


class _ReplyReader:
    """The events of one streamed reply, read one by one (`event`), and its end (`finish`): the same parsing
    for the synchronous and the asynchronous stream."""

    __slots__ = (
        "model", "prompt", "has_tools", "calls", "text_seen", "choice_seen", "finished", "done", "reason", "usage",
        "texts",
    )  # fmt: skip

    def __init__(self, model: OpenAICompatModel, prompt: _Prompt) -> None:
        self.model: OpenAICompatModel = model
        self.prompt = prompt
        self.has_tools = bool(prompt[1])
        self.texts: list[str] = []  # to estimate the usage when the server reports none
        self.calls: dict[int, _CallParts] = {}  # tool index -> [id, name, argument pieces]
        self.text_seen = self.choice_seen = self.finished = self.done = False
        self.reason: str | None = None
        self.usage: Any = None  # the server's usage report (checked where it is read)

    def event(self, data: bytes) -> list[Message] | None:
        """The fragments of one server-sent event's data (None for events without any)."""
        if self.done:  # read on to the end of the body, so that the connection goes back to the pool
            return None
        if data == b"[DONE]":
            self.done = True
            return None
        try:
            obj: _Json = orjson.loads(data)
        except orjson.JSONDecodeError:
            obj = _loads_lone_surrogates(data)
            if obj is None:
                raise ModelServiceError(
                    ModelErrorCode.BAD_RESPONSE,
                    f"malformed event from {self.model.endpoint()}: {_snippet(data)}",
                    retryable=True,
                ) from None
        if type(obj) is not dict:
            raise ModelServiceError(ModelErrorCode.BAD_RESPONSE, f"unexpected event: {_snippet(data)}", retryable=True)
        choices = obj.get("choices")
        if not choices:  # the usage chunk, an error, or a keep-alive
            if obj.get("error"):
                status = _error_status(obj["error"])
                raise self.model.status_error(status, None, obj, self.has_tools)
            self.usage = obj.get("usage") or self.usage
            return None
        self.choice_seen = True
        choice = choices[0]
        if choice.get("index"):  # with n > 1 choices only the first counts
            choice = next((c for c in choices if not c.get("index")), None)
            if choice is None:
                return None
        delta: dict[str, Any] = choice.get("delta") or {}
        content = delta.get("content")
        out = None
        if content and len(delta) == 1 and type(content) is str:  # the usual chunk: text only
            self.text_seen = True
            self.texts.append(content)
            out = [_make(ASSISTANT, content, None, None, None, {"index": 0})]
        else:
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if content or reasoning:
                if content and type(content) is not str:  # a list of parts, as a few servers send
                    content = _parts_text(content)
                self.text_seen = True
                self.texts += (content or "", reasoning or "")
                out = [_make(ASSISTANT, content or "", None, None, reasoning or None, {"index": 0})]
            tool_calls = delta.get("tool_calls")
            if tool_calls:
                for n, tc in enumerate(tool_calls):
                    _add_call_delta(self.calls, tc, n)
            elif delta.get("function_call"):  # the legacy single-call form
                _add_call_delta(self.calls, {"index": 0, "function": delta["function_call"]}, 0)
        if choice.get("finish_reason"):
            self.finished = True
            self.reason = choice["finish_reason"]
            self.usage = obj.get("usage") or self.usage  # some servers put it on the last chunk
        return out

    def finish(self, usage: Usage | None) -> list[list[Message]]:
        """After the last event: the calls, a length mark, the usage; or the error the stream amounts to."""
        where = self.model.endpoint()
        if not (self.done or self.finished):
            raise ModelServiceError(
                ModelErrorCode.STREAM_INCOMPLETE, f"the stream from {where} ended before the answer did", retryable=True
            )
        if not self.choice_seen:
            raise ModelServiceError(ModelErrorCode.EMPTY_RESPONSE, f"{where} sent no choices", retryable=True)
        calls, cut = self.calls, self.reason == "length"
        if usage is not None:
            texts = self.texts
            for _, name, pieces in calls.values():
                texts += [name, *pieces]
            _add_usage(usage, self.usage, self.prompt, "".join(texts))
        if cut and calls:
            raise cut_call_error()
        out: list[list[Message]] = []
        start = 1 if self.text_seen else 0
        for n, i in enumerate(sorted(calls)):
            fid, name, pieces = calls[i]
            extra = {"index": start + n, "function_id": fid or _call_id()}
            out.append([_make(ASSISTANT, "", None, FunctionCall(name, "".join(pieces)), None, extra)])
        if not (self.text_seen or calls) or cut:  # a text cut off by max_tokens says so
            extra = {"index": 0, "stop_reason": "length"} if cut else {"index": 0}
            out.append([_make(ASSISTANT, "", None, None, None, extra)])
        return out


# ---- helpers ------------------------------------------------------------------------------------------------

_Prompt = tuple[list[Message], "list[dict[str, Any]] | None"]  # what a request asked: the messages and the functions
_CallParts = list[Any]  # a streamed tool call: [its id (str | None), its name (str), its argument pieces (list[str])]
_Json = dict[str, Any] | list[Any] | str | int | float | bool | None  # a JSON value as orjson reads it


def _said(m: Message) -> str:
    """Everything a message says that costs tokens: text, reasoning, a call's name and arguments."""
    call = m.function_call
    return m.text + (m.reasoning_content or "") + (f"{call.name}{call.arguments}" if call else "")


def _add_usage(usage: Usage, reported: Any, prompt: _Prompt, reply_text: str) -> None:
    """Add the server's usage report to `usage`; without one (a server that ignores or refuses stream_options),
    an offline estimate (chatagent.tokens) of the prompt and of the reply, so that usage never stays 0."""
    counts = json_object(reported)
    if counts is not None and (counts.get("prompt_tokens") or counts.get("completion_tokens")):
        usage.add(_int(counts.get("prompt_tokens")) or 0, _int(counts.get("completion_tokens")) or 0)
        return
    from chatagent.tokens import count_tokens

    messages, functions = prompt
    asked = sum(4 + count_tokens(_said(m)) for m in messages)  # about 4 tokens of each message's framing
    if functions:
        asked += count_tokens(orjson.dumps(functions).decode())
    usage.add(asked, count_tokens(reply_text))


_params: frozenset[str] | None = None  # chat.completions.create's, read once
_TRANSPORT_OPTIONS = frozenset({"extra_headers", "extra_query", "timeout"})  # what `_asend` takes out of the body


def _create_params(client: Any) -> frozenset[str]:
    """Names `chat.completions.create` takes (known request fields go as arguments, the rest in extra_body)."""
    global _params
    if _params is None:
        _params = frozenset(inspect.signature(client.chat.completions.create).parameters) - {"stream", "messages"}
    return _params


def _add_call_delta(calls: dict[int, _CallParts], tc: dict[str, Any], position: int) -> None:
    i = tc.get("index")
    if not isinstance(i, int):
        i = position
    fn: dict[str, Any] = tc.get("function") or {}
    entry = calls.get(i)
    if entry is None:
        entry = calls[i] = [None, "", []]
    if tc.get("id"):
        entry[0] = tc["id"]
    name = fn.get("name")
    if name and name != entry[1]:
        # most servers send the name once; some repeat it; a few stream it in pieces before the arguments
        entry[1] = entry[1] + name if entry[1] and not entry[2] else name
    args = fn.get("arguments")
    if args:
        entry[2].append(args if isinstance(args, str) else orjson.dumps(args).decode())


def _loads_lone_surrogates(data: bytes) -> Any:
    """JSON that orjson refuses only for a lone surrogate escape (\\ud800, from a server that split a character
    between tokens), read with those characters as U+FFFD; None if it is not JSON at all."""
    if b"\\u" not in data:
        return None
    import json

    from chatagent.llm.prepare import fix_surrogates

    def fix(value: Any) -> Any:
        if isinstance(value, str):
            return fix_surrogates(value)
        if isinstance(value, list):
            return [fix(v) for v in cast("list[Any]", value)]
        if isinstance(value, dict):
            return {fix(k): fix(v) for k, v in cast("dict[Any, Any]", value).items()}
        return value

    try:
        return fix(json.loads(data))
    except (ValueError, RecursionError):
        return None


def _call_arguments(args: Any) -> str | dict[str, Any]:
    """A whole (non-streamed) call's arguments as the server sent them: a JSON string or an object; else none."""
    if isinstance(args, str):
        return args
    obj = json_object(args)
    return obj if obj is not None else ""


def _call_id() -> str:
    """An id for a tool call the server sent without one."""
    return f"call_{uuid.uuid4().hex[:24]}"


def _parts_text(content: Any) -> str:
    """The text of content sent as a list of parts ({'type': 'text', 'text': ...})."""
    if isinstance(content, list):
        return "".join(_part_text(p) for p in cast("list[Any]", content))
    return str(content)


def _part_text(part: Any) -> str:
    obj = json_object(part)
    return str(part) if obj is None else obj.get("text") or ""


def _is_http_error(e: BaseException) -> bool:
    """Whether `e` is an httpx (or the SDK's httpx2) transport error raised while reading a body."""
    return any(c.__name__ == "HTTPError" and c.__module__.startswith("httpx") for c in type(e).__mro__)


def _sse_data(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """The data of each server-sent event in a byte stream (see `_SSESplitter`)."""
    sse = _SSESplitter()
    for chunk in chunks:
        yield from sse.feed(chunk)
    yield from sse.end()


class _SSESplitter:
    """Splits a byte stream into the data of its server-sent events (multi-line data joined with newlines).

    A bare JSON line (some servers send errors without `data:`) counts as an event of its own.
    """

    __slots__ = ("buf", "data")

    def __init__(self) -> None:
        self.buf = b""
        self.data: bytes | None = None

    def feed(self, chunk: bytes) -> list[bytes]:
        buf = self.buf + chunk if self.buf else chunk
        if b"\r" in buf:
            buf = buf.replace(b"\r\n", b"\n")  # a "\r" at the very end meets its "\n" with the next chunk
        lines = buf.split(b"\n")
        self.buf = lines.pop()
        out: list[bytes] = []
        data = self.data
        for line in lines:
            if not line:
                if data is not None:
                    out.append(data)
                    data = None
            elif line.startswith(b"data: "):
                data = line[6:] if data is None else data + b"\n" + line[6:]
            elif line.startswith(b"data:"):
                data = line[5:] if data is None else data + b"\n" + line[5:]
            elif line[:1] in (b"{", b"["):
                out.append(line)
            # comments (":...") and other fields (event, id, retry) are ignored
        self.data = data
        return out

    def end(self) -> list[bytes]:
        """The stream ended: an unterminated last event still counts."""
        buf, data = self.buf.rstrip(b"\r"), self.data
        self.buf, self.data = b"", None
        out: list[bytes] = []
        if buf.startswith(b"data:"):
            buf = buf[6:] if buf[5:6] == b" " else buf[5:]
            data = buf if data is None else data + b"\n" + buf
        elif buf[:1] in (b"{", b"["):
            out.append(buf)
        if data is not None:
            out.append(data)
        return out


def _error_message(body: Any, response: Any) -> tuple[str, str | None]:
    """The server's error message and code, from an OpenAI error JSON or whatever else it sent."""
    obj = json_object(body)
    if obj is not None:
        err: Any = obj.get("error", obj)
        err_obj = json_object(err)
        if err_obj is not None:
            msg = err_obj.get("message") or err_obj.get("msg") or err_obj.get("detail") or obj.get("message")
            code = err_obj.get("code") or err_obj.get("type")
            if msg:
                return str(msg), str(code) if code is not None else None
        elif isinstance(err, str):
            return err, None
    if isinstance(body, str) and body:
        return _snippet(body.encode()), None
    text = ""
    if response is not None:
        try:
            text = response.text
        except Exception:
            text = ""
    return (_snippet(text.encode()) if text else f"HTTP {getattr(response, 'status_code', '?')}"), None


def _retry_after(headers: Any) -> float | None:
    """Seconds to wait from Retry-After (seconds or an HTTP date) or retry-after-ms."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


_TAG = re.compile(rb"<[^>]*>|\s+")


def _snippet(data: bytes | str, limit: int = 200) -> str:
    """A short readable excerpt of a body (HTML tags and runs of spaces squeezed)."""
    if isinstance(data, str):
        data = data.encode()
    text = _TAG.sub(b" ", data[:4000]).strip().decode("utf-8", "replace")
    return text[:limit] + ("..." if len(text) > limit else "")


def _scrub(text: str, secret: str | None) -> str:
    return mask_secrets(text, [secret])


def _error_status(error: Any) -> int:
    """The HTTP status an error object in a 200 response stands for: its `code`, else 500."""
    obj = json_object(error)
    return _int(obj.get("code") if obj is not None else None) or 500


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None

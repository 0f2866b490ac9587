"""DashScopeModel: Qwen models through the native DashScope API (the `dashscope` SDK).

    llm = get_chat_model({'model': 'qwen-plus', 'model_server': 'dashscope'})   # key from DASHSCOPE_API_KEY

Text models use the Generation API, models whose name says `vl`, `omni` or `qvq` (or `multimodal: True`)
the MultiModalConversation API with DashScope's own content format (`[{'text': ...}, {'image': ...}]`).
Streams are requested with `incremental_output=True` and `result_format='message'`, so each chunk
carries only new text. Local media files are uploaded to DashScope's temporary storage first (as the
SDK does for `file://` URLs) and sent as `oss://` URLs. `achat()` (and so `Agent.arun()`) uses the SDK's async
API (AioGeneration, AioMultiModalConversation over aiohttp) on the caller's event loop; its answers are read by
the same code as the sync path's (chatagent/llm/dashscope/reply.py).

Config keys besides `model` / `api_key` / `generate_cfg`: `base_url` (the HTTP API root, e.g.
`https://dashscope-intl.aliyuncs.com/api/v1`; default: the SDK's, which reads DASHSCOPE_HTTP_BASE_URL;
with `model_type: 'dashscope'` a URL in `model_server` is taken as the base URL too) and `workspace`. Both are
per instance: nothing global in the SDK is changed, except that the SDK's own "Request failed" log record is
dropped, because this module reports the failure itself.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import re
import threading
import time
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from typing import Any

import aiohttp
import dashscope
import requests
from dashscope.common.error import DashScopeException
from dashscope.utils.oss_utils import OssUtils

from chatagent.errors import ModelErrorCode, ModelServiceError
from chatagent.llm.base import DEFAULT_TOOL_CHOICE, BaseChatModel, ToolChoice, Usage
from chatagent.llm.dashscope.reply import ReplyReader, service_error, whole_reply
from chatagent.llm.registry import register_llm
from chatagent.schema import ASSISTANT, FUNCTION, ContentItem, Message, content_text
from chatagent.schema.fragment import Fragment
from chatagent.utils.keys import clean_api_key

logger = logging.getLogger("chatagent.llm.dashscope")

_MULTIMODAL_NAME = re.compile(r"(?<![a-z])(vl|omni|qvq)(?![a-z])")
# Arguments this module sets itself; a generate_cfg key of the same name would break the call.
_RESERVED = frozenset(
    {"model", "messages", "api_key", "stream", "incremental_output", "result_format", "session", "base_address"}
)
_UPLOAD_TTL = 12 * 3600.0  # DashScope keeps uploaded files for 48 h; re-upload well before that


class _QuietSdkFailures(logging.Filter):
    """Drop the SDK's 'Request failed' traceback: the failure reaches the caller as ModelServiceError."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != "Request failed"


logging.getLogger("dashscope").addFilter(_QuietSdkFailures())


@register_llm("dashscope")
class DashScopeModel(BaseChatModel):
    """A model served by DashScope's native API. See the module docstring for the config keys."""

    cfg_keys = frozenset({"base_url", "workspace"})

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        super().__init__(cfg)
        cfg = self.cfg
        if not self.model:
            self.model = "qwen-plus"
        if "multimodal" not in cfg:
            self.support_multimodal_input = bool(_MULTIMODAL_NAME.search(self.model.lower()))
        self.api_key = clean_api_key(cfg.get("api_key") or os.environ.get("DASHSCOPE_API_KEY"))
        server = str(cfg.get("model_server") or "")
        self.base_url: str | None = cfg.get("base_url") or (
            server if server.startswith(("http://", "https://")) else None
        )
        self.workspace: str | None = cfg.get("workspace") or None
        self._session: requests.Session | None = None
        self._session_lock = threading.Lock()
        # event loop -> (its connection pool, the async generator that closes the pool when the loop shuts down)
        self._connectors: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[aiohttp.TCPConnector, AsyncGenerator[None, None]]
        ] = weakref.WeakKeyDictionary()
        self._uploads: dict[tuple[str, int, int], tuple[str, float]] = {}  # (path, size, mtime) -> (oss url, time)

    # ---- BaseChatModel ---------------------------------------------------------------------------------

    def _chat_stream(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        usage: Usage | None,
        *,
        tool_choice: ToolChoice = DEFAULT_TOOL_CHOICE,
    ) -> Iterator[list[Fragment]]:
        sender = _Sender(self._http())
        try:
            kwargs = self._call_args(messages, functions, cfg, tool_choice, stream=True)
            reader = ReplyReader(self.api_key)
            try:
                for rsp in self._api(aio=False).call(session=sender, **kwargs):
                    out = reader.read(rsp)
                    if out is not None:
                        yield out
            finally:
                reader.account(usage)
            yield from reader.finish()
        except _NETWORK_ERRORS as e:
            raise self._network_error(e) from None
        finally:
            sender.close()

    def _chat_once(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        usage: Usage | None,
        *,
        tool_choice: ToolChoice = DEFAULT_TOOL_CHOICE,
    ) -> list[Message]:
        sender = _Sender(self._http())
        try:
            kwargs = self._call_args(messages, functions, cfg, tool_choice, stream=False)
            rsp = self._api(aio=False).call(session=sender, **kwargs)
        except _NETWORK_ERRORS as e:
            raise self._network_error(e) from None
        finally:
            sender.close()
        return whole_reply(rsp, usage, self.api_key)

    # ---- asyncio: the SDK's async API (aiohttp), the same request and parsing --------------------------------

    async def _achat_stream(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        usage: Usage | None,
        *,
        tool_choice: ToolChoice = DEFAULT_TOOL_CHOICE,
    ) -> AsyncIterator[list[Fragment]]:
        sender = _AioSender(await self._aio_connector())
        try:
            kwargs = await self._acall_args(messages, functions, cfg, tool_choice, stream=True)
            reader = ReplyReader(self.api_key)
            try:
                async for rsp in await self._api(aio=True).call(session=sender.session, **kwargs):
                    out = reader.read(rsp)
                    if out is not None:
                        yield out
            finally:
                reader.account(usage)
            for out in reader.finish():
                yield out
        except _NETWORK_ERRORS as e:
            raise self._network_error(e) from None
        finally:
            await sender.close()

    async def _achat_once(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        usage: Usage | None,
        *,
        tool_choice: ToolChoice = DEFAULT_TOOL_CHOICE,
    ) -> list[Message]:
        sender = _AioSender(await self._aio_connector())
        try:
            kwargs = await self._acall_args(messages, functions, cfg, tool_choice, stream=False)
            rsp = await self._api(aio=True).call(session=sender.session, **kwargs)
        except _NETWORK_ERRORS as e:
            raise self._network_error(e) from None
        finally:
            await sender.close()
        return whole_reply(rsp, usage, self.api_key)

    # ---- the request -----------------------------------------------------------------------------------

    def _http(self) -> requests.Session:
        """One HTTP session per model instance, so that connections are reused."""
        if self._session is None:
            with self._session_lock:
                if self._session is None:
                    self._session = requests.Session()
        return self._session

    async def _aio_connector(self) -> aiohttp.TCPConnector:
        """This model's aiohttp connection pool on the running event loop (a pool cannot move between loops),
        closed when the loop shuts down."""
        loop = asyncio.get_running_loop()
        entry = self._connectors.get(loop)
        if entry is None or entry[0].closed:
            connector = aiohttp.TCPConnector(ssl=_ssl_context(), limit=1000)
            closer = _closed_with_the_loop(connector)
            await closer.asend(None)
            entry = self._connectors[loop] = (connector, closer)
        return entry[0]

    def _call_args(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        tool_choice: ToolChoice,
        stream: bool,
    ) -> dict[str, Any]:
        """The keyword arguments of the SDK's `call` (but `session`); a `tool_choice` key of generate_cfg wins."""
        cfg = dict(cfg)
        timeout = cfg.pop("request_timeout", None)
        headers: dict[str, str] = {**(cfg.pop("headers", None) or {}), **(cfg.pop("extra_headers", None) or {})}
        cfg.update(cfg.pop("extra_body", None) or {})
        kwargs: dict[str, Any] = {k: v for k, v in cfg.items() if k not in _RESERVED and v is not None}
        if functions:
            kwargs["tools"] = [{"type": "function", "function": f} for f in functions]
            choice = tool_choice.request_field()
            if choice is not None:
                kwargs.setdefault("tool_choice", choice)
            if tool_choice.parallel:
                kwargs.setdefault("parallel_tool_calls", True)
        if timeout is not None:
            kwargs["request_timeout"] = timeout
        if headers:
            kwargs["headers"] = headers
        if self.workspace:
            kwargs["workspace"] = self.workspace
        if self.base_url:
            kwargs["base_address"] = self.base_url
        if stream:
            kwargs["incremental_output"] = True
        kwargs.update(
            model=self.model,
            # multimodal: DashScope's content lists, local media files uploaded
            messages=self._to_dashscope(messages, multimodal=self.support_multimodal_input),
            api_key=self.api_key,
            stream=stream,
            result_format="message",
        )
        return kwargs

    async def _acall_args(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        tool_choice: ToolChoice,
        stream: bool,
    ) -> dict[str, Any]:
        """`_call_args` on an event loop: uploading media files (multimodal only) runs in a worker thread."""
        if self.support_multimodal_input:
            return await asyncio.to_thread(self._call_args, messages, functions, cfg, tool_choice, stream)
        return self._call_args(messages, functions, cfg, tool_choice, stream)

    def _api(self, aio: bool) -> Any:
        """The SDK's API class for this model: Generation or MultiModalConversation, or their async versions."""
        if self.support_multimodal_input:
            return dashscope.AioMultiModalConversation if aio else dashscope.MultiModalConversation
        return dashscope.AioGeneration if aio else dashscope.Generation

    # ---- errors ----------------------------------------------------------------------------------------

    def _network_error(self, e: BaseException) -> ModelServiceError:
        """A failure of the HTTP client (requests, or aiohttp on the async path) or the SDK, as ModelServiceError."""
        if isinstance(e, ModelServiceError):
            return e
        if isinstance(e, (requests.Timeout, asyncio.TimeoutError)):
            what = str(e) or type(e).__name__
            return self._scrub(
                ModelServiceError(ModelErrorCode.TIMEOUT, f"DashScope did not answer in time: {what}", retryable=True)
            )
        if isinstance(
            e, (requests.ConnectionError, requests.exceptions.ChunkedEncodingError, aiohttp.ClientError, OSError)
        ):
            return self._scrub(
                ModelServiceError(
                    ModelErrorCode.CONNECTION_ERROR, f"connection to DashScope failed: {e}", retryable=True
                )
            )
        if isinstance(e, requests.RequestException):
            return self._scrub(ModelServiceError(ModelErrorCode.REQUEST_ERROR, str(e), retryable=True))
        name = type(e).__name__
        code = "InvalidApiKey" if name == "AuthenticationError" else name
        return self._scrub(ModelServiceError(code, str(e) or name))

    def _scrub(self, e: ModelServiceError) -> ModelServiceError:
        return e.scrubbed(self.api_key)

    # ---- messages --------------------------------------------------------------------------------------

    def _to_dashscope(self, messages: list[Message], multimodal: bool) -> list[dict[str, Any]]:
        """Messages in DashScope's format: OpenAI-like roles and tool calls; content lists for multimodal."""
        out: list[dict[str, Any]] = []
        open_calls: list[tuple[str, str]] = []  # (id, name) of calls not answered yet
        for n, m in enumerate(messages):
            if m.role == FUNCTION:
                fid = (m.extra or {}).get("function_id")
                if fid is None:  # answer the oldest open call of that name
                    match = next((c for c in open_calls if c[1] == m.name), open_calls[0] if open_calls else None)
                    fid = match[0] if match else f"call_{n}"
                open_calls = [c for c in open_calls if c[0] != fid]
                media = multimodal and not isinstance(m.content, str) and any(i.kind != "text" for i in m.content)
                tool_content = self._content(m.content) if media else content_text(m.content)  # a chart goes as one
                tool: dict[str, Any] = {"role": "tool", "content": tool_content, "tool_call_id": fid}
                if m.name:
                    tool["name"] = m.name
                out.append(tool)
                continue
            content = self._content(m.content) if multimodal else _flat_text(m.content)
            if m.role == ASSISTANT and m.function_call is not None:
                fid = (m.extra or {}).get("function_id") or f"call_{n}"
                open_calls.append((fid, m.function_call.name))
                call = {"id": fid, "type": "function", "function": m.function_call.model_dump()}
                prev: dict[str, Any] | None = out[-1] if out and out[-1]["role"] == ASSISTANT else None
                if prev is None or not _empty(content):
                    prev = {"role": ASSISTANT, "content": content}
                    out.append(prev)
                prev.setdefault("tool_calls", []).append(call)
                continue
            prev = out[-1] if out and out[-1]["role"] == ASSISTANT and m.role == ASSISTANT else None
            if prev is not None and "tool_calls" not in prev and isinstance(content, str):
                prev["content"] += content  # consecutive assistant text (e.g. reasoning split) is one turn
                continue
            out.append({"role": m.role, "content": content})
        return out

    def _content(self, content: str | list[ContentItem]) -> list[dict[str, str]]:
        if isinstance(content, str):
            return [{"text": content}] if content else []
        items: list[dict[str, str]] = []
        for item in content:
            kind = item.kind
            if kind == "text":
                items.append({"text": item.value})
            elif kind == "file":
                items.append({"text": f"[file: {os.path.basename(item.value)}]"})
            else:
                items.append({kind: self._media_url(item.value)})
        return items

    def _media_url(self, value: str) -> str:
        """A URL DashScope can read: remote and data URLs as they are, local files uploaded (oss://)."""
        if value.startswith(("http://", "https://", "oss://", "data:")):
            return value
        path = value[len("file://") :] if value.startswith("file://") else value
        path = os.path.abspath(os.path.expanduser(path))
        try:
            st = os.stat(path)
        except OSError:
            raise ModelServiceError(ModelErrorCode.FILE_NOT_FOUND, f"media file not found: {value}") from None
        key = (path, st.st_size, st.st_mtime_ns)
        cached = self._uploads.get(key)
        now = time.monotonic()
        if cached is not None and now - cached[1] < _UPLOAD_TTL:
            return cached[0]
        oss: Any = OssUtils  # the SDK annotates api_key as str, but takes None (its default key) as we pass it
        try:
            url, _ = oss.upload(
                model=self.model,
                file_path=path,
                api_key=self.api_key,
                base_address=self.base_url or dashscope.base_http_api_url,
            )
        except (requests.RequestException, DashScopeException, OSError) as e:
            raise self._scrub(
                ModelServiceError(
                    ModelErrorCode.UPLOAD_FAILED, f"uploading {os.path.basename(path)} to DashScope failed: {e}"
                )
            ) from None
        self._uploads[key] = (url, now)
        return url


# What the HTTP clients and the SDK raise, turned into ModelServiceError by `_network_error`.
_NETWORK_ERRORS = (requests.RequestException, aiohttp.ClientError, asyncio.TimeoutError, DashScopeException, OSError)


class _AioSender:
    """The aiohttp session given to the SDK's async API for one call. It shares the model's connection pool and
    keeps the response, so that closing our generator closes the HTTP stream at once (as `_Sender` does)."""

    __slots__ = ("session", "response")

    def __init__(self, connector: aiohttp.TCPConnector) -> None:
        trace = aiohttp.TraceConfig()
        trace.on_request_end.append(self._keep)
        self.response: aiohttp.ClientResponse | None = None
        self.session = aiohttp.ClientSession(
            connector=connector, connector_owner=False, trust_env=True, trace_configs=[trace]
        )

    async def _keep(self, session: Any, context: Any, params: aiohttp.TraceRequestEndParams) -> None:
        self.response = params.response

    async def close(self) -> None:
        if self.response is not None:  # a response read to its end went back to the pool and stays there
            self.response.close()
            self.response = None
        await self.session.close()


async def _closed_with_the_loop(connector: aiohttp.TCPConnector) -> AsyncGenerator[None, None]:
    """Started once, this async generator waits for its loop's shutdown (`loop.shutdown_asyncgens()`, which
    `asyncio.run` calls) and closes `connector` then, so that the pool's idle connections are not left for the
    garbage collector (which logs an 'Unclosed connector' error)."""
    try:
        yield
    finally:
        await connector.close()


@functools.cache
def _ssl_context() -> Any:
    """certifi's CA bundle, as requests (the sync path) and the SDK use it."""
    import ssl

    import certifi

    return ssl.create_default_context(cafile=certifi.where())


class _Sender:
    """Given to the SDK as its HTTP `session`: sends through the model's session and keeps the response,
    so that closing our generator closes the HTTP stream at once."""

    __slots__ = ("_session", "_response")

    def __init__(self, session: requests.Session) -> None:
        self._session = session
        self._response: requests.Response | None = None

    def post(self, *args: Any, **kwargs: Any) -> requests.Response:
        self._response = self._session.post(*args, **kwargs)
        return self._response

    def get(self, *args: Any, **kwargs: Any) -> requests.Response:
        self._response = self._session.get(*args, **kwargs)
        return self._response

    def close(self) -> None:
        if self._response is not None:
            self._response.close()
            self._response = None


# ---- helpers ------------------------------------------------------------------------------------------


def _flat_text(content: str | list[ContentItem]) -> str:
    if isinstance(content, str):
        return content
    parts = [item.text if item.kind == "text" else f"[{item.kind}: {os.path.basename(item.value)}]" for item in content]
    return "\n".join(p for p in parts if p)


def _empty(content: str | list[dict[str, str]]) -> bool:
    return not content or (isinstance(content, list) and all(not item.get("text") for item in content))


__all__ = ["DashScopeModel", "service_error"]

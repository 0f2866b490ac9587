"""DashScopeModel: Qwen models through the native DashScope API (the `dashscope` SDK).

    llm = get_chat_model({'model': 'qwen-plus', 'model_server': 'dashscope'})   # key from DASHSCOPE_API_KEY

Text models use the Generation API, models whose name says `vl`, `omni` or `qvq` (or `multimodal: True`)
the MultiModalConversation API with DashScope's own content format (`[{'text': ...}, {'image': ...}]`).
Streams are requested with `incremental_output=True` and `result_format='message'`, so each chunk
carries only new text. Local media files are uploaded to DashScope's temporary storage first (as the
SDK does for `file://` URLs) and sent as `oss://` URLs.

Config keys besides `model` / `api_key` / `generate_cfg`: `base_url` (the HTTP API root, e.g.
`https://dashscope-intl.aliyuncs.com/api/v1`; default: the SDK's, which reads DASHSCOPE_HTTP_BASE_URL;
with `model_type: 'dashscope'` a URL in `model_server` is taken as the base URL too) and `workspace`. Both are per instance: nothing global in the SDK is changed, except that the SDK's own
"Request failed" log record is dropped, because this module reports the failure itself.
"""

from __future__ import annotations

import email.utils
import logging
import os
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import dashscope
import requests
from dashscope.common.error import DashScopeException
from dashscope.utils.oss_utils import OssUtils

from chatagent.errors import ModelServiceError
from chatagent.keys import clean_api_key
from chatagent.llm.base import BaseChatModel, Usage, cut_call_error, register_llm
from chatagent.schema import ASSISTANT, FUNCTION, ContentItem, FunctionCall, Message, content_text
from chatagent.stream import INDEX

logger = logging.getLogger("chatagent.llm.dashscope")

_MULTIMODAL_NAME = re.compile(r"(?<![a-z])(vl|omni|qvq)(?![a-z])")
_CONTEXT_TOO_LONG = re.compile(
    r"range of input length|input length|context length|too long|maximum context|exceeds? the maximum", re.I
)
# DashScope error codes that a later retry can fix, whatever HTTP status came with them.
_TRANSIENT_CODES = ("Throttling", "InternalError", "ServiceUnavailable", "RequestTimeOut", "Timeout")
# Arguments this module sets itself; a generate_cfg key of the same name would break the call.
_RESERVED = frozenset(
    {"model", "messages", "api_key", "stream", "incremental_output", "result_format", "session", "base_address"}
)
_MAX_MESSAGE = 1000
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

    def __init__(self, cfg: dict | None = None) -> None:
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
        self._uploads: dict[tuple, tuple[str, float]] = {}  # (path, size, mtime) -> (oss url, time)

    # ---- BaseChatModel ---------------------------------------------------------------------------------

    def _chat_stream(
        self, messages: list[Message], functions: list[dict] | None, cfg: dict, usage: Usage | None
    ) -> Iterator[list[Message]]:
        sender = _Sender(self._http())
        try:
            responses = self._request(messages, functions, cfg, sender, stream=True)
            yield from self._fragments(responses, usage)
        except (requests.RequestException, DashScopeException, OSError) as e:
            raise self._network_error(e) from None
        finally:
            sender.close()

    def _chat_once(
        self, messages: list[Message], functions: list[dict] | None, cfg: dict, usage: Usage | None
    ) -> list[Message]:
        sender = _Sender(self._http())
        try:
            rsp = self._request(messages, functions, cfg, sender, stream=False)
        except (requests.RequestException, DashScopeException, OSError) as e:
            raise self._network_error(e) from None
        finally:
            sender.close()
        self._check(rsp)
        if usage is not None and rsp.get("usage"):
            _add_usage(usage, rsp["usage"])
        msg = _first_message(rsp) or {}
        choices = (rsp.output or {}).get("choices") or [{}]
        cut = choices[0].get("finish_reason") == "length"
        if cut and msg.get("tool_calls"):
            raise cut_call_error()
        out: list[Message] = []
        text = _text(msg.get("content"))
        reasoning = msg.get("reasoning_content") or None
        if text or reasoning:
            out.append(Message._make(ASSISTANT, text, None, None, reasoning, None))
        for n, call in enumerate(msg.get("tool_calls") or []):
            fn = call.get("function") or {}
            fid = call.get("id") or f"call_{n}"
            out.append(
                Message._make(
                    ASSISTANT,
                    "",
                    None,
                    FunctionCall(fn.get("name") or "", fn.get("arguments") or ""),
                    None,
                    {"function_id": fid},
                )
            )
        out = out or [Message._make(ASSISTANT, "")]
        if cut:
            out[0].extra = {**(out[0].extra or {}), "stop_reason": "length"}
        return out

    # ---- the request -----------------------------------------------------------------------------------

    def _http(self) -> requests.Session:
        """One HTTP session per model instance, so that connections are reused."""
        if self._session is None:
            with self._session_lock:
                if self._session is None:
                    self._session = requests.Session()
        return self._session

    def _request(
        self, messages: list[Message], functions: list[dict] | None, cfg: dict, sender: _Sender, stream: bool
    ) -> Any:
        cfg = dict(cfg)
        function_choice = cfg.pop("_function_choice", "auto")
        parallel = cfg.pop("_parallel_function_calls", True)
        timeout = cfg.pop("request_timeout", None)
        headers = {**(cfg.pop("headers", None) or {}), **(cfg.pop("extra_headers", None) or {})}
        cfg.update(cfg.pop("extra_body", None) or {})
        kwargs: dict[str, Any] = {k: v for k, v in cfg.items() if k not in _RESERVED and v is not None}
        if functions:
            kwargs["tools"] = [{"type": "function", "function": f} for f in functions]
            if function_choice == "none":
                kwargs.setdefault("tool_choice", "none")
            elif function_choice and function_choice != "auto":
                kwargs.setdefault("tool_choice", {"type": "function", "function": {"name": function_choice}})
            if parallel:
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
        if self.support_multimodal_input:
            api = dashscope.MultiModalConversation
            ds_messages = self._to_dashscope(messages, multimodal=True)
        else:
            api = dashscope.Generation
            ds_messages = self._to_dashscope(messages, multimodal=False)
        return api.call(
            model=self.model,
            messages=ds_messages,
            api_key=self.api_key,
            stream=stream,
            result_format="message",
            session=sender,
            **kwargs,
        )

    def _fragments(self, responses: Iterator[Any], usage: Usage | None) -> Iterator[list[Message]]:
        """DashScope's incremental chunks as fragments: text and reasoning at index 0, then whole calls."""
        make = Message._make
        calls: dict[int, list] = {}  # index -> [id, name, arguments pieces]
        started = False
        finished = None
        last_usage = None
        try:
            for rsp in responses:
                if rsp.status_code != 200:
                    self._check(rsp, in_stream=_is_sse(rsp.get("headers") or {}))
                if rsp.usage:
                    last_usage = rsp.usage
                output = rsp.output
                choices = output.get("choices") if output else None
                if not choices:
                    text = output.get("text") if output else None  # result_format='text' style answers
                    if text:
                        started = True
                        yield [make(ASSISTANT, text, None, None, None, {INDEX: 0})]
                    continue
                choice = choices[0]
                msg = choice.get("message")
                if msg:
                    reasoning = msg.get("reasoning_content")
                    content = msg.get("content")
                    text = content if isinstance(content, str) else _text(content)
                    if reasoning or text:
                        started = True
                        yield [make(ASSISTANT, text or "", None, None, reasoning or None, {INDEX: 0})]
                    tool_calls = msg.get("tool_calls")
                    if tool_calls:
                        _gather_calls(calls, tool_calls)
                reason = choice.get("finish_reason")
                if reason and reason != "null":
                    finished = reason
        finally:
            if usage is not None and last_usage:
                _add_usage(usage, last_usage)
        if finished is None:
            raise ModelServiceError(
                "stream_incomplete", "the stream ended without a finish_reason (connection cut?)", retryable=True
            )
        if finished == "length" and calls:
            raise cut_call_error()
        base = 1 if started else 0
        for n, key in enumerate(sorted(calls)):
            fid, name, pieces = calls[key]
            call = FunctionCall(name, "".join(pieces))
            yield [make(ASSISTANT, "", None, call, None, {INDEX: base + n, "function_id": fid or f"call_{key}"})]
        if (not started and not calls) or finished == "length":  # a text cut off by max_tokens says so
            extra = {INDEX: 0, "stop_reason": "length"} if finished == "length" else {INDEX: 0}
            yield [make(ASSISTANT, "", None, None, None, extra)]

    # ---- errors ----------------------------------------------------------------------------------------

    def _check(self, rsp: Any, in_stream: bool = False) -> None:
        """Raise ModelServiceError for a response that is not a success."""
        status = int(rsp.status_code or 0)
        if status == 200:
            return
        after = _retry_after(rsp.get("headers") or {})
        code, message, request_id = rsp.get("code"), rsp.get("message"), rsp.get("request_id")
        raise self._scrub(service_error(None if in_stream else status, code, message, request_id, after))

    def _network_error(self, e: BaseException) -> ModelServiceError:
        if isinstance(e, ModelServiceError):
            return e
        if isinstance(e, requests.Timeout):
            return self._scrub(ModelServiceError("timeout", f"DashScope did not answer in time: {e}", retryable=True))
        if isinstance(e, (requests.ConnectionError, requests.exceptions.ChunkedEncodingError, OSError)):
            return self._scrub(
                ModelServiceError("connection_error", f"connection to DashScope failed: {e}", retryable=True)
            )
        if isinstance(e, requests.RequestException):
            return self._scrub(ModelServiceError("request_error", str(e), retryable=True))
        name = type(e).__name__
        code = "InvalidApiKey" if name == "AuthenticationError" else name
        return self._scrub(ModelServiceError(code, str(e) or name))

    def _scrub(self, e: ModelServiceError) -> ModelServiceError:
        return e.scrubbed(self.api_key)

    # ---- messages --------------------------------------------------------------------------------------

    def _to_dashscope(self, messages: list[Message], multimodal: bool) -> list[dict]:
        """Messages in DashScope's format: OpenAI-like roles and tool calls; content lists for multimodal."""
        out: list[dict] = []
        open_calls: list[tuple[str, str]] = []  # (id, name) of calls not answered yet
        for n, m in enumerate(messages):
            if m.role == FUNCTION:
                fid = (m.extra or {}).get("function_id")
                if fid is None:  # answer the oldest open call of that name
                    match = next((c for c in open_calls if c[1] == m.name), open_calls[0] if open_calls else None)
                    fid = match[0] if match else f"call_{n}"
                open_calls = [c for c in open_calls if c[0] != fid]
                tool: dict[str, Any] = {"role": "tool", "content": content_text(m.content), "tool_call_id": fid}
                if m.name:
                    tool["name"] = m.name
                out.append(tool)
                continue
            content: Any = self._content(m.content) if multimodal else _flat_text(m.content)
            if m.role == ASSISTANT and m.function_call is not None:
                fid = (m.extra or {}).get("function_id") or f"call_{n}"
                open_calls.append((fid, m.function_call.name))
                call = {"id": fid, "type": "function", "function": m.function_call.model_dump()}
                prev = out[-1] if out and out[-1]["role"] == ASSISTANT else None
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

    def _content(self, content: str | list[ContentItem]) -> list[dict]:
        if isinstance(content, str):
            return [{"text": content}] if content else []
        items: list[dict] = []
        for item in content:
            kind = item.kind
            if kind == "text":
                items.append({"text": item.text})
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
            raise ModelServiceError("file_not_found", f"media file not found: {value}") from None
        key = (path, st.st_size, st.st_mtime_ns)
        cached = self._uploads.get(key)
        now = time.monotonic()
        if cached is not None and now - cached[1] < _UPLOAD_TTL:
            return cached[0]
        try:
            url, _ = OssUtils.upload(
                model=self.model,
                file_path=path,
                api_key=self.api_key,
                base_address=self.base_url or dashscope.base_http_api_url,
            )
        except (requests.RequestException, DashScopeException, OSError) as e:
            raise self._scrub(
                ModelServiceError("upload_failed", f"uploading {os.path.basename(path)} to DashScope failed: {e}")
            ) from None
        self._uploads[key] = (url, now)
        return url


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


def service_error(
    status: int | None,
    code: str | None,
    message: str | None,
    request_id: str | None = None,
    retry_after: float | None = None,
) -> ModelServiceError:
    """The ModelServiceError for a DashScope error: an HTTP `status`, or None for an error event in a stream
    (whose status the SDK does not read), with the service's code and message."""
    if not code or code == "Unknown":  # the SDK's code for a body that was not DashScope's JSON
        code = str(status or "stream_error")
    text = message if isinstance(message, str) else str(message or "")
    if len(text) > _MAX_MESSAGE:  # e.g. a proxy's HTML error page
        text = text[:_MAX_MESSAGE] + " ..."
    where = f"HTTP {status}" if status else "in the stream"
    detail = f"{text} ({where}" + (f", request {request_id})" if request_id else ")")
    if status in (None, 400) and _CONTEXT_TOO_LONG.search(text):
        return ModelServiceError("context_too_long", f"{code}: {detail}")
    retryable = str(code).startswith(_TRANSIENT_CODES) or (status is not None and (status == 429 or status >= 500))
    if status in (401, 403) or code in ("InvalidApiKey", "AccessDenied"):
        retryable = False
    return ModelServiceError(code, detail, retryable=retryable, retry_after=retry_after if retryable else None)


def _retry_after(headers: dict) -> float | None:
    value = next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        when = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, when.timestamp() - time.time()) if when is not None else None


def _is_sse(headers: dict) -> bool:
    """Whether the answer was an event stream (so an error in it came as an error event)."""
    ctype = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    return "text/event-stream" in ctype


def _first_message(rsp: Any) -> dict | None:
    output = rsp.output or {}
    choices = output.get("choices")
    if choices:
        return choices[0].get("message")
    if output.get("text") is not None:
        return {"content": output["text"]}
    return None


def _gather_calls(calls: dict[int, list], tool_calls: list[dict]) -> None:
    """Fold streamed tool_call pieces into `calls`, by their index."""
    for tc in tool_calls:
        key = tc.get("index")
        if key is None:  # no index: a new id starts a new call, anything else continues the last one
            last = max(calls, default=None)
            new = last is None or (tc.get("id") and calls[last][0] and tc["id"] != calls[last][0])
            key = len(calls) if new else last
        entry = calls.get(key)
        if entry is None:
            entry = calls[key] = ["", "", []]
        if tc.get("id") and not entry[0]:
            entry[0] = tc["id"]
        fn = tc.get("function") or {}
        if fn.get("name") and not entry[1]:
            entry[1] = fn["name"]
        if fn.get("arguments"):
            entry[2].append(fn["arguments"])


def _add_usage(usage: Usage, u: dict) -> None:
    prompt = u.get("input_tokens", u.get("prompt_tokens", 0)) or 0
    completion = u.get("output_tokens", u.get("completion_tokens", 0)) or 0
    usage.add(int(prompt), int(completion))


def _text(content: Any) -> str:
    """Text of a DashScope content: a string, or a list of {'text': ...} items."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(item["text"] for item in content if isinstance(item, dict) and item.get("text"))


def _flat_text(content: str | list[ContentItem]) -> str:
    if isinstance(content, str):
        return content
    parts = [item.text if item.kind == "text" else f"[{item.kind}: {os.path.basename(item.value)}]" for item in content]
    return "\n".join(p for p in parts if p)


def _empty(content: Any) -> bool:
    return not content or (isinstance(content, list) and all(not item.get("text") for item in content))


__all__ = ["DashScopeModel", "service_error"]

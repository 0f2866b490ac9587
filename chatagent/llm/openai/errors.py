"""What an OpenAI-compatible server's failures mean: each HTTP error, error object or broken connection as a
ModelServiceError with its code, whether a retry may help, and a message that names the server, never the key."""

from __future__ import annotations

import email.utils
import re
import time
from typing import Any

import orjson

from chatagent.errors import ModelErrorCode, ModelServiceError
from chatagent.llm.prepare import json_object
from chatagent.utils.keys import mask_secrets

_CONTEXT = re.compile(
    r"context[ _-]?length|context window|maximum context|too many tokens|prompt is too long|input is too long"
    r"|input length|reduce the length|maximum input length|exceeds? the model|input token count|too many input tokens",
    re.IGNORECASE,
)
_TOOLS = re.compile(r"\btools?\b|tool_choice|function[ _]?call", re.IGNORECASE)
_UNSUPPORTED = re.compile(
    r"support|require|unrecogni[sz]ed|unknown|not allowed|not permitted|extra|--jinja", re.IGNORECASE
)
_RETRYABLE_STATUS = {408, 409, 425, 429}
_STREAM_OPTIONS = re.compile(r"stream_options|include_usage", re.IGNORECASE)


def error_from_status(
    status: int,
    response: Any,
    body: Any,
    has_tools: bool,
    *,
    where: str,
    model: str,
    api_key: str | None,
    key_hint: str = "api_key / OPENAI_API_KEY",
) -> ModelServiceError:
    """The ModelServiceError for an HTTP error (or an error object in a 200 response) from the server `where`:
    its code, and whether it is retryable, from the status and the server's message (`key_hint`: where the key
    comes from, said on 401 and 403)."""
    message, code = _error_message(body, response)
    message = mask_secrets(message, [api_key])
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
        return ModelServiceError(status, message, hint=f"check {key_hint} for {where}")
    if status == 404:
        return ModelServiceError(status, message, hint=f"check the model name {model!r} and model_server {where!r}")
    return ModelServiceError(status, message)


def error_body(data: bytes) -> Any:
    """An error response's body as the openai SDK hands it over: the `error` object of a JSON body, else the JSON,
    else the text."""
    try:
        parsed: Any = orjson.loads(data)
    except orjson.JSONDecodeError:
        return data.decode("utf-8", "replace")
    obj = json_object(parsed)
    error = json_object(obj.get("error")) if obj is not None else None
    return error if error is not None else parsed


def no_answer(where: str, e: BaseException | None = None) -> ModelServiceError:
    """The request timed out before the server answered: `e` (httpx's) tells whether making the connection did."""
    kind = type(e).__name__ if e is not None else ""
    if kind == "ConnectTimeout":
        message = f"no connection to {where} in time"
    elif kind == "PoolTimeout":
        message = f"no free connection to {where} in time"
    else:
        message = f"no answer from {where} in time"
    return ModelServiceError(ModelErrorCode.TIMEOUT, message, retryable=True)


def unreachable(where: str, cause: BaseException, api_key: str | None) -> ModelServiceError:
    """The request could not be sent (refused connection, DNS, TLS, ...)."""
    return ModelServiceError(
        ModelErrorCode.CONNECTION_ERROR,
        f"cannot reach {where}: {mask_secrets(str(cause), [api_key])}",
        retryable=True,
    )


def broken_body(where: str, e: BaseException, api_key: str | None) -> ModelServiceError:
    """An httpx failure while reading the body, as a retryable ModelServiceError."""
    if "Timeout" in type(e).__name__:
        return ModelServiceError(ModelErrorCode.TIMEOUT, f"{where} stopped sending (read timeout)", retryable=True)
    return ModelServiceError(
        ModelErrorCode.STREAM_BROKEN,
        f"connection to {where} broke: {mask_secrets(str(e), [api_key])}",
        retryable=True,
    )


def is_http_error(e: BaseException) -> bool:
    """Whether `e` is an httpx (or the SDK's httpx2) transport error raised while reading a body."""
    return any(c.__name__ == "HTTPError" and c.__module__.startswith("httpx") for c in type(e).__mro__)


def error_status(error: Any) -> int:
    """The HTTP status an error object in a 200 response stands for: its `code`, else 500."""
    obj = json_object(error)
    return int_or_none(obj.get("code") if obj is not None else None) or 500


def int_or_none(value: Any) -> int | None:
    """`value` as an int (a number or a numeric string from JSON), else None."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


_TAG = re.compile(rb"<[^>]*>|\s+")


def snippet(data: bytes | str, limit: int = 200) -> str:
    """A short readable excerpt of a body (HTML tags and runs of spaces squeezed)."""
    if isinstance(data, str):
        data = data.encode()
    text = _TAG.sub(b" ", data[:4000]).strip().decode("utf-8", "replace")
    return text[:limit] + ("..." if len(text) > limit else "")


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
        return snippet(body.encode()), None
    text = ""
    if response is not None:
        try:
            text = response.text
        except Exception:
            text = ""
    return (snippet(text.encode()) if text else f"HTTP {getattr(response, 'status_code', '?')}"), None


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

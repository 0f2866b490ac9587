"""DashScope's answers read into fragments and errors: the streamed chunks of a reply (`ReplyReader`, one parser
for the sync and the async stream), a whole reply (`whole_reply`), and the errors the service sends (`check`,
`service_error`). It reads the SDK's response objects (`rsp.status_code`, `rsp.output`, `rsp.usage`)."""

from __future__ import annotations

import email.utils
import re
import time
from dataclasses import dataclass, field
from typing import Any

from chatagent.errors import ModelErrorCode, ModelServiceError
from chatagent.llm.cut_off import cut_call_error
from chatagent.llm.request import Usage, reported_tokens
from chatagent.schema import ASSISTANT, FunctionCall, Message
from chatagent.schema.fragment import Fragment
from chatagent.schema.parts import unique_call_id

_make = Fragment.unchecked

_CONTEXT_TOO_LONG = re.compile(
    r"range of input length|input length|context length|too long|maximum context|exceeds? the maximum", re.I
)
# DashScope error codes that a later retry can fix, whatever HTTP status came with them.
_TRANSIENT_CODES = ("Throttling", "InternalError", "ServiceUnavailable", "RequestTimeOut", "Timeout")
_MAX_MESSAGE = 1000


@dataclass
class PartialCall:
    """A tool call gathered from streamed pieces: its id, its name, the pieces of its arguments' text."""

    id: str = ""
    name: str = ""
    pieces: list[str] = field(default_factory=list)


class ReplyReader:
    """DashScope's incremental chunks of one streamed reply, read one by one (`read`), and its end (`finish`):
    text and reasoning at index 0, then each tool call whole. The same parsing for the sync and the async stream."""

    __slots__ = ("api_key", "calls", "started", "finished", "last_usage")

    def __init__(self, api_key: str | None) -> None:
        self.api_key = api_key  # masked in error messages
        self.calls: dict[int, PartialCall] = {}  # by the call's index
        self.started = False
        self.finished: str | None = None
        self.last_usage: dict[str, Any] | None = None

    def read(self, rsp: Any) -> list[Fragment] | None:
        """The fragments of one chunk (None for a chunk without text); a chunk that is an error raises."""
        if rsp.status_code != 200:
            check(rsp, self.api_key, in_stream=_is_sse(rsp.get("headers") or {}))
        if rsp.usage:
            self.last_usage = rsp.usage
        output = rsp.output
        choices = output.get("choices") if output else None
        if not choices:
            text = output.get("text") if output else None  # result_format='text' style answers
            if text:
                self.started = True
                return [_make(ASSISTANT, text, None, None, None, None, 0)]
            return None
        choice = choices[0]
        out = None
        msg = choice.get("message")
        if msg:
            reasoning = msg.get("reasoning_content")
            content = msg.get("content")
            text = content if isinstance(content, str) else _text(content)
            if reasoning or text:
                self.started = True
                out = [_make(ASSISTANT, text or "", None, None, reasoning or None, None, 0)]
            tool_calls = msg.get("tool_calls")
            if tool_calls:
                gather_calls(self.calls, tool_calls)
        reason = choice.get("finish_reason")
        if reason and reason != "null":
            self.finished = reason
        return out

    def account(self, usage: Usage | None) -> None:
        """Add the reply's usage (DashScope's chunks carry the total so far) to `usage`."""
        if usage is not None and self.last_usage:
            _add_usage(usage, self.last_usage)

    def finish(self) -> list[list[Fragment]]:
        """After the last chunk: the calls and a length mark; or the error the stream amounts to."""
        finished, calls = self.finished, self.calls
        if finished is None:
            raise ModelServiceError(
                ModelErrorCode.STREAM_INCOMPLETE,
                "the stream ended without a finish_reason (connection cut?)",
                retryable=True,
            )
        if finished == "length" and calls:
            raise cut_call_error()
        out: list[list[Fragment]] = []
        base = 1 if self.started else 0
        ids: set[str] = set()
        for n, key in enumerate(sorted(calls)):
            gathered = calls[key]
            call = FunctionCall(gathered.name, "".join(gathered.pieces))
            extra = {"function_id": unique_call_id(gathered.id or f"call_{key}", ids)}
            out.append([_make(ASSISTANT, "", None, call, None, extra, base + n)])
        if (not self.started and not calls) or finished == "length":  # a text cut off by max_tokens says so
            extra = {"stop_reason": "length"} if finished == "length" else None
            out.append([_make(ASSISTANT, "", None, None, None, extra, 0)])
        return out


def whole_reply(rsp: Any, usage: Usage | None, api_key: str | None) -> list[Message]:
    """The messages of a non-streamed answer (`api_key` is masked in an error's message)."""
    check(rsp, api_key)
    if usage is not None and rsp.get("usage"):
        _add_usage(usage, rsp["usage"])
    msg = _first_message(rsp) or {}
    output: dict[str, Any] = rsp.output or {}
    choices: list[dict[str, Any]] = output.get("choices") or [{}]
    cut = choices[0].get("finish_reason") == "length"
    tool_calls: list[dict[str, Any]] = msg.get("tool_calls") or []
    if cut and tool_calls:
        raise cut_call_error()
    out: list[Message] = []
    text = _text(msg.get("content"))
    reasoning: str | None = msg.get("reasoning_content") or None
    if text or reasoning:
        out.append(Message.unchecked(ASSISTANT, text, None, None, reasoning, None))
    ids: set[str] = set()
    for n, call in enumerate(tool_calls):
        fn: dict[str, Any] = call.get("function") or {}
        fid = unique_call_id(call.get("id") or f"call_{n}", ids)
        function_call = FunctionCall(fn.get("name") or "", fn.get("arguments") or "")
        out.append(Message.unchecked(ASSISTANT, "", None, function_call, None, {"function_id": fid}))
    out = out or [Message.unchecked(ASSISTANT, "")]
    if cut:
        out[0].extra = {**(out[0].extra or {}), "stop_reason": "length"}
    return out


def check(rsp: Any, api_key: str | None, in_stream: bool = False) -> None:
    """Raise ModelServiceError (`api_key` masked) for a response that is not a success."""
    status = int(rsp.status_code or 0)
    if status == 200:
        return
    after = _retry_after(rsp.get("headers") or {})
    code, message, request_id = rsp.get("code"), rsp.get("message"), rsp.get("request_id")
    raise service_error(None if in_stream else status, code, message, request_id, after).scrubbed(api_key)


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
        code = str(status or ModelErrorCode.STREAM_ERROR)
    text = message if isinstance(message, str) else str(message or "")
    if len(text) > _MAX_MESSAGE:  # e.g. a proxy's HTML error page
        text = text[:_MAX_MESSAGE] + " ..."
    where = f"HTTP {status}" if status else "in the stream"
    detail = f"{text} ({where}" + (f", request {request_id})" if request_id else ")")
    if status in (None, 400) and _CONTEXT_TOO_LONG.search(text):
        return ModelServiceError(ModelErrorCode.CONTEXT_TOO_LONG, f"{code}: {detail}")
    retryable = str(code).startswith(_TRANSIENT_CODES) or (status is not None and (status == 429 or status >= 500))
    if status in (401, 403) or code in ("InvalidApiKey", "AccessDenied"):
        retryable = False
    return ModelServiceError(code, detail, retryable=retryable, retry_after=retry_after if retryable else None)


def _retry_after(headers: dict[str, str]) -> float | None:
    value = next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        when = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, when.timestamp() - time.time()) if when is not None else None


def _is_sse(headers: dict[str, str]) -> bool:
    """Whether the answer was an event stream (so an error in it came as an error event)."""
    ctype = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    return "text/event-stream" in ctype


def _first_message(rsp: Any) -> dict[str, Any] | None:
    output: dict[str, Any] = rsp.output or {}
    choices = output.get("choices")
    if choices:
        return choices[0].get("message")
    if output.get("text") is not None:
        return {"content": output["text"]}
    return None


def gather_calls(calls: dict[int, PartialCall], tool_calls: list[dict[str, Any]]) -> None:
    """Fold streamed tool_call pieces into `calls`, by their index."""
    for tc in tool_calls:
        key: int | None = tc.get("index")
        if key is None:  # no index: a new id starts a new call, anything else continues the last one
            last = max(calls, default=None)
            if last is None or (tc.get("id") and calls[last].id and tc["id"] != calls[last].id):
                key = len(calls)
            else:
                key = last
        entry = calls.get(key)
        if entry is None:
            entry = calls[key] = PartialCall()
        if tc.get("id") and not entry.id:
            entry.id = tc["id"]
        fn: dict[str, Any] = tc.get("function") or {}
        if fn.get("name") and not entry.name:
            entry.name = fn["name"]
        if fn.get("arguments"):
            entry.pieces.append(fn["arguments"])


def _add_usage(usage: Usage, u: dict[str, Any]) -> None:
    prompt = u.get("input_tokens", u.get("prompt_tokens", 0)) or 0
    completion = u.get("output_tokens", u.get("completion_tokens", 0)) or 0
    believed = reported_tokens("DashScope", prompt, completion)  # (None: not believable, logged; nothing counted)
    if believed is not None:
        usage.add(*believed)


def _text(content: Any) -> str:
    """Text of a DashScope content: a string, or a list of {'text': ...} items."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    items: list[dict[str, Any]] = [item for item in content if isinstance(item, dict)]  # JSON objects
    return "".join(item["text"] for item in items if item.get("text"))


__all__ = ["ReplyReader", "check", "service_error", "whole_reply"]

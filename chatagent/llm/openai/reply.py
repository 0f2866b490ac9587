"""An OpenAI-compatible server's reply read into messages: a streamed reply event by event (`ReplyReader`, the
hot path: orjson, no pydantic object per chunk), a whole completion (`parse_completion`), and the usage.

Streamed tool calls are assembled by their index and each is yielded, complete, when the stream ends:
the reply is not acted on before it is complete anyway, servers may interleave the deltas of parallel
calls, and the text (at index 0) always comes before the calls, even when a server sends more text after
a call has started. A stream that ends without `[DONE]` or a finish_reason is an error, never a reply.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol, cast

import orjson

from chatagent.errors import ModelErrorCode, ModelServiceError
from chatagent.llm.cut_off import cut_call_error
from chatagent.llm.openai.errors import error_status, snippet
from chatagent.llm.prepare import fix_surrogates, json_object
from chatagent.llm.request import Usage, reported_tokens
from chatagent.schema import ASSISTANT, FunctionCall, Message
from chatagent.schema.fragment import Fragment, fragment
from chatagent.schema.parts import unique_call_id
from chatagent.utils.tokens import count_tokens

# the unvalidated constructor, bound once for fragments built per chunk
_make = Fragment.unchecked

Prompt = tuple[list[Message], "list[dict[str, Any]] | None"]  # what a request asked: the messages and the functions
_CallParts = list[Any]  # a streamed tool call: [its id (str | None), its name (str), its argument pieces (list[str])]
_Json = dict[str, Any] | list[Any] | str | int | float | bool | None  # a JSON value as orjson reads it


class Server(Protocol):
    """What reading a reply needs of the backend: the server's name for messages, and its error mapping."""

    def endpoint(self) -> str: ...

    def status_error(self, status: int, response: Any, body: Any, has_tools: bool) -> ModelServiceError: ...


class ReplyReader:
    """The events of one streamed reply, read one by one (`event`), and its end (`finish`): the same parsing
    for the synchronous and the asynchronous stream."""

    __slots__ = (
        "server", "prompt", "has_tools", "calls", "text_seen", "choice_seen", "finished", "done", "reason", "usage",
        "texts",
    )  # fmt: skip

    def __init__(self, server: Server, prompt: Prompt) -> None:
        self.server = server
        self.prompt = prompt
        self.has_tools = bool(prompt[1])
        self.texts: list[str] = []  # to estimate the usage when the server reports none
        self.calls: dict[int, _CallParts] = {}  # tool index -> [id, name, argument pieces]
        self.text_seen = self.choice_seen = self.finished = self.done = False
        self.reason: str | None = None
        self.usage: Any = None  # the server's usage report (checked where it is read)

    def event(self, data: bytes) -> list[Fragment] | None:
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
                    f"malformed event from {self.server.endpoint()}: {snippet(data)}",
                    retryable=True,
                ) from None
        if type(obj) is not dict:
            raise ModelServiceError(ModelErrorCode.BAD_RESPONSE, f"unexpected event: {snippet(data)}", retryable=True)
        choices = obj.get("choices")
        if not choices:  # the usage chunk, an error, or a keep-alive
            if obj.get("error"):
                status = error_status(obj["error"])
                raise self.server.status_error(status, None, obj, self.has_tools)
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
            out = [_make(ASSISTANT, content, None, None, None, None, 0)]
        else:
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if content or reasoning:
                if content and type(content) is not str:  # a list of parts, as a few servers send
                    content = _parts_text(content)
                self.text_seen = True
                self.texts += (content or "", reasoning or "")
                out = [_make(ASSISTANT, content or "", None, None, reasoning or None, None, 0)]
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

    def finish(self, usage: Usage | None) -> list[list[Fragment]]:
        """After the last event: the calls, a length mark, the usage; or the error the stream amounts to."""
        where = self.server.endpoint()
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
            add_usage(usage, self.usage, self.prompt, "".join(texts), where)
        if cut and calls:
            raise cut_call_error()
        out: list[list[Fragment]] = []
        start = 1 if self.text_seen else 0
        ids: set[str] = set()
        for n, i in enumerate(sorted(calls)):
            fid, name, pieces = calls[i]
            call = FunctionCall(name, "".join(pieces))
            out.append([_make(ASSISTANT, "", None, call, None, {"function_id": unique_call_id(fid, ids)}, start + n)])
        if not (self.text_seen or calls) or cut:  # a text cut off by max_tokens says so
            extra = {"stop_reason": "length"} if cut else None
            out.append([_make(ASSISTANT, "", None, None, None, extra, 0)])
        return out


def parse_completion(server: Server, body: bytes, usage: Usage | None, prompt: Prompt) -> list[Message]:
    """The messages of a whole (non-streamed) completion; its usage added to `usage`."""
    has_tools = bool(prompt[1])
    try:
        obj: _Json = orjson.loads(body)
    except orjson.JSONDecodeError:
        obj = _loads_lone_surrogates(body)
    if obj is None:
        raise ModelServiceError(
            ModelErrorCode.BAD_RESPONSE,
            f"{server.endpoint()} answered with a body that is not JSON "
            f"(is model_server the API's base URL, ending in /v1?): {snippet(body)}",
        )
    if not isinstance(obj, dict):
        raise ModelServiceError(ModelErrorCode.BAD_RESPONSE, f"unexpected answer: {snippet(body)}")
    if obj.get("error") and not obj.get("choices"):
        status = error_status(obj["error"])
        raise server.status_error(status, None, obj, has_tools)
    choices = obj.get("choices")
    if not choices:
        raise ModelServiceError(ModelErrorCode.EMPTY_RESPONSE, f"{server.endpoint()} sent no choices", retryable=True)
    msg: dict[str, Any] = choices[0].get("message") or {}
    out: list[Message] = []
    text = msg.get("content") or ""
    if type(text) is not str:
        text = _parts_text(text)
    reasoning = msg.get("reasoning_content") or msg.get("reasoning")
    if text or reasoning:
        out.append(Message.unchecked(ASSISTANT, text, None, None, reasoning or None, None))
    tool_calls: list[Any] = msg.get("tool_calls") or []
    if not tool_calls and msg.get("function_call"):
        tool_calls = [{"function": msg["function_call"]}]
    cut = choices[0].get("finish_reason") == "length"
    if cut and tool_calls:
        raise cut_call_error()
    ids: set[str] = set()
    for tc in tool_calls:
        fn: dict[str, Any] = tc.get("function") or {}
        call = FunctionCall(fn.get("name") or "", _call_arguments(fn.get("arguments")))
        fid = unique_call_id(tc.get("id"), ids)
        out.append(Message.unchecked(ASSISTANT, "", None, call, None, {"function_id": fid}))
    if not out:
        out.append(Message.unchecked(ASSISTANT, "", None, None, None, None))
    if cut:
        out[0].extra = {**(out[0].extra or {}), "stop_reason": "length"}
    if usage is not None:
        add_usage(usage, obj.get("usage"), prompt, "".join(map(_said, out)), server.endpoint())
    return out


def non_sse_reply(
    server: Server, body: bytes, ctype: str, usage: Usage | None, prompt: Prompt
) -> Iterator[list[Fragment]]:
    """A streaming request answered without an event stream: a whole JSON completion, an error, or junk."""
    if "json" in ctype:
        reply = parse_completion(server, body, usage, prompt)
        yield [fragment(m, i) for i, m in enumerate(reply)]
        return
    raise ModelServiceError(
        ModelErrorCode.BAD_RESPONSE,
        f"{server.endpoint()} answered {ctype or 'no content type'}, not an event stream "
        f"(is model_server the API's base URL, ending in /v1?): {snippet(body)}",
    )


def _said(m: Message) -> str:
    """Everything a message says that costs tokens: text, reasoning, a call's name and arguments."""
    call = m.function_call
    return m.text + (m.reasoning_content or "") + (f"{call.name}{call.arguments}" if call else "")


def add_usage(usage: Usage, reported: Any, prompt: Prompt, reply_text: str, model: str = "") -> None:
    """Add the server's usage report to `usage`; without one (a server that ignores or refuses stream_options), or
    with one that cannot be right (`reported_tokens`), an offline estimate (chatagent.utils.tokens) of the prompt
    and of the reply, so that usage never stays 0 and never goes negative or absurd."""
    counts = json_object(reported)
    if counts is not None and (counts.get("prompt_tokens") or counts.get("completion_tokens")):
        believed = reported_tokens(model, counts.get("prompt_tokens"), counts.get("completion_tokens"))
        if believed is not None:
            usage.add(*believed)
            return

    messages, functions = prompt
    asked = sum(4 + count_tokens(_said(m)) for m in messages)  # about 4 tokens of each message's framing
    if functions:
        asked += count_tokens(orjson.dumps(functions).decode())
    usage.add(asked, count_tokens(reply_text))


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


def _parts_text(content: Any) -> str:
    """The text of content sent as a list of parts ({'type': 'text', 'text': ...})."""
    if isinstance(content, list):
        return "".join(_part_text(p) for p in cast("list[Any]", content))
    return str(content)


def _part_text(part: Any) -> str:
    obj = json_object(part)
    return str(part) if obj is None else obj.get("text") or ""

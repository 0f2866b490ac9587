"""A Bedrock Converse reply read into fragments: ConverseStream's events (`messageStart`, `contentBlockStart`,
`contentBlockDelta` with `text`, `toolUse.input` or `reasoningContent`, `contentBlockStop`, `messageStop`,
`metadata`, and the exceptions) framed by the AWS event stream, or a whole Converse response; the usage with the
prompt cache's reads and writes.

Reasoning (Claude's thinking through Bedrock) becomes `reasoning_content`, and its blocks (text and signature, or
redacted) are kept in the first message's `extra['reasoning_state']` to go back next turn. The forced response tool
of a structured answer is the answer's text, not a call.
"""

from __future__ import annotations

from typing import Any, cast

import orjson

from chatagent.errors import ModelErrorCode, ModelServiceError
from chatagent.llm.bedrock.eventstream import EventStreamSplitter
from chatagent.llm.cut_off import cut_call_error
from chatagent.llm.http_backend import Prompt, as_object, loads
from chatagent.llm.reply_parts import NATIVE_MARK, ReplyParts
from chatagent.llm.request import Usage
from chatagent.schema import ASSISTANT, FunctionCall, Message
from chatagent.schema.fragment import Fragment
from chatagent.schema.parts import unique_call_id

PROVIDER = "bedrock"
# an exception's name -> the HTTP status Bedrock gives it
EXCEPTION_STATUS = {
    "validationException": 400, "accessDeniedException": 403, "resourceNotFoundException": 404,
    "modelTimeoutException": 408, "modelErrorException": 424, "throttlingException": 429,
    "internalServerException": 500, "modelStreamErrorException": 500, "serviceUnavailableException": 503,
    "modelNotReadyException": 429,
}  # fmt: skip


class ConverseReader:
    """The events of one ConverseStream reply (`feed`: bytes in, fragment lists out; `finish`: the end)."""

    __slots__ = ("server", "prompt", "response_tool", "frames", "parts", "answers", "reasoning", "usage", "stop")

    def __init__(self, server: Any, prompt: Prompt, response_tool: str | None) -> None:
        self.server = server
        self.prompt = prompt
        self.response_tool = response_tool
        self.frames = EventStreamSplitter()
        self.parts = ReplyParts()
        self.answers: set[int] = set()  # blocks of the response tool: their input is the answer's text
        self.reasoning: dict[int, dict[str, Any]] = {}  # block index -> its reasoningText (text, signature)
        self.usage: dict[str, Any] = {}
        self.stop: str | None = None

    def feed(self, chunk: bytes) -> list[list[Fragment]]:
        out: list[list[Fragment]] = []
        for headers, payload in self.frames.feed(chunk):
            fragments = self.message(headers, payload)
            if fragments:
                out.append(fragments)
        return out

    def message(self, headers: dict[str, str], payload: bytes) -> list[Fragment] | None:
        kind = headers.get(":message-type", "event")
        if kind != "event":
            name = headers.get(":exception-type") or headers.get(":error-code") or "internalServerException"
            body = as_object(loads(payload, self.server.endpoint())) if payload else {}
            message = str(body.get("message") or body.get("Message") or headers.get(":error-message") or name)
            status = EXCEPTION_STATUS.get(name, 500)
            error = orjson.dumps({"message": f"{name}: {message}"})
            raise self.server.status_error(status, {}, error, bool(self.prompt[1]))
        event = headers.get(":event-type")
        obj = as_object(loads(payload, self.server.endpoint()))
        if event == "contentBlockDelta":
            index = obj.get("contentBlockIndex")
            delta = as_object(obj.get("delta"))
            text = delta.get("text")
            if text:
                return self.parts.text(text)
            tool = delta.get("toolUse")
            if tool is not None:
                piece = str(as_object(tool).get("input") or "")
                if index in self.answers:
                    return self.parts.text(piece) if piece else None
                if piece:
                    self.parts.call_arguments(index, piece)
                return None
            reasoning = delta.get("reasoningContent")
            if reasoning is not None:
                return self._reasoning(cast(int, index), as_object(reasoning))
            return None
        if event == "contentBlockStart":
            tool = as_object(as_object(obj.get("start")).get("toolUse"))
            if tool:
                index = cast(int, obj.get("contentBlockIndex"))
                if tool.get("name") == self.response_tool:
                    self.answers.add(index)
                    self.parts.native_schema = True
                else:
                    self.parts.start_call(index, tool.get("toolUseId"), str(tool.get("name") or ""))
            return None
        if event == "contentBlockStop":
            if obj.get("contentBlockIndex") in self.reasoning:
                return self.parts.reasoning_state({"provider": PROVIDER, "blocks": self._kept()})
            return None
        if event == "messageStop":
            self.stop = str(obj.get("stopReason") or "end_turn")
            return None
        if event == "metadata":
            self.usage = as_object(obj.get("usage"))
            return None
        return None  # messageStart, and events added later

    def _reasoning(self, index: int, delta: dict[str, Any]) -> list[Fragment] | None:
        block = self.reasoning.setdefault(index, {"text": ""})
        if delta.get("text"):
            block["text"] += delta["text"]
            return self.parts.reasoning(delta["text"])
        if delta.get("signature"):
            block["signature"] = delta["signature"]
        if delta.get("redactedContent"):
            block["redacted"] = delta["redactedContent"]
        return None

    def _kept(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for block in self.reasoning.values():
            if "redacted" in block:
                out.append({"reasoningContent": {"redactedContent": block["redacted"]}})
            else:
                text = {"text": block["text"], **({"signature": block["signature"]} if "signature" in block else {})}
                out.append({"reasoningContent": {"reasoningText": text}})
        return out

    def finish(self, usage: Usage | None) -> list[list[Fragment]]:
        if self.stop is None or self.frames.pending:
            raise ModelServiceError(
                ModelErrorCode.STREAM_INCOMPLETE,
                f"the stream from {self.server.endpoint()} ended before the answer did",
                retryable=True,
            )
        if usage is not None:
            add_usage(usage, self.usage, self.parts, self.prompt)
        return self.parts.finish(self.stop == "max_tokens")


def whole_converse(
    server: Any, body: bytes, usage: Usage | None, prompt: Prompt, response_tool: str | None
) -> list[Message]:
    """The messages of a whole Converse response; its usage added to `usage`."""
    obj = as_object(loads(body, server.endpoint()))
    blocks = cast("list[dict[str, Any]]", as_object(as_object(obj.get("output")).get("message")).get("content") or [])
    text = "".join(str(b.get("text") or "") for b in blocks)
    kept = [b for b in blocks if "reasoningContent" in b]
    reasoning = "".join(
        str(as_object(as_object(b["reasoningContent"]).get("reasoningText")).get("text") or "") for b in kept
    )
    calls = [as_object(b["toolUse"]) for b in blocks if "toolUse" in b]
    for call in calls:
        if call.get("name") == response_tool:
            text += orjson.dumps(call.get("input") or {}).decode()
    out: list[Message] = []
    if text or reasoning or kept:
        extra = {"reasoning_state": {"provider": PROVIDER, "blocks": kept}} if kept else None
        if any(c.get("name") == response_tool for c in calls):
            extra = {**(extra or {}), **NATIVE_MARK}
        out.append(Message.unchecked(ASSISTANT, text, None, None, reasoning or None, extra))
    cut = obj.get("stopReason") == "max_tokens"
    ids: set[str] = set()
    parts = ReplyParts()
    for call in calls:
        if call.get("name") == response_tool:
            continue
        if cut:
            raise cut_call_error()
        fc = FunctionCall(str(call.get("name") or ""), orjson.dumps(call.get("input") or {}).decode())
        out.append(
            Message.unchecked(
                ASSISTANT, "", None, fc, None, {"function_id": unique_call_id(call.get("toolUseId"), ids)}
            )
        )
        parts.said.append(fc.arguments)
    if not out:
        out.append(Message.unchecked(ASSISTANT, "", None, None, None, None))
    if cut:
        out[0].extra = {**(out[0].extra or {}), "stop_reason": "length"}
    if usage is not None:
        parts.said += [text, reasoning]
        add_usage(usage, as_object(obj.get("usage")), parts, prompt)
    return out


def add_usage(usage: Usage, reported: dict[str, Any], parts: ReplyParts, prompt: Prompt) -> None:
    """Converse's usage (inputTokens is what the cache neither read nor wrote) added to `usage`."""
    read, write = _int(reported.get("cacheReadInputTokens")), _int(reported.get("cacheWriteInputTokens"))
    plain, output = _int(reported.get("inputTokens")), _int(reported.get("outputTokens"))
    if plain or read or write or output:
        usage.add(plain + read + write, output, cache_read_tokens=read, cache_write_tokens=write)
        return
    messages, functions = prompt
    parts.estimate(usage, "".join(m.text for m in messages) + (orjson.dumps(functions).decode() if functions else ""))


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


__all__ = ["ConverseReader", "add_usage", "whole_converse"]

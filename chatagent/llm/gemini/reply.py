"""A Gemini reply read into fragments: each `GenerateContentResponse` chunk of the SSE stream (or the one whole
response) as text, thoughts (`thought: true` parts, as reasoning) and function calls; the usage with the tokens a
context cache served (`cachedContentTokenCount`).

Thought signatures (on text and `functionCall` parts) are kept in the first message's `extra['reasoning_state']`
(`{'provider': 'gemini', 'signatures': [...]}`, one per part as chatagent sends the turn back: the text, then each
call), so that the next request puts them back where the API expects them.
"""

from __future__ import annotations

from typing import Any, cast

import orjson

from chatagent.errors import ModelErrorCode, ModelServiceError
from chatagent.llm.http_backend import Prompt, as_object, loads
from chatagent.llm.reply_parts import ReplyParts
from chatagent.llm.request import Usage
from chatagent.llm.sse import SSESplitter
from chatagent.schema import Message
from chatagent.schema.fragment import Fragment
from chatagent.schema.stream import collect

PROVIDER = "gemini"
_STOPPED = {"STOP", "MAX_TOKENS", "FINISH_REASON_UNSPECIFIED"}


class GeminiReader:
    """The chunks of one streamed reply (`feed`: bytes in, fragment lists out; `finish`: the end)."""

    __slots__ = ("server", "prompt", "sse", "parts", "usage", "reason", "text_signature", "call_signatures")

    def __init__(self, server: Any, prompt: Prompt, native_schema: bool = False) -> None:
        self.server = server
        self.prompt = prompt
        self.sse = SSESplitter()
        self.parts = ReplyParts()
        self.parts.native_schema = native_schema
        self.usage: dict[str, Any] = {}
        self.reason: str | None = None
        self.text_signature: str | None = None
        self.call_signatures: list[str | None] = []

    def feed(self, chunk: bytes) -> list[list[Fragment]]:
        out: list[list[Fragment]] = []
        for data in self.sse.feed(chunk):
            fragments = self.chunk(as_object(loads(data, self.server.endpoint())))
            if fragments:
                out.append(fragments)
        return out

    def chunk(self, obj: dict[str, Any]) -> list[Fragment]:
        """The fragments of one response chunk."""
        if obj.get("error"):
            error = as_object(obj["error"])
            status = error.get("code") if isinstance(error.get("code"), int) else 500
            raise self.server.status_error(status, {}, orjson.dumps(obj), bool(self.prompt[1]))
        if obj.get("usageMetadata"):
            self.usage = as_object(obj["usageMetadata"])
        candidates = cast("list[Any]", obj.get("candidates") or [])
        if not candidates:
            blocked = as_object(obj.get("promptFeedback")).get("blockReason")
            if blocked:
                raise ModelServiceError(str(blocked), f"{self.server.endpoint()} blocked the prompt ({blocked})")
            return []
        candidate = as_object(candidates[0])
        out: list[Fragment] = []
        parts = self.parts
        for part in cast("list[dict[str, Any]]", as_object(candidate.get("content")).get("parts") or []):
            signature = part.get("thoughtSignature")
            call = part.get("functionCall")
            if call is not None:
                fn = as_object(call)
                key = len(parts.calls)
                parts.start_call(key, fn.get("id"), str(fn.get("name") or ""))
                parts.call_arguments(key, orjson.dumps(fn.get("args") or {}).decode())
                self.call_signatures.append(signature)
            elif part.get("text"):
                out += parts.reasoning(part["text"]) if part.get("thought") else parts.text(part["text"])
                if signature and not part.get("thought"):
                    self.text_signature = signature
            elif signature:  # a signature on an empty part: it belongs to the text
                self.text_signature = signature
        if candidate.get("finishReason"):
            self.reason = str(candidate["finishReason"])
        return out

    def finish(self, usage: Usage | None) -> list[list[Fragment]]:
        for data in self.sse.end():
            self.chunk(as_object(loads(data, self.server.endpoint())))
        if self.reason is None:
            raise ModelServiceError(
                ModelErrorCode.STREAM_INCOMPLETE,
                f"the stream from {self.server.endpoint()} ended before the answer did",
                retryable=True,
            )
        if self.text_signature or any(self.call_signatures):
            texts = [self.text_signature] if self.parts.text_seen else []
            self.parts.keep_state({"provider": PROVIDER, "signatures": texts + self.call_signatures})
        if usage is not None:
            add_usage(usage, self.usage, self.parts, self.prompt)
        out = self.parts.finish(self.reason == "MAX_TOKENS")
        if self.reason not in _STOPPED:  # SAFETY, RECITATION, ...: the reply says why it stopped
            out.append([Fragment.unchecked("assistant", "", extra={"stop_reason": self.reason.lower()}, index=0)])
        return out


def whole_response(
    server: Any, body: bytes, usage: Usage | None, prompt: Prompt, native_schema: bool = False
) -> list[Message]:
    """The messages of a whole (non-streamed) response; its usage added to `usage`."""
    reader = GeminiReader(server, prompt, native_schema)
    first = reader.chunk(as_object(loads(body, server.endpoint())))
    return collect([first, *reader.finish(usage)])


def add_usage(usage: Usage, reported: dict[str, Any], parts: ReplyParts, prompt: Prompt) -> None:
    """The response's usage (promptTokenCount counts the cached tokens too; thoughts are output) added to `usage`."""
    prompt_tokens = _int(reported.get("promptTokenCount"))
    output = _int(reported.get("candidatesTokenCount")) + _int(reported.get("thoughtsTokenCount"))
    if prompt_tokens or output:
        usage.add(prompt_tokens, output, cache_read_tokens=_int(reported.get("cachedContentTokenCount")))
        return
    messages, functions = prompt
    parts.estimate(usage, "".join(m.text for m in messages) + (orjson.dumps(functions).decode() if functions else ""))


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


__all__ = ["GeminiReader", "add_usage", "whole_response"]

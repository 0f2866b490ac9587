"""The OpenAI chat-completions wire format of `chatagent serve`: requests parsed and checked, an agent's fragments
turned into completion objects and SSE chunks, failures into OpenAI-style error bodies.

Streamed chunks are encoded from bytes prepared once per completion (`Chunks`): the per-chunk work is one
`orjson.dumps` of the new text and a concatenation, so that serving adds little to the agent's own stream.

What an agent puts in its final message's `extra` under one of `PUBLIC_EXTRAS` (its sources, why it stopped, a
tool call waiting for approval, ...) reaches the client in the field `chatagent` of the choice's message (and of
the last streamed chunk's delta), which OpenAI clients ignore (`message.model_extra['chatagent']`).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import orjson

from chatagent.errors import ChatAgentError, ModelErrorCode, ModelServiceError, RunDeadlineExceeded
from chatagent.run.approval import APPROVAL
from chatagent.run.interrupts import ANSWERS
from chatagent.schema import ASSISTANT, Message, MessageError, to_messages
from chatagent.schema.fragment import Fragment
from chatagent.schema.stop_reason import StopReason
from chatagent.sessions.errors import (
    SessionBusyError,
    SessionConflictError,
    SessionError,
    SessionPendingTurnError,
    SessionStoreError,
)
from chatagent.utils.keys import mask_secrets

APPROVAL_TOKEN = "approval_token"
EXPECTED = (
    'an approval is the last message, {"role": "user", "content": "", "extra": {"approval": true}} (true approves '
    "every waiting call, false denies them, {call id: true/false} decides each; the content is the reason told to "
    "the model): with session_id, sent alone; without one, after the conversation so far, its extra also holding "
    'the "approval_token" of the paused answer'
)

EXPECTED_ANSWER = (
    'an answer is the last message, {"role": "user", "content": "", "extra": {"answers": {question id: answer}}}, '
    "sent alone with the session_id of the conversation whose questions (chatagent.pending_questions) it answers "
    "(or, in the answer's extra, the paused answer's resume_token)"
)

MAX_SESSION_ID_CHARS = 128
#: The keys of a final message's `extra` a client receives (in the field `chatagent`), when the agent sets them.
PUBLIC_EXTRAS = ("sources", "stop_reason", "pending_approval", "blocked_by", "pending_user_input", "pending_questions")
_REMOTE_SCHEMES = ("http://", "https://", "data:")


class RequestError(ChatAgentError):
    """A request we refuse: the HTTP status and an OpenAI-style error body."""

    def __init__(self, status: int, message: str, code: str | None = None, param: str | None = None) -> None:
        message = mask_secrets(message)  # whatever failed, no key reaches a client
        super().__init__(message)
        self.status, self.message, self.code, self.param = status, message, code, param

    def body(self) -> dict:
        kind = {401: "authentication_error", 404: "not_found_error", 409: "conflict_error", 429: "rate_limit_error"}
        return {
            "error": {
                "message": self.message,
                "type": kind.get(self.status, "invalid_request_error" if self.status < 500 else "server_error"),
                "param": self.param,
                "code": self.code,
            }
        }


class ChatRequest:
    """A checked chat-completions request: the client's messages (without server-side keys: see
    `chatagent.server.approvals`), and the approval decision and token of its last message, if it is one."""

    __slots__ = (
        "messages", "stream", "include_usage", "model", "session_id", "resume", "decision", "approval_token", "answers",
        "resume_token",
    )  # fmt: skip

    def __init__(
        self,
        messages: list[Message],
        stream: bool,
        include_usage: bool,
        model: str | None,
        session_id: str | None,
        resume: bool = False,
    ) -> None:
        self.messages, self.stream, self.include_usage = messages, stream, include_usage
        self.model, self.session_id, self.resume = model, session_id, resume
        self.decision: bool | dict[str, bool] | None = None
        self.approval_token: str | None = None
        self.resume_token: str | None = None  # names the paused conversation instead of session_id (approvals)
        self.answers: dict[str, Any] | None = (
            None  # the answers to a paused turn's questions (chatagent.answer_message)
        )


def parse_request(body: bytes) -> ChatRequest:
    """The request in `body`; RequestError 400 naming what is wrong."""
    try:
        req = orjson.loads(body)  # nesting deeper than 1024 levels is an error here, not a RecursionError
    except orjson.JSONDecodeError as e:
        raise RequestError(400, f"the request body is not valid JSON: {e}", "invalid_json") from None
    if not isinstance(req, dict):
        raise RequestError(400, "the request body must be a JSON object", "invalid_request")
    resume = req.get("resume", False)
    if not isinstance(resume, bool):
        raise RequestError(400, "'resume' must be a boolean", "invalid_resume", "resume")
    messages = req.get("messages", [] if resume else None)
    if not isinstance(messages, list) or not (messages or resume):
        raise RequestError(400, "'messages' must be a non-empty list", "invalid_messages", "messages")
    if resume and messages:
        raise RequestError(400, "'resume' continues the session's turn: send no messages with it", "invalid_resume",
                           "messages")  # fmt: skip
    if req.get("tools") or req.get("functions"):
        raise RequestError(
            400, "this server runs the agent's own tools; client-side 'tools' are not supported", "tools_unsupported",
            "tools",
        )  # fmt: skip
    if req.get("n", 1) != 1:
        raise RequestError(400, "only n=1 is supported", "invalid_n", "n")
    stream = req.get("stream", False)
    if not isinstance(stream, bool):
        raise RequestError(400, "'stream' must be a boolean", "invalid_stream", "stream")
    model = req.get("model")
    if model is not None and not isinstance(model, str):
        raise RequestError(400, "'model' must be a string", "invalid_model", "model")
    session_id = checked_session_id(req.get("session_id"), "'session_id'")
    options = req.get("stream_options") or {}
    include_usage = bool(isinstance(options, dict) and options.get("include_usage"))
    answers = client_answers(messages)
    last: Any = messages[-1] if messages else None
    last_extra: Any = last.get("extra") if isinstance(last, dict) else None
    resume_token: Any = last_extra.get("resume_token") if isinstance(last_extra, dict) else None
    if resume_token is not None and not isinstance(resume_token, str):
        raise RequestError(400, "the resume_token is the string the paused answer carried", "invalid_resume_token")
    messages, decision, token = client_messages(messages)
    if answers is not None:
        if decision is not None:
            raise RequestError(400, "a message is an approval or an answer, not both: " + EXPECTED_ANSWER,
                               "invalid_answer", "messages")  # fmt: skip
        messages[-1] = {**messages[-1], "extra": {ANSWERS: answers}}
    try:
        msgs = to_messages(messages)
    except MessageError as e:
        raise RequestError(400, str(e), "invalid_messages", "messages") from None
    request = ChatRequest(msgs, stream, include_usage, model, session_id, resume)
    request.decision, request.approval_token, request.answers = decision, token, answers
    request.resume_token = resume_token
    return request


def client_answers(raw: list[Any]) -> dict[str, Any] | None:
    """The answers the client's last message gives to a paused turn's questions (None if it gives none);
    RequestError 400 if they have the wrong shape."""
    last: Any = raw[-1] if raw else None
    extra: Any = last.get("extra") if isinstance(last, dict) else None
    if not isinstance(extra, dict) or ANSWERS not in extra:
        return None
    given: Any = extra[ANSWERS]
    if last.get("role") != "user" or not isinstance(given, dict) or not given:
        raise RequestError(400, EXPECTED_ANSWER, "invalid_answer", "messages")
    return {str(k): v for k, v in given.items()}


def client_messages(raw: list[Any]) -> tuple[list[Any], Any, str | None]:
    """The client's messages without server-side keys (the last one keeps `extra.approval`), the approval decision
    of the last message (None if it is not one) and the token it carries."""
    out: list[Any] = []
    for m in raw:
        out.append({k: v for k, v in m.items() if k not in ("extra", "chatagent")} if isinstance(m, dict) else m)
    last: dict[str, Any] = raw[-1] if raw and isinstance(raw[-1], dict) else {}
    extra = last.get("extra")
    if not isinstance(extra, dict) or APPROVAL not in extra:
        if isinstance(extra, dict) and APPROVAL_TOKEN in extra:
            raise RequestError(400, "an approval_token without an approval decision: " + EXPECTED,
                               "invalid_approval", "messages")  # fmt: skip
        return out, None, None
    decision = checked_decision(extra[APPROVAL])
    token = extra.get(APPROVAL_TOKEN)
    if token is not None and not isinstance(token, str):
        raise RequestError(400, "the approval_token must be the string the paused answer carried",
                           "invalid_approval", "messages")  # fmt: skip
    if last.get("role") != "user":
        raise RequestError(400, EXPECTED, "invalid_approval", "messages")
    out[-1] = {**out[-1], "extra": {APPROVAL: decision}}
    return out, decision, token


def checked_decision(value: Any) -> bool | dict[str, bool]:
    """An approval decision as the client gave it, if it has the right shape (else RequestError 400)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, dict) and value and all(isinstance(k, str) and isinstance(v, bool) for k, v in value.items()):
        return value
    raise RequestError(400, f"extra.approval must be true, false or {{call id: true/false}}, got {value!r:.80}; "
                       + EXPECTED, "invalid_approval", "messages")  # fmt: skip


def checked_session_id(value: Any, what: str) -> str | None:
    """A client's session id (None if it gave none); RequestError 400 if it is not 1 to 128 printable characters."""
    if value is None:
        return None
    if not (isinstance(value, str) and 0 < len(value) <= MAX_SESSION_ID_CHARS and value.isprintable()):
        why = f"{what} must be a string of 1 to {MAX_SESSION_ID_CHARS} printable characters"
        raise RequestError(400, why, "invalid_session_id", "session_id")
    return value


def media_urls(msgs: list[Message]) -> list[tuple[int, int, str]]:
    """The (message, item, URL) of every http(s) media item, whose scheme is made lower case in place (the code
    downstream compares schemes as written); RequestError 400 for an item naming a local path (a remote client may
    attach media only by URL: a path would make the agent read a file of this machine)."""
    urls = []
    for i, m in enumerate(msgs):
        if isinstance(m.content, str):
            continue
        for j, item in enumerate(m.content):
            kind = item.kind
            if kind == "text":
                continue
            value = item.value
            scheme, colon, rest = value.partition(":")
            if not colon or not (scheme.lower() + ":" + rest[:2]).startswith(_REMOTE_SCHEMES):
                raise RequestError(
                    400,
                    f"messages[{i}].content[{j}]: a {kind} must be an http(s) or data: URL; "
                    "this server does not read files from its own disk for clients",
                    "invalid_messages",
                    "messages",
                )
            if scheme != scheme.lower():
                value = scheme.lower() + ":" + rest
                setattr(item, kind, value)
            if scheme.lower() != "data":
                urls.append((i, j, value))
    return urls


def error_for(e: BaseException) -> RequestError:
    """How an agent's failure is reported to the client (never with a traceback)."""
    if isinstance(e, RequestError):
        return e
    if isinstance(e, MessageError):  # a message the agent could not accept; any other error is ours, a 500
        return RequestError(400, str(e), "invalid_messages", "messages")
    if isinstance(e, ModelServiceError):
        status = 400 if e.code == ModelErrorCode.CONTEXT_TOO_LONG else 502
        return RequestError(status, f"the model service failed: {e.code}: {e.public_message}", str(e.code))
    if isinstance(e, RunDeadlineExceeded):
        return RequestError(504, str(e), "deadline_exceeded")
    # (a store's errors name the store: its URL or file, for the server's log; never for a client)
    if isinstance(e, SessionBusyError):
        return RequestError(409, "this conversation is answering another request; try again when it ends",
                            "session_busy", "session_id")  # fmt: skip
    if isinstance(e, SessionConflictError):
        return RequestError(409, "this conversation was changed by another request while this one ran: this "
                            "answer was not saved", "session_conflict", "session_id")  # fmt: skip
    if isinstance(e, SessionStoreError):
        return RequestError(503, "the session store is unavailable (the server's log says why)",
                            "session_store_unavailable")  # fmt: skip
    if isinstance(e, SessionPendingTurnError):
        return RequestError(409, 'this conversation has a turn that did not end (its server stopped, or its run '
                            'failed after doing work): send "resume": true to finish it', "session_pending_turn",
                            "session_id")  # fmt: skip
    if isinstance(e, SessionError):
        return RequestError(409, "this conversation cannot take this request now: " + str(e).split(":")[-1].strip(),
                            "session_error", "session_id")  # fmt: skip
    return RequestError(500, f"the agent failed: {type(e).__name__}: {e}", "agent_error")


class Answer:
    """Turns the agent's fragments into the OpenAI view: text deltas (separate messages' texts joined by a blank
    line) and reasoning deltas; tool calls and results stay server-side. Remembers the public extras of each
    assistant message, for `finish_reason` and `extras`, the tool calls, for a reply that pauses on them, and each
    message's text, so that a fragment that replaces a message (`Fragment.replace`) replaces it in the whole answer
    (`final`). A stream cannot take back what it sent: the replacement follows it there (the run holds back what an
    output check may block or rewrite, see `chatagent.run.holding`, so no replaced text of those reaches a client)."""

    __slots__ = ("text_indexes", "last", "extra", "calls", "texts", "reasonings")

    def __init__(self) -> None:
        self.text_indexes: set[int] = set()  # the messages whose text has started
        self.last = -1  # the index of the last assistant message
        self.extra: dict[str, Any] = {}  # its public extras
        self.calls: dict[int, list[Any]] = {}  # message index -> [call id, tool name, arguments]
        self.texts: dict[int, list[str]] = {}  # each message's text and reasoning, for `final`
        self.reasonings: dict[int, list[str]] = {}

    def add(self, fragments: list[Fragment]) -> tuple[str, str]:
        """The (text, reasoning) these fragments add to the answer."""
        text = reasoning = ""
        for f in fragments:
            if f.role != ASSISTANT:
                continue
            i = f.index
            if i > self.last:
                self.last, self.extra = i, {}
            if f.replace:  # the message starts over (its text so far stays sent on a stream)
                self.texts.pop(i, None)
                self.reasonings.pop(i, None)
                self.calls.pop(i, None)
                if i == self.last:
                    self.extra = {}
                if i in self.text_indexes:
                    self.text_indexes.discard(i)
                    text += "\n\n"
            extra = f.extra
            if extra and i == self.last:
                for key in PUBLIC_EXTRAS:
                    if key in extra:
                        self.extra[key] = extra[key]
            if f.function_call is not None or (extra and "function_id" in extra):
                call = self.calls.setdefault(i, [None, "", ""])
                if f.function_call is not None:
                    call[1], call[2] = f.function_call.name, f.function_call.arguments
                if extra and "function_id" in extra:
                    call[0] = extra["function_id"]
            if f.reasoning_content:
                reasoning += f.reasoning_content
                self.reasonings.setdefault(i, []).append(f.reasoning_content)
            piece = f.text
            if piece:
                self.texts.setdefault(i, []).append(piece)
                if i not in self.text_indexes:
                    if self.text_indexes and not text.endswith("\n\n"):
                        piece = "\n\n" + piece
                    self.text_indexes.add(i)
                text += piece
        return text, reasoning

    def paused_calls(self) -> list[tuple[str | None, str, str]]:
        """The calls of the reply the answer paused on (the calls that end it), [] if it did not pause."""
        if not self.extra.get("pending_approval"):
            return []
        i, calls = self.last, []
        while i in self.calls and self.calls[i][1]:
            calls.append(tuple(self.calls[i]))
            i -= 1
        return calls[::-1]

    def final(self) -> tuple[str, str]:
        """The whole answer's (text, reasoning) as the fragments left it: each message's, joined by a blank line."""
        text = "\n\n".join(t for _, pieces in sorted(self.texts.items()) if (t := "".join(pieces)))
        return text, "".join("".join(pieces) for _, pieces in sorted(self.reasonings.items()))

    def finish_reason(self) -> str:
        return "length" if self.extra.get("stop_reason") == StopReason.LENGTH else "stop"


def usage_of(run: Any) -> dict:
    """The run's usage as OpenAI's `usage` object, with `cost` (US dollars) when the model's prices are known."""
    u = run.usage
    out = {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens, "total_tokens": u.total_tokens}
    if u.cost is not None:
        out["cost"] = round(u.cost, 10)
    return out


def completion(model: str, text: str, reasoning: str, answer: Answer, usage: dict) -> dict:
    """A whole chat.completion object."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if reasoning:
        message["reasoning_content"] = reasoning
    if answer.extra:
        message["chatagent"] = answer.extra
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": answer.finish_reason(), "logprobs": None}],
        "usage": usage,
    }


DONE = b"data: [DONE]\n\n"


class Chunks:
    """The SSE events of one streamed completion, as bytes (each event ready for one write)."""

    __slots__ = ("_head", "_content", "_reasoning")

    _TAIL = b'},"finish_reason":null,"logprobs":null}]}\n\n'

    def __init__(self, model: str) -> None:
        head = orjson.dumps(
            {
                "id": f"chatcmpl-{uuid.uuid4().hex}",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
            }  # fmt: skip
        )
        self._head = b"data: " + head[:-1]  # without its closing brace: the choices follow
        self._content = self._head + b',"choices":[{"index":0,"delta":{"content":'
        self._reasoning = self._head + b',"choices":[{"index":0,"delta":{"reasoning_content":'

    def role(self) -> bytes:
        return self._head + b',"choices":[{"index":0,"delta":{"role":"assistant","content":""' + self._TAIL

    def delta(self, text: str, reasoning: str) -> bytes:
        """The event of a text and/or reasoning delta."""
        if not reasoning:
            return self._content + orjson.dumps(text) + self._TAIL
        if not text:
            return self._reasoning + orjson.dumps(reasoning) + self._TAIL
        return self._reasoning + orjson.dumps(reasoning) + b',"content":' + orjson.dumps(text) + self._TAIL

    def finish(self, answer: Answer) -> bytes:
        delta = orjson.dumps({"chatagent": answer.extra}) if answer.extra else b"{}"
        reason = orjson.dumps(answer.finish_reason())
        return (
            self._head
            + b',"choices":[{"index":0,"delta":'
            + delta
            + b',"finish_reason":'
            + reason
            + (b',"logprobs":null}]}\n\n')
        )

    def usage(self, usage: dict) -> bytes:
        return self._head + b',"choices":[],"usage":' + orjson.dumps(usage) + b"}\n\n"


def error_event(e: RequestError) -> bytes:
    return b"data: " + orjson.dumps(e.body()) + b"\n\n"


def error_json(e: RequestError) -> bytes:
    return orjson.dumps(e.body())


__all__ = [
    "DONE",
    "MAX_SESSION_ID_CHARS",
    "PUBLIC_EXTRAS",
    "Answer",
    "ChatRequest",
    "Chunks",
    "RequestError",
    "checked_session_id",
    "completion",
    "error_event",
    "error_for",
    "media_urls",
    "parse_request",
    "usage_of",
]

"""Tool approval over `chatagent serve`: the server runs only calls its own model made and that it recorded as paused.

A client never says which call is paused. Its messages lose every server-side key (`extra`, whatever it holds: a
`pending_approval` mark, a call id, an interruption mark) except, on its last message, the decision itself. The
paused calls come from the server's own record:

* with a `session_id`, the stored conversation, which ends with the paused calls: the client sends the approval
  message alone (or the whole conversation again: what the store has already is not new);
* without one, a token the server signed when the run paused (`chatagent.approval_token` in the paused answer),
  binding the calls (ids, tools, arguments), the principal that asked, the model and the time; the client sends
  the conversation so far and the approval message with the token in its `extra`. A token is valid once and for a
  day, on this server (replicas share `approval_secret` to accept each other's; each replica refuses a token it has
  taken before, so behind a load balancer send a paused conversation's decision to one replica, or use a session).

Anything else that looks like an approval is a 400 that says what is expected (`EXPECTED`).

A turn on a session that pauses (questions, calls waiting for approval) also carries `chatagent.resume_token`: the
server's signature of the conversation's id, the principal that asked, the model and the time. The client may
answer or decide with the token in its last message's `extra` instead of the `session_id` (valid for a day, for
that principal and model only; what is paused comes from the store, as with a `session_id`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import threading
import time
from typing import Any

import orjson

from chatagent.run.approval import PENDING_APPROVAL
from chatagent.schema import ASSISTANT, FunctionCall, Message
from chatagent.server.openai_api import (
    APPROVAL_TOKEN,
    EXPECTED,
    EXPECTED_ANSWER,
    ChatRequest,
    RequestError,
    checked_decision,
    client_messages,
)

TOKEN_LIFETIME_S = 24 * 3600
RESUME_TOKEN = "resume_token"
_PAUSES = frozenset(("pending_questions", PENDING_APPROVAL, "pending_user_input"))  # what a paused answer says

PausedCall = tuple[str | None, str, str]  # (call id, tool name, arguments) of one call of the paused reply


def check_decided_calls(decision: bool | dict[str, bool], waiting: list[str]) -> None:
    """RequestError 400 when a per-call decision names a call that is not waiting."""
    if isinstance(decision, dict):
        unknown = [k for k in decision if k not in waiting]
        if unknown:
            raise RequestError(400, f"the approval names calls that are not waiting: {', '.join(unknown)[:200]} "
                               f"(waiting: {', '.join(waiting)[:200]})", "invalid_approval", "messages")  # fmt: skip


def paused_messages(calls: list[PausedCall], waiting: list[dict]) -> list[Message]:
    """The paused reply as the run recorded it: one assistant call per message, the last marked pending."""
    out = []
    for fid, name, arguments in calls:
        extra: dict[str, Any] = {"function_id": fid} if fid is not None else {}
        out.append(Message(ASSISTANT, "", function_call=FunctionCall(name=name, arguments=arguments), extra=extra))
    out[-1].extra = {**(out[-1].extra or {}), PENDING_APPROVAL: waiting}
    return out


class ApprovalTokens:
    """Signs and checks the tokens of paused calls (HMAC-SHA256 with the server's secret); each is taken once."""

    __slots__ = ("_lock", "_secret", "_taken")

    def __init__(self, secret: str | bytes | None = None) -> None:
        if isinstance(secret, str):
            secret = secret.encode()
        if secret is not None and len(secret) < 16:
            raise ValueError("approval_secret must be at least 16 bytes (32 random bytes are best)")
        self._secret = secret or secrets.token_bytes(32)
        self._taken: dict[str, float] = {}  # MAC of each token taken -> when it expires; oldest first
        self._lock = threading.Lock()

    def _mac(self, principal: str, payload: bytes) -> str:
        mac = hmac.new(self._secret, principal.encode() + b"\0" + payload, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).decode().rstrip("=")

    def issue(self, principal: str, model: str, calls: list[PausedCall], waiting: list[dict]) -> str:
        """The token of a paused reply: `calls` (all its calls) and `waiting` (those waiting for a decision)."""
        payload = orjson.dumps({"m": model, "c": calls, "w": waiting, "t": int(time.time()), "n": secrets.token_hex(8)})
        return base64.urlsafe_b64encode(payload).decode().rstrip("=") + "." + self._mac(principal, payload)

    def paused(self, token: str, principal: str, model: str) -> tuple[list[Message], list[str]]:
        """The paused reply a token stands for and the ids of its waiting calls, taking the token; RequestError 400
        for a token this server did not give this principal for this model, that has expired, or that was taken."""
        data, mac = self._checked(token, principal, model, APPROVAL_TOKEN, "c", "invalid_approval")
        self._take(mac, data["t"] + TOKEN_LIFETIME_S)
        calls = [(c[0], c[1], c[2]) for c in data["c"]]
        waiting = data["w"]
        return paused_messages(calls, waiting), [str(w["id"]) for w in waiting]

    def resume_token(self, principal: str, model: str, session_id: str) -> str:
        """The token of a paused turn on the conversation `session_id` (see the module docstring)."""
        payload = orjson.dumps({"m": model, "s": session_id, "t": int(time.time()), "n": secrets.token_hex(8)})
        return base64.urlsafe_b64encode(payload).decode().rstrip("=") + "." + self._mac(principal, payload)

    def mark_resumable(self, extra: dict[str, Any], principal: str, model: str, session_id: str) -> None:
        """Add the resume token to a paused answer's `extra` (one that says what it waits for)."""
        if not _PAUSES.isdisjoint(extra):
            extra[RESUME_TOKEN] = self.resume_token(principal, model, session_id)

    def session_of(self, request: ChatRequest, named: str | None, principal: str, model: str) -> str:
        """The conversation the request's resume token names; RequestError 400 for a token this server did not give
        this principal for this model or that has expired, on a request that neither answers nor decides, or
        beside a `session_id` (`named`) of another conversation."""
        if request.answers is None and request.decision is None:
            raise RequestError(400, "a resume_token goes with an answer or an approval decision: " + EXPECTED_ANSWER,
                               "invalid_resume_token", "messages")  # fmt: skip
        data, _ = self._checked(request.resume_token or "", principal, model, RESUME_TOKEN, "s", "invalid_resume_token")
        if named is not None and named != data["s"]:
            raise RequestError(400, "the resume_token is for another conversation than session_id",
                               "invalid_resume_token", "session_id")  # fmt: skip
        return str(data["s"])

    def _checked(self, token: str, principal: str, model: str, name: str, kind: str, code: str) -> tuple[Any, str]:
        """(payload, MAC) of a token of `kind` (its payload's key) this server signed for `principal` and `model`,
        not expired; else RequestError 400 (`code`)."""
        body, _, mac = token.partition(".")
        try:
            payload = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        except ValueError:
            payload = b""
        if not payload or not hmac.compare_digest(mac.encode(), self._mac(principal, payload).encode()):
            raise RequestError(400, f"the {name} is not one this server issued to you (replicas accept each other's "
                               "only with a shared approval_secret)", code, "messages")  # fmt: skip
        data = orjson.loads(payload)
        if not isinstance(data, dict) or kind not in data:
            raise RequestError(400, f"this token is not the {name} it was sent as", code, "messages")
        if data["m"] != model:
            raise RequestError(400, f"the {name} is for the model {data['m']!r}", code, "model")
        if time.time() - data["t"] > TOKEN_LIFETIME_S:
            raise RequestError(400, f"the {name} has expired: ask again", code, "messages")
        return data, mac

    def _take(self, mac: str, expires: float) -> None:
        """Record a token as taken; RequestError 400 when it was (a decision is carried out once)."""
        now = time.time()
        with self._lock:
            while self._taken:  # forget the expired ones taken first: an expired token is refused as such
                first = next(iter(self._taken))
                if self._taken[first] > now:
                    break
                del self._taken[first]
            if mac in self._taken:
                raise RequestError(400, "this approval_token was used already: a decision is carried out once",
                                   "invalid_approval", "messages")  # fmt: skip
            self._taken[mac] = expires


__all__ = [
    "APPROVAL_TOKEN",
    "EXPECTED",
    "RESUME_TOKEN",
    "ApprovalTokens",
    "PausedCall",
    "check_decided_calls",
    "checked_decision",
    "client_messages",
    "paused_messages",
]

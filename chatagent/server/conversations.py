"""Conversations of `chatagent serve` clients: what a session means over the API.

A request with a `session_id` (the body field, or the header `X-Session-Id`) runs on a conversation kept in the
session store, owned by the request's principal (`chatagent.server.identity`): no other principal reaches it, and
no `serve` principal reaches the conversations of the command line or the web UI. `session_id: "new"` starts one
under an id the server makes (unguessable; it comes back in the `X-Session-Id` response header and in
`chatagent.session_id`). A client with its own API key may also name its conversations itself; without keys every
client is the same principal, so only server-made ids are accepted (an unknown id is a 404).

The client may send only the new messages, or the whole conversation again, as OpenAI clients do: when the request
begins with the conversation as the client saw it (its messages, and each answer's text), only what follows is
new. The stored system message stays: a request may repeat it, but one that differs is a 400. An approval resumes
the calls the stored conversation paused on (`chatagent.server.approvals`); an answer (`chatagent.answer_message`,
sent alone) the calls whose questions the stored turn waits for, only the principal's own. A principal lists its
conversation's checkpoints (`GET /v1/sessions/{id}/history`) and forks one into a new conversation (`POST
/v1/sessions/{id}/fork`, `chatagent.server.history`), within the same quotas. A conversation may grow
to `max_session_bytes` (its turns and files; then 413), a principal may keep `max_sessions` of them (then 429;
`DELETE /v1/sessions/{id}` removes one) and `max_principal_bytes` in all (then 413): so no client grows the store
without bound, nor makes a conversation that every later question is slow on.
"""

from __future__ import annotations

import secrets
import threading
import time
from typing import Any, NamedTuple

from chatagent.run.approval import PENDING_APPROVAL
from chatagent.run.interrupts import checked_answers
from chatagent.schema import ASSISTANT, FUNCTION, SYSTEM, Message, content_text, to_messages
from chatagent.server.approvals import EXPECTED, check_decided_calls
from chatagent.server.identity import ANONYMOUS
from chatagent.server.openai_api import EXPECTED_ANSWER, ChatRequest, RequestError
from chatagent.sessions import Session
from chatagent.sessions.history import Checkpoint
from chatagent.sessions.store import SQLStore

NEW = "new"
DEFAULT_MAX_SESSION_BYTES = 16 * 1024 * 1024  # four of the largest requests (4 MB)
DEFAULT_MAX_SESSIONS = 1_000
DEFAULT_MAX_PRINCIPAL_BYTES = 256 * 1024 * 1024


class Quotas(NamedTuple):
    """How large one conversation may grow (bytes stored), how many one principal may keep, and how many bytes
    its conversations may take in all."""

    max_session_bytes: int = DEFAULT_MAX_SESSION_BYTES
    max_sessions: int = DEFAULT_MAX_SESSIONS
    max_principal_bytes: int = DEFAULT_MAX_PRINCIPAL_BYTES


class Opened(NamedTuple):
    """A request's conversation: the session, the messages that are new to it, the id if the server made it."""

    session: Session
    messages: list[Message]
    issued: str | None


def open_conversation(
    store: SQLStore, principal: str, named: str, request: ChatRequest, body_bytes: int, quotas: Quotas
) -> Opened:
    """The conversation a request names, checked (see the module docstring); RequestError otherwise. Blocking: the
    store is read here."""
    _check_total(store, principal, body_bytes, quotas)
    if named == NEW:
        _check_count(store, principal, quotas)
        session = Session(secrets.token_urlsafe(24), store, user=principal)
        if request.decision is not None or request.answers is not None:
            raise RequestError(400, "a new conversation has nothing waiting for a person", "invalid_approval")
        return Opened(session, request.messages, session.id)
    session = Session(named, store, user=principal)
    info = store.info(principal, named)
    if info is None:
        if principal == ANONYMOUS:  # without keys, the id is the only secret: it must be one the server made
            raise RequestError(404, "no such conversation: start one with session_id 'new' and use the id the "
                               "answer carries (X-Session-Id)", "session_not_found", "session_id")  # fmt: skip
        if request.answers is not None:
            _checked_answer(request, None)  # (raises: nothing waits in a conversation that does not exist)
        _check_count(store, principal, quotas)
        return Opened(session, _checked_new(request, None, []), None)
    if store.size(principal, named) + body_bytes > quotas.max_session_bytes:
        raise RequestError(413, f"this conversation has reached the size limit of this server "
                           f"({quotas.max_session_bytes} bytes): start a new one", "session_too_large",
                           "session_id")  # fmt: skip
    msgs = request.messages
    plain = request.decision is None and request.answers is None
    if request.resume or (len(msgs) == 1 and msgs[0].role != SYSTEM and plain):
        return Opened(session, msgs, None)  # the usual case: one new message, nothing to compare
    loaded = store.load(principal, named, files=False)
    pending = store.pending(principal, named)  # a turn that did not end (one paused for approval) is seen too
    if request.answers is not None:
        return Opened(session, _checked_answer(request, pending), None)
    held = [m for m in pending.messages if m.get("role") != SYSTEM] + pending.response if pending else []
    return Opened(session, _checked_new(request, loaded.system, loaded.messages + held), None)


def conversation_history(store: SQLStore, principal: str, named: str) -> list[Checkpoint]:
    """The checkpoints of one of the principal's conversations (`Session.history`); RequestError 404 for any other
    id. Blocking."""
    if store.info(principal, named) is None:
        raise RequestError(404, "no such conversation", "session_not_found", "session_id")
    return Session(named, store, user=principal).history()


def fork_conversation(store: SQLStore, principal: str, named: str, checkpoint: str, quotas: Quotas) -> Session:
    """A new conversation of the principal's, under an id the server makes, holding `named` as it was at
    `checkpoint` (`Session.fork`), within the principal's quotas; RequestError 404 for a conversation that is not
    the principal's, 400 for a checkpoint it does not have. Blocking."""
    if store.info(principal, named) is None:
        raise RequestError(404, "no such conversation", "session_not_found", "session_id")
    _check_count(store, principal, quotas)
    _check_total(store, principal, store.size(principal, named), quotas)
    try:
        return Session(named, store, user=principal).fork(checkpoint, secrets.token_urlsafe(24))
    except ValueError as e:
        raise RequestError(400, str(e), "checkpoint_not_found", "checkpoint") from None


class _StoredBytes:
    """What each principal's conversations take in a store: summed by the store at most every `REFRESH` seconds
    (the sum reads every turn: 17 ms for 3,000), counted up by the requests accepted between."""

    REFRESH = 30.0

    def __init__(self) -> None:
        self._known: dict[tuple[int, str], tuple[float, int]] = {}  # (store, principal) -> (when summed, bytes)
        self._lock = threading.Lock()

    def total(self, store: SQLStore, principal: str) -> int:
        key = (id(store), principal)
        with self._lock:
            known = self._known.get(key)
        if known is not None and time.monotonic() - known[0] < self.REFRESH:
            return known[1]
        summed = store.size(principal)
        with self._lock:
            self._known[key] = (time.monotonic(), summed)
        return summed

    def add(self, store: SQLStore, principal: str, n: int) -> None:
        with self._lock:
            known = self._known.get((id(store), principal))
            if known is not None:
                self._known[(id(store), principal)] = (known[0], known[1] + n)

    def forget(self, principal: str) -> None:
        """Sum it anew next time (a conversation of the principal's was deleted)."""
        with self._lock:
            for key in [k for k in self._known if k[1] == principal]:
                del self._known[key]


STORED = _StoredBytes()


def _check_total(store: SQLStore, principal: str, body_bytes: int, quotas: Quotas) -> None:
    if STORED.total(store, principal) + body_bytes > quotas.max_principal_bytes:
        raise RequestError(413, f"your conversations take the most storage this server allows "
                           f"({quotas.max_principal_bytes} bytes): delete some (DELETE /v1/sessions/{{id}})",
                           "storage_quota_exceeded")  # fmt: skip
    STORED.add(store, principal, body_bytes)


def _checked_answer(request: ChatRequest, pending: Any) -> list[Message]:
    """An answer to the stored turn's questions: sent alone, naming questions it waits for, each fitting its schema."""
    waiting = pending.waiting if pending is not None and pending.kind == "question" else None
    if not waiting or len(request.messages) != 1:
        why = "no question of this conversation waits for an answer" if not waiting else "with session_id, an " \
            "answer is sent alone"  # fmt: skip
        raise RequestError(400, f"{why}; {EXPECTED_ANSWER}", "invalid_answer", "messages")
    assert request.answers is not None
    try:
        checked_answers(waiting, request.answers)
    except ValueError as e:
        raise RequestError(400, f"{e}; {EXPECTED_ANSWER}", "invalid_answer", "messages") from None
    return request.messages


def _check_count(store: SQLStore, principal: str, quotas: Quotas) -> None:
    if store.count(principal) >= quotas.max_sessions:
        raise RequestError(429, f"you keep {quotas.max_sessions} conversations, the most this server allows: delete "
                           "one (DELETE /v1/sessions/{id}) to start another", "too_many_sessions")  # fmt: skip


def _checked_new(request: ChatRequest, system: dict | None, stored: list[dict]) -> list[Message]:
    """The request's messages that are new to the stored conversation (`system`, `stored`)."""
    msgs = request.messages
    if msgs and msgs[0].role == SYSTEM:
        if system is not None:
            if _key(msgs[0]) != _key(to_messages([system])[0]):
                raise RequestError(400, "this conversation has another system message: send the same one or none "
                                   "(a client cannot replace it)", "system_message_conflict", "messages")  # fmt: skip
            msgs = msgs[1:]
        elif stored:
            raise RequestError(400, "a system message can only start a conversation; this one has begun without",
                               "system_message_conflict", "messages")  # fmt: skip
    history = to_messages(stored) if stored else []
    seen = _groups(history)
    given = _groups(msgs)
    if seen and len(given) >= len(seen) and [k for k, _ in given[: len(seen)]] == [k for k, _ in seen]:
        msgs = msgs[given[len(seen) - 1][1] :]  # the client sent the conversation again: only the rest is new
        if not msgs:
            raise RequestError(400, "nothing new: this conversation already holds every message of the request",
                               "nothing_new", "messages")  # fmt: skip
    if request.decision is not None:
        waiting = (history[-1].extra or {}).get(PENDING_APPROVAL) if history else None
        if not waiting or len(msgs) != 1:
            why = "no call of this conversation is waiting for approval" if not waiting else "with session_id, " \
                "an approval is sent alone (the paused calls are the stored ones)"  # fmt: skip
            raise RequestError(400, f"{why}; {EXPECTED}", "invalid_approval", "messages")
        check_decided_calls(request.decision, [str(w.get("id")) for w in waiting])
    return msgs


def _key(m: Message) -> Any:
    """What identifies a message the client sent: its role, text and attachments."""
    items = () if isinstance(m.content, str) else tuple(i.value for i in m.content if i.kind != "text")
    return m.role, content_text(m.content).strip(), items


def _groups(msgs: list[Message]) -> list[tuple[Any, int]]:
    """The conversation as the client sees it, with where each part ends in `msgs`: each message it sent, and for
    each answer (the assistant's messages and the tool results between them) the text it received."""
    out: list[tuple[Any, int]] = []
    texts: list[str] = []
    for n, m in enumerate(msgs, 1):
        if m.role in (ASSISTANT, FUNCTION):
            if not (out and out[-1][0][0] == ASSISTANT):
                texts = []
            if m.role == ASSISTANT and content_text(m.content).strip():
                texts.append(content_text(m.content).strip())
            key = (ASSISTANT, "\n\n".join(texts), ())
            if out and out[-1][0][0] == ASSISTANT:
                out[-1] = (key, n)
            else:
                out.append((key, n))
        else:
            out.append((_key(m), n))
    return out


__all__ = [
    "DEFAULT_MAX_PRINCIPAL_BYTES",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_MAX_SESSION_BYTES",
    "NEW",
    "Opened",
    "Quotas",
    "conversation_history",
    "fork_conversation",
    "open_conversation",
]

"""Session: one stored conversation, and how a run is bound to it.

    from chatagent import BasicAgent, Session
    s = Session('support-42')                    # the default store: a SQLite file in the workspace
    for rsp in bot.run([{'role': 'user', 'content': 'And in French?'}], session=s):
        ...                                       # the model sees the stored conversation, then the new message
    s.messages()                                  # the conversation, as dicts; s.title, s.pop(), s.clear()

A run given `session=` runs on the stored conversation followed by the new messages, and its turn is stored when
it ends; while it runs, the turn is checkpointed, so that a turn whose process died can be resumed
(`agent.resume(session=s)`; `s.pending_turn` shows it, `s.discard_pending()` drops it). How a run is bound to the
session and what is stored when it ends: `chatagent.sessions.turn`.
"""

from __future__ import annotations

import logging
import os
import uuid
from typing import Any

from chatagent.llm.request import Usage
from chatagent.schema import SYSTEM, USER, Message, content_text, to_messages
from chatagent.sessions import history
from chatagent.sessions.history import Checkpoint
from chatagent.sessions.pending import PendingTurn
from chatagent.sessions.store import _UNCHANGED, DEFAULT_USER, SessionInfo, SQLStore
from chatagent.sessions.store_urls import open_store

logger = logging.getLogger("chatagent.sessions")

INTERRUPTED = "interrupted"
TITLE_CHARS = 60
_MAX_ID_CHARS = 256


class Session:
    """A conversation kept in a store (see the module docstring).

    Args:
        session_id: its name, unique per user in the store; None makes a new random one.
        store: a URL (`sqlite:///path.db`, `postgresql://...`), a file path, or None for the default store
            ($CHATAGENT_SESSION_STORE, else `<workspace>/sessions/sessions.db`).
        user: whose conversation it is: the same id under two users names two conversations.
    """

    __slots__ = ("id", "user", "store")

    def __init__(
        self,
        session_id: str | None = None,
        store: str | os.PathLike[str] | SQLStore | None = None,
        *,
        user: str = DEFAULT_USER,
    ) -> None:
        self.id = _checked("session_id", session_id if session_id is not None else uuid.uuid4().hex)
        self.user = _checked("user", user)
        self.store = open_store(store)

    def __repr__(self) -> str:
        return f"Session({self.id!r}, {self.store.url!r}, user={self.user!r})"

    # ---- reading and editing -------------------------------------------------------------------------------

    def messages(self) -> list[dict]:
        """The stored conversation, oldest first (a system message first if it has one)."""
        loaded = self.store.load(self.user, self.id)
        return ([loaded.system] if loaded.system else []) + loaded.messages

    @property
    def title(self) -> str:
        """The title: the start of the first question unless renamed ('' renames back, from the next turn on); ''
        for a conversation not stored yet."""
        info = self.store.info(self.user, self.id)
        return info.title if info else ""

    @title.setter
    def title(self, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError(f"title must be a string, got {type(value).__name__}")
        self.store.set_title(self.user, self.id, " ".join(value.split())[:200] or None)  # '': from the question

    def info(self) -> SessionInfo | None:
        """Its listing (title, times, number of messages); None if nothing is stored yet."""
        return self.store.info(self.user, self.id)

    def append(self, messages: list[dict | Message]) -> None:
        """Store messages as one turn without running an agent (what a completed run does with its turn). It does
        not wait for a run in progress, nor refuse it: that run's own turn is then refused (SessionConflictError)."""
        new = to_messages(messages)
        system, turn = stored_turn(new, [])
        if not turn and system is _UNCHANGED:
            return
        self.store.commit(self.user, self.id, None, turn, title_of(new), system)

    @property
    def usage(self) -> Usage:
        """What the runs of its stored turns used: tokens, model calls, and the cost where prices are known."""
        return Usage(**self.store.usage(self.user, self.id))

    @property
    def pending_turn(self) -> PendingTurn | None:
        """The turn that did not end (its process died, its run failed after doing work, or it waits for approval);
        None if there is none. `agent.resume(session=s)` continues it."""
        return self.store.pending(self.user, self.id)

    def discard_pending(self) -> PendingTurn | None:
        """Drop the pending turn (its completed tool calls are forgotten: a new run may call them again); what it
        was, or None."""
        return self.store.discard_pending(self.user, self.id)

    def history(self) -> list[Checkpoint]:
        """Its checkpoints, oldest first: the conversation after each step of each stored turn (a Checkpoint:
        `id`, `turn`, `step`, `kind` 'input' | 'model' | 'tools' | 'pause', `messages`, `at`; see
        `chatagent.sessions.history`)."""
        return history.history(self.store, self.user, self.id)

    def fork(self, checkpoint: str, session_id: str | None = None) -> Session:
        """A new session (same store and user; `session_id`, or a new random id) holding this conversation as it
        was at `checkpoint` (an id from `history()`); this one is left as it is. From a checkpoint inside a turn,
        the rest of that turn is the branch's pending turn: `agent.resume(session=branch)` goes on from there."""
        new_id = history.fork(self.store, self.user, self.id, checkpoint, _checked("session_id", session_id)
                              if session_id is not None else None)  # fmt: skip
        return Session(new_id, self.store, user=self.user)

    def replay(self, checkpoint: str, agent: Any, messages: list[dict] | None = None, **kwargs: Any
               ) -> tuple[Session, Any]:  # fmt: skip
        """Run `agent` (this conversation's, or another) again from `checkpoint`, on a fork: with `messages`, a new
        turn on the conversation as it was there (a changed question); without, the turn the checkpoint cuts goes
        on from that step (`agent.resume`). (the branch, the run: iterate it); this session is left as it is."""
        branch = self.fork(checkpoint)
        if messages is not None:
            return branch, agent.run(messages, session=branch, **kwargs)
        return branch, agent.resume(session=branch, **kwargs)

    def pop(self) -> list[dict]:
        """Undo the last turn: remove it and return its messages ([] if there is none)."""
        return self.store.pop(self.user, self.id)

    def clear(self) -> None:
        """Forget the conversation and its title (the session stays, empty)."""
        self.store.clear(self.user, self.id)

    def delete(self) -> bool:
        """Delete the session; False if it was not stored."""
        return self.store.clear(self.user, self.id, delete=True)

    @staticmethod
    def list(
        store: str | os.PathLike[str] | SQLStore | None = None, *, user: str | None = DEFAULT_USER
    ) -> list[SessionInfo]:
        """The user's sessions in a store, most recently updated first (`user=None`: every user's)."""
        return open_store(store).list(_checked("user", user) if user is not None else None)


def _checked(what: str, value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, got {type(value).__name__}")
    if not value or len(value) > _MAX_ID_CHARS or not value.isprintable():
        raise ValueError(f"{what} must be 1 to {_MAX_ID_CHARS} printable characters, got {value[:80]!r}")
    return value


def title_of(messages: list[Message]) -> str:
    """A title from the first user message: its first words, or the names of its files."""
    for m in messages:
        if m.role != USER:
            continue
        text = " ".join(content_text(m.content).split())
        if not text and not isinstance(m.content, str):
            text = ", ".join(os.path.basename(item.value) for item in m.content if item.kind != "text")
        if len(text) > TITLE_CHARS:
            cut = text[:TITLE_CHARS].rsplit(" ", 1)[0] or text[:TITLE_CHARS]
            text = cut + "…"
        if text:
            return text
    return ""


# ---- a run bound to a session (see chatagent.sessions.turn) ------------------------------------------------------


def stored_turn(new: list[Message], response: list[Message]) -> tuple[Any, list[dict]]:
    """(the new system message as a dict, or _UNCHANGED; the turn's other messages as dicts)."""
    system: Any = _UNCHANGED
    if new and new[0].role == SYSTEM:
        system, new = new[0].model_dump(), new[1:]
    return system, [m.model_dump() for m in new + response]


def checked_session(session: Any) -> Session:
    """`session`, when it is a Session (else TypeError)."""
    if not isinstance(session, Session):
        raise TypeError(f"session must be a chatagent.Session, got {type(session).__name__}")
    return session


def tool_state_key(session: Session) -> str:
    """What tools keep a stored conversation's state under (its code sandbox): unguessable, and distinct for two
    users' conversations of the same name."""
    import hashlib

    return hashlib.sha256(f"{session.store.url}\0{session.user}\0{session.id}".encode()).hexdigest()[:32]

"""Session: one stored conversation, and how a run is bound to it.

    from chatagent import BasicAgent, Session
    s = Session('support-42')                    # the default store: a SQLite file in the workspace
    for rsp in bot.run([{'role': 'user', 'content': 'And in French?'}], session=s):
        ...                                       # the model sees the stored conversation, then the new message
    s.messages()                                  # the conversation, as dicts; s.title, s.pop(), s.clear()

A run given `session=` takes the session's run lock (SessionBusyError if another run has it), loads the stored
conversation and runs on it followed by the new messages. When the run ends, its turn (the new messages and the
response) is written in one transaction:

* completed: the turn is saved whole;
* stopped by the caller (`close()`/`aclose()`, Ctrl-C, a cancelled task): the turn is saved with the partial
  response (tool calls without their results dropped), its last message marked `extra['interrupted'] = True`;
* failed (an exception) or the process killed: nothing is saved; the stored conversation is as before the turn.

A system message first among the new messages becomes the conversation's system message (it replaces the stored
one); the agent's own `system_message` is merged into it at each run, never stored.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterator, Sequence
from typing import Any, cast

from chatagent.schema import SYSTEM, USER, Message, content_text, drop_unanswered_calls, to_messages
from chatagent.schema.fragment import Fragment
from chatagent.schema.stream import Collector
from chatagent.sessions.store import _UNCHANGED, DEFAULT_USER, Loaded, SessionInfo, SQLStore
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


# ---- a run bound to a session ------------------------------------------------------------------------------

DONE, STOPPED, FAILED = "done", "stopped", "failed"


def stored_turn(new: list[Message], response: list[Message]) -> tuple[Any, list[dict]]:
    """(the new system message as a dict, or _UNCHANGED; the turn's other messages as dicts)."""
    system: Any = _UNCHANGED
    if new and new[0].role == SYSTEM:
        system, new = new[0].model_dump(), new[1:]
    return system, [m.model_dump() for m in new + response]


class Turn:
    """One run's binding to a session: holds the run lock from creation to `end`, gives the conversation to run
    on, collects the response and saves the turn at the end (see the module docstring)."""

    __slots__ = ("session", "new", "loaded", "conversation", "_release", "_collector", "name")

    def __init__(self, session: Session, new: list[Message]) -> None:
        self.session = session
        self._collector = Collector()
        self.name: str | None = None  # the agent's, given to response messages that have none
        self._release = session.store.lock(session.user, session.id)
        try:
            self.loaded: Loaded = session.store.load(session.user, session.id)
        except BaseException:
            self._release()
            raise
        history = to_messages(self.loaded.messages)
        system = new[0] if new and new[0].role == SYSTEM else None
        if system is None and self.loaded.system is not None:
            system = to_messages([self.loaded.system])[0]
        self.new = new
        rest = new[1:] if new and new[0].role == SYSTEM else new
        self.conversation = ([system] if system is not None else []) + history + rest

    def add(self, fragments: Sequence[Message]) -> None:
        self._collector.add(fragments)

    def end(self, outcome: str) -> None:
        """Save the turn as `outcome` says (DONE, STOPPED or FAILED) and release the run lock."""
        try:
            if outcome == FAILED:
                return
            response = self._collector.messages()
            for m in response:
                if m.name is None and self.name is not None:
                    m.name = self.name
            if outcome == STOPPED:
                response = drop_unanswered_calls(response)
            system, turn = stored_turn(self.new, response)
            if outcome == STOPPED and turn:
                turn[-1].setdefault("extra", {})[INTERRUPTED] = True
            if not turn and system is _UNCHANGED:
                return
            s = self.session
            s.store.commit(s.user, s.id, self.loaded, turn, title_of(self.conversation), system)
        finally:
            self._release()


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


def run_turn(
    session: Session, new: list[Message], start: Callable[[list[Message]], Iterator[list[Fragment]]], name: str | None
) -> Iterator[list[Fragment]]:
    """The fragments of `start(conversation)`, a run on the session's conversation, saved as a turn at its end."""
    turn = Turn(session, new)
    turn.name = name
    stream = None
    outcome = FAILED
    try:
        stream = start(turn.conversation)
        for fragments in stream:
            turn.add(fragments)
            yield fragments
        outcome = DONE
    except (GeneratorExit, KeyboardInterrupt):
        outcome = STOPPED
        raise
    finally:
        if stream is not None:
            cast(Generator, stream).close()  # `start` returns a generator (the agent's driver)
        _end(turn, outcome)


async def arun_turn(
    session: Session,
    new: list[Message],
    start: Callable[[list[Message]], AsyncIterator[list[Fragment]]],
    name: str | None,
) -> AsyncIterator[list[Fragment]]:
    """`run_turn` for `arun()`: the store is read and written in worker threads, off the event loop."""
    turn = await asyncio.to_thread(Turn, session, new)
    turn.name = name
    stream = None
    outcome = FAILED
    try:
        stream = start(turn.conversation)
        async for fragments in stream:
            turn.add(fragments)
            yield fragments
        outcome = DONE
    except (GeneratorExit, KeyboardInterrupt, asyncio.CancelledError):
        outcome = STOPPED
        raise
    finally:
        # started before any await, so that a cancellation arriving now cannot keep the turn from ending
        ending = asyncio.get_running_loop().run_in_executor(None, _end, turn, outcome)
        try:
            if stream is not None:
                await cast(AsyncGenerator, stream).aclose()  # `start` returns an async generator (the driver)
        finally:
            await asyncio.shield(ending)


def _end(turn: Turn, outcome: str) -> None:
    """End the turn; a completed turn that cannot be saved raises, a stopped one logs why (the stop goes on)."""
    if outcome != STOPPED:
        turn.end(outcome)
        return
    try:
        turn.end(outcome)
    except Exception:
        logger.exception("the stopped turn of session %r could not be saved", turn.session.id)

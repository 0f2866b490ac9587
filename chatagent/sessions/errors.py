"""The errors of session stores and of runs bound to a session."""

from __future__ import annotations

from chatagent.errors import ChatAgentError


class SessionError(ChatAgentError):
    """Base of the errors about sessions."""


class SessionStoreError(SessionError):
    """The store cannot be used: a wrong URL, a damaged or locked database file, a schema from a newer chatagent,
    a lost connection. The message names the store and the problem; nothing stored was changed."""


class SessionBusyError(SessionError):
    """Another run is in progress on this session (in this process or another): runs on one session never
    interleave. Try again when it has finished."""


class SessionConflictError(SessionError):
    """The session was changed (cleared, a turn undone or added elsewhere) while this run was in progress, so this
    turn was not saved: the stored conversation is the other change's."""


class SessionPendingTurnError(SessionError):
    """The session has a turn that did not end (its process died, or its run failed after doing work): a new run
    would lose it or repeat its tool calls. Continue it with `agent.resume(session=...)` or drop it with
    `session.discard_pending()`; `session.pending_turn` shows it."""


def damaged_error(url: str, session_id: str, e: Exception) -> SessionStoreError:
    """A stored turn of `session_id` that does not decode: the session is left as it is."""
    return SessionStoreError(
        f"session {session_id!r} in {url} is damaged (a stored turn is not valid JSON: {e}); it was not changed"
    )


def conflict_error(url: str, session_id: str) -> SessionConflictError:
    """Another writer changed `session_id` while this turn ran: the turn is not saved."""
    return SessionConflictError(
        f"session {session_id!r} in {url} was changed by another writer while this turn ran: the turn was not saved"
    )


__all__ = [
    "SessionBusyError", "SessionConflictError", "SessionError", "SessionPendingTurnError", "SessionStoreError",
    "conflict_error", "damaged_error",
]  # fmt: skip

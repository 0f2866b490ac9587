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


__all__ = ["SessionBusyError", "SessionConflictError", "SessionError", "SessionPendingTurnError", "SessionStoreError"]

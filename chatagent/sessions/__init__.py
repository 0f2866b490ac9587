"""Conversations that last: `Session`, stored in SQLite by default and in PostgreSQL when several processes serve.

    from chatagent import Session
    s = Session('support-42')                                   # <workspace>/sessions/sessions.db
    s = Session('support-42', 'postgresql://app@db/chat', user='alice')
    bot.run([new_message], session=s)                           # runs on the stored conversation, saves the turn
    bot.resume(session=s)                                       # continues a turn whose process died
    Session.list(user='alice')                                  # SessionInfo: id, title, times, size
    s.history(); s.fork(checkpoint_id)                          # every step (a Checkpoint); a branch from one

See `chatagent.sessions.turn` for how a run is saved (whole, stopped, paused, failed; checkpointed as it goes) and
`chatagent.sessions.store` for store URLs and the schema. psycopg is imported only for a postgresql:// store.
"""

from chatagent.sessions.errors import (
    SessionBusyError,
    SessionConflictError,
    SessionError,
    SessionPendingTurnError,
    SessionStoreError,
)
from chatagent.sessions.history import Checkpoint
from chatagent.sessions.pending import PendingTurn
from chatagent.sessions.session import Session
from chatagent.sessions.store import DEFAULT_USER, SessionInfo
from chatagent.sessions.store_urls import close_stores, default_store_url, open_store

__all__ = [
    "DEFAULT_USER",
    "Checkpoint",
    "PendingTurn",
    "Session",
    "SessionBusyError",
    "SessionConflictError",
    "SessionError",
    "SessionInfo",
    "SessionPendingTurnError",
    "SessionStoreError",
    "close_stores",
    "default_store_url",
    "open_store",
]

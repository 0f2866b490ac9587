"""Conversations that last: `Session`, stored in SQLite by default and in PostgreSQL when several processes serve.

    from chatagent import Session
    s = Session('support-42')                                   # <workspace>/sessions/sessions.db
    s = Session('support-42', 'postgresql://app@db/chat', user='alice')
    bot.run([new_message], session=s)                           # runs on the stored conversation, saves the turn
    Session.list(user='alice')                                  # SessionInfo: id, title, times, size

See `chatagent.sessions.session` for how a run is saved (whole, stopped, failed) and `chatagent.sessions.store`
for store URLs and the schema. psycopg is imported only for a postgresql:// store.
"""

from chatagent.sessions.errors import SessionBusyError, SessionConflictError, SessionError, SessionStoreError
from chatagent.sessions.session import Session
from chatagent.sessions.store import DEFAULT_USER, SessionInfo
from chatagent.sessions.store_urls import close_stores, default_store_url, open_store

__all__ = [
    "DEFAULT_USER",
    "Session",
    "SessionBusyError",
    "SessionConflictError",
    "SessionError",
    "SessionInfo",
    "SessionStoreError",
    "close_stores",
    "default_store_url",
    "open_store",
]

"""The tables of a feature kept in the session store (flows, traces, ...), created once per store.

`CREATE TABLE IF NOT EXISTS` is not safe on PostgreSQL against another process doing the same at once (one fails on
a unique index of the catalogue: a replica reading a flow while the worker writes its first), so a feature's
statements run under the store's schema lock, the one its own schema is created and migrated under.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence

from chatagent.sessions.store import SQLStore

_made: weakref.WeakKeyDictionary[SQLStore, set[str]] = weakref.WeakKeyDictionary()  # store -> its features' names
_lock = threading.Lock()


def ensure_tables(store: SQLStore, feature: str, statements: Sequence[str]) -> None:
    """Run `statements` (with the store's dialect placeholders) once in `store`, under its schema lock."""
    with _lock:
        made = _made.setdefault(store, set())
        if feature in made:
            return
        with store._write() as cur:
            store._lock_schema(cur)
            for statement in statements:
                cur.execute(statement.format(**store.dialect), ())
        made.add(feature)


__all__ = ["ensure_tables"]

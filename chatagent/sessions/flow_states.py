"""Where flows keep their state between methods: one row per flow run in the session store (SQLite by default,
PostgreSQL with a postgresql:// URL, the same URLs as sessions; see `chatagent.sessions.store`).

A row holds the flow's class, its status and its record (the state, the methods still to run, ...) as JSON,
written in one transaction after every method, so that a process killed at any point leaves the record of the
last completed method.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import orjson

from chatagent.sessions.errors import SessionStoreError
from chatagent.sessions.store import SQLStore
from chatagent.sessions.store_urls import open_store

TABLE = (
    "CREATE TABLE IF NOT EXISTS chatagent_flows (flow_id TEXT PRIMARY KEY, flow_class TEXT NOT NULL, "
    "status TEXT NOT NULL, body {blob} NOT NULL, updated {real} NOT NULL)"
)
SAVE = (
    "INSERT INTO chatagent_flows (flow_id, flow_class, status, body, updated) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (flow_id) DO UPDATE SET flow_class = excluded.flow_class, status = excluded.status, "
    "body = excluded.body, updated = excluded.updated"
)
LOAD = "SELECT flow_class, status, body FROM chatagent_flows WHERE flow_id = ?"
DELETE = "DELETE FROM chatagent_flows WHERE flow_id = ?"

_ready: set[int] = set()  # the stores whose table exists (by id: stores live as long as the process)
_ready_lock = threading.Lock()


class FlowStates:
    """The flow records of one store (a URL, a file path, a store, or None for the default session store)."""

    __slots__ = ("store",)

    def __init__(self, store: str | os.PathLike[str] | SQLStore | None = None) -> None:
        self.store = open_store(store)
        key = id(self.store)
        if key not in _ready:
            with _ready_lock:
                if key not in _ready:
                    with self.store._write() as cur:
                        cur.execute(TABLE.format(**self.store.dialect), ())
                    _ready.add(key)

    def save(self, flow_id: str, flow_class: str, status: str, record: dict[str, Any]) -> None:
        """Write a flow's record (replacing the one before) in one transaction."""
        body = orjson.dumps(record, default=_jsonable)
        with self.store._write() as cur:
            cur.execute(SAVE, (flow_id, flow_class, status, body, time.time()))

    def load(self, flow_id: str) -> tuple[str, str, dict[str, Any]] | None:
        """(class, status, record) of a flow, or None if the store has none by that id."""
        rows = self.store._read(LOAD, (flow_id,))
        if not rows:
            return None
        flow_class, status, body = rows[0]
        try:
            return flow_class, status, orjson.loads(bytes(body))
        except orjson.JSONDecodeError as e:
            raise SessionStoreError(f"{self.store.url}: the record of flow {flow_id!r} is damaged: {e}") from None

    def delete(self, flow_id: str) -> bool:
        with self.store._write() as cur:
            cur.execute(DELETE, (flow_id,))
            return cur.rowcount == 1


def _jsonable(value: Any) -> Any:
    """JSON for what orjson cannot write: pydantic models and the like as their dump, the rest as its text."""
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        return dump(mode="json")
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


__all__ = ["FlowStates"]

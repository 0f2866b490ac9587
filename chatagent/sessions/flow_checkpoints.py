"""A flow's checkpoints: the record it had after each of its steps (its start, each completed method), kept in the
flow's store beside its row (`chatagent.sessions.flow_states`), the newest `keep` of each flow (older ones deleted
as new ones come; 0 keeps none).

A checkpoint row is (flow, step number, the method that had just completed or None at the start, the record as
JSON, when). On PostgreSQL a step's checkpoint is written in the step's own transaction; on SQLite a step goes to
the flow's journal (no transaction), and the journal's records become checkpoints in the transaction that folds the
journal into the row (the flow pauses, ends or fails); until then `listed` reads them from the journal.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

TABLE = (
    "CREATE TABLE IF NOT EXISTS chatagent_flow_checkpoints (flow_id TEXT NOT NULL, step INTEGER NOT NULL, "
    "method TEXT, body {blob} NOT NULL, at {real} NOT NULL, PRIMARY KEY (flow_id, step))"
)
ADD = (
    "INSERT INTO chatagent_flow_checkpoints (flow_id, step, method, body, at) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (flow_id, step) DO NOTHING"
)
PRUNE = "DELETE FROM chatagent_flow_checkpoints WHERE flow_id = ? AND step <= ?"
LIST = "SELECT step, method, at FROM chatagent_flow_checkpoints WHERE flow_id = ? ORDER BY step"
ONE = "SELECT body FROM chatagent_flow_checkpoints WHERE flow_id = ? AND step = ?"
DROP = "DELETE FROM chatagent_flow_checkpoints WHERE flow_id = ?"
DEFAULT_KEEP = 100  # a flow's checkpoints kept (Flow.history_limit)

#: one checkpoint as written: (step, method or None, the record, when)
Row = tuple[int, str | None, dict[str, Any], float]


def method_of(record: dict[str, Any]) -> str | None:
    """The method whose completion a step's record follows (None: the flow's start, before any method)."""
    done = record.get("completed") or []
    return str(done[-1]) if done else None


def add(cur: Any, flow_id: str, rows: Iterable[Row], keep: int, default: Any) -> None:
    """Write `rows` (already in the store ones are left), then delete all but the newest `keep` of the flow's."""
    newest = -1
    for step, method, record, at in rows:
        if keep > 0:
            cur.execute(ADD, (flow_id, step, method, orjson.dumps(record, default=default), at))
        newest = max(newest, step)
    if newest >= 0:
        cur.execute(PRUNE, (flow_id, newest - max(keep, 0)))


def listed(store: Any, flow_id: str, journaled: list[Row], keep: int) -> list[tuple[int, str | None, float]]:
    """(step, method, when) of the flow's checkpoints, oldest first: the stored ones and those still in its journal
    (`journaled`), the newest `keep`."""
    found = {int(s): (int(s), m, float(a)) for s, m, a in store._read(LIST, (flow_id,))}
    for step, method, _, at in journaled:
        found.setdefault(step, (step, method, at))
    out = [found[s] for s in sorted(found)]
    return out[-keep:] if keep > 0 else []


def body(store: Any, flow_id: str, step: int, journaled: list[Row]) -> dict[str, Any] | None:
    """The record of the flow's checkpoint `step` (None if it has none)."""
    rows = store._read(ONE, (flow_id, step))
    if rows:
        return orjson.loads(bytes(rows[0][0]))
    return next((record for s, _, record, _ in journaled if s == step), None)


__all__ = ["DEFAULT_KEEP", "TABLE", "Row", "add", "body", "listed", "method_of"]

"""Turns in progress, as a store keeps them: the pending turn of a session and its checkpoints (and, beside them, what
a session's stored turns used).

While a run on a session goes on, its turn is *pending*: one row in `chatagent_pending` (the turn's key, the
session version it started from, its new messages, its state) and one row per checkpoint in
`chatagent_checkpoints`, each holding the messages completed since the last one (a model reply, a tool result)
and where they go in the response (`at`: a later checkpoint may rewrite messages from there on, as when a paused
call is marked). On SQLite the usual checkpoints go to the turn's journal file first and are folded into
`chatagent_checkpoints` when its state changes (see `chatagent.sessions.journal`); readers see both. The completed
turn is stored whole and its pending rows deleted in the same transaction (`SQLStore.commit`); a process that dies
leaves them, and `chatagent.Agent.resume` continues from them.

Checkpoints are written without waiting for the disk to sync (SQLite's `synchronous=NORMAL` and its journal, a
file mapping; PostgreSQL's `synchronous_commit = off`): they survive the death of the process (kill -9, OOM, a
redeploy) but a crash of the machine itself may lose the last of them; the completed turn is synced as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from chatagent.sessions.journal import Contents, after

#: states of a pending turn: running (or its process died), failed (an error ended its run), paused (waiting for
#: a person's decision on its calls)
RUNNING, FAILED, PAUSED = "running", "failed", "paused"

SCHEMA = [
    "CREATE TABLE chatagent_pending (sid {int} PRIMARY KEY, turn_key TEXT NOT NULL, base {int} NOT NULL, "
    "state TEXT NOT NULL, new_messages {blob} NOT NULL, detail {blob}, created {real} NOT NULL, "
    "updated {real} NOT NULL)",
    "CREATE TABLE chatagent_checkpoints (sid {int} NOT NULL, step {int} NOT NULL, at_index {int} NOT NULL, "
    "body {blob} NOT NULL, PRIMARY KEY (sid, step)) {without_rowid}",
]

START = (
    "INSERT INTO chatagent_pending (sid, turn_key, base, state, new_messages, detail, created, updated) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
TOUCH = "UPDATE chatagent_pending SET state = ?, detail = ?, updated = ? WHERE sid = ? AND turn_key = ?"
ADD_CHECKPOINT = "INSERT INTO chatagent_checkpoints (sid, step, at_index, body) VALUES (?, ?, ?, ?)"
# a later checkpoint: one statement, written only while the turn is still the session's pending one
ADD_LATER_CHECKPOINT = (
    "INSERT INTO chatagent_checkpoints (sid, step, at_index, body) SELECT p.sid, ?, ?, ? FROM chatagent_pending p "
    "JOIN chatagent_sessions s ON s.sid = p.sid WHERE s.user_id = ? AND s.session_id = ? AND p.turn_key = ?"
)
# the pending turn and its checkpoints, in one statement (one snapshot: a turn stored meanwhile is wholly gone)
LOAD_PENDING = (
    "SELECT p.sid, p.turn_key, p.base, p.state, p.new_messages, p.detail, p.created, p.updated, c.step, c.at_index, "
    "c.body FROM chatagent_pending p JOIN chatagent_sessions s ON s.sid = p.sid LEFT JOIN chatagent_checkpoints c "
    "ON c.sid = p.sid WHERE s.user_id = ? AND s.session_id = ? ORDER BY c.step"
)
PENDING_KEY = (
    "SELECT p.turn_key FROM chatagent_pending p JOIN chatagent_sessions s ON s.sid = p.sid "
    "WHERE s.user_id = ? AND s.session_id = ?"
)
LAST_STEP = "SELECT MAX(step) FROM chatagent_checkpoints WHERE sid = ?"
FIND_PENDING = "SELECT turn_key FROM chatagent_pending WHERE sid = ?"
DELETE_PENDING = "DELETE FROM chatagent_pending WHERE sid = ?"
DELETE_CHECKPOINTS = "DELETE FROM chatagent_checkpoints WHERE sid = ?"
# what a session's stored turns used: tokens, calls, cost (added when each turn is stored; see Session.usage)
GET_USAGE = "SELECT usage FROM chatagent_sessions WHERE sid = ?"
SET_USAGE = "UPDATE chatagent_sessions SET usage = ? WHERE sid = ?"
USAGE = "SELECT usage FROM chatagent_sessions WHERE user_id = ? AND session_id = ?"
USAGE_KEYS = ("prompt_tokens", "completion_tokens", "calls", "cost")


@dataclass(frozen=True, slots=True)
class PendingTurn:
    """A turn that did not end: its run's process died, its run failed, or it waits for a person (`state`).

    `messages` are the turn's new messages (as the run was given them), `response` what it had completed by its
    last checkpoint (model replies and tool results, in order); a paused turn's `kind` is 'approval' (`waiting`:
    the calls to approve) or 'input' (`waiting`: [{'name': the person whose message it waits for}]); `error` says
    why a failed one failed; `updated` is when its state last changed, `steps` the number of its next checkpoint
    (how many it has, counting from 0). `Agent.resume(session=...)` continues it; `Session.discard_pending()` drops
    it.
    """

    key: str
    state: str
    messages: list[dict[str, Any]]
    response: list[dict[str, Any]]
    base: int = 0
    created: float = 0.0
    updated: float = 0.0
    steps: int = 0
    detail: dict[str, Any] = field(default_factory=dict[str, Any])

    @property
    def kind(self) -> str | None:
        return self.detail.get("kind") if self.state == PAUSED else None

    @property
    def waiting(self) -> list[dict[str, Any]]:
        return list(self.detail.get("waiting") or [])

    @property
    def error(self) -> str | None:
        return self.detail.get("error")


def summed_usage(stored: Any, more: dict[str, Any]) -> dict[str, Any]:
    """A session's usage (`stored`: its JSON, or None) with `more` added (USAGE_KEYS; cost None while unpriced)."""
    total: dict[str, Any] = dict.fromkeys(USAGE_KEYS[:3], 0) | {"cost": None}
    for part in (orjson.loads(stored) if stored is not None else {}, more):
        for key in USAGE_KEYS[:3]:
            total[key] += int(part.get(key) or 0)
        if part.get("cost") is not None:
            total["cost"] = (total["cost"] or 0.0) + float(part["cost"])
    return total


def encode(value: Any) -> bytes:
    return orjson.dumps(value)


def decode_pending(rows: list[tuple[Any, ...]], journal: Contents | None = None) -> PendingTurn:
    """The PendingTurn of `LOAD_PENDING` rows, with the records of its journal (`chatagent.sessions.journal`) that
    follow its last stored step (raises orjson.JSONDecodeError)."""
    _, key, base, state, new, detail, created, updated = rows[0][:8]
    response: list[dict[str, Any]] = []
    last = -1
    for *_, step, at, body in rows:
        if step is not None:
            response[at:], last = orjson.loads(body), step
    if journal is not None and journal.key == key:
        for step, at, messages in after(journal.records, last):
            response[at:], last = messages, step
    return PendingTurn(
        key, state, orjson.loads(new), response, int(base), float(created), float(updated), last + 1,
        orjson.loads(detail) if detail is not None else {},
    )  # fmt: skip


__all__ = ["FAILED", "PAUSED", "RUNNING", "PendingTurn"]

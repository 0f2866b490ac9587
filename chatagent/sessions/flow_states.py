"""Where flows keep their state between methods: one row per flow run in the session store (SQLite by default,
PostgreSQL with a postgresql:// URL, the same URLs as sessions; see `chatagent.sessions.store`).

A row holds the flow's class, its status and its record (the state, the methods still to run, ...) as JSON. A
change of status (the flow pauses, ends, fails) is written in one transaction. The record of a running flow (as it
starts, and after each of its methods: a *step*) is written as a running turn's checkpoints are: on SQLite into the flow's
journal (`chatagent.sessions.journal`: a file mapping beside the database, `<database>-locks/flow-<hash>.journal`;
no transaction, and it survives the death of the process), folded into the row by the next change of status; on
PostgreSQL as a transaction that does not wait for the disk. Either way a process killed at any point leaves the
record of the last completed method; records carry a step number, and the newer of the row's and the journal's
is the flow's. Each step's record is also kept as one of the flow's checkpoints (`chatagent.sessions.flow_checkpoints`:
its history, the newest `keep` of them).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path
from typing import Any

import orjson

from chatagent.sessions import flow_checkpoints, journal
from chatagent.sessions.errors import SessionStoreError
from chatagent.sessions.sqlite import SQLiteStore
from chatagent.sessions.store import SQLStore
from chatagent.sessions.store_urls import open_store
from chatagent.sessions.tables import ensure_tables

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
RUNNING = "running"  # a step's status
STEP = "step"  # the record's key holding its step number

_writers: dict[Path, journal.Writer] = {}  # the journals this process has open, by path (one writer each)
_writers_lock = threading.Lock()


class FlowStates:
    """The flow records of one store (a URL, a file path, a store, or None for the default session store)."""

    __slots__ = ("store", "_journaled", "_paths")

    def __init__(self, store: str | os.PathLike[str] | SQLStore | None = None) -> None:
        self.store = open_store(store)
        self._journaled = isinstance(self.store, SQLiteStore) and journal.fcntl is not None
        self._paths: dict[str, Path] = {}  # flow id -> its journal's path
        ensure_tables(self.store, "flows", (TABLE, flow_checkpoints.TABLE))

    def save(self, flow_id: str, flow_class: str, status: str, record: dict[str, Any], *,
             keep: int = flow_checkpoints.DEFAULT_KEEP, checkpoint: bool = False) -> None:  # fmt: skip
        """Write a flow's record (replacing the one before) in one transaction, and fold its journal in, its steps
        becoming checkpoints (`keep`: how many the flow keeps; with `checkpoint`, this record is one too; see the
        module docstring). The record's step number goes up by one."""
        record[STEP] = int(record.get(STEP, -1)) + 1
        body = orjson.dumps(record, default=_jsonable)
        now = time.time()
        rows = self._journal_rows(flow_id)
        if checkpoint:
            rows.append((record[STEP], flow_checkpoints.method_of(record), record, now))
        with self.store._write() as cur:
            cur.execute(SAVE, (flow_id, flow_class, status, body, now))
            flow_checkpoints.add(cur, flow_id, rows, keep, _jsonable)
        if self._journaled:
            self._drop_journal(flow_id)

    def step(self, flow_id: str, flow_class: str, record: dict[str, Any], *,
             keep: int = flow_checkpoints.DEFAULT_KEEP) -> None:  # fmt: skip
        """Write the record of a running flow after one of its methods (a checkpoint too, the flow keeping the
        newest `keep`): into its journal on SQLite, else in a transaction that does not wait for the disk. The
        record's step number goes up by one."""
        record[STEP] = int(record.get(STEP, -1)) + 1
        now = time.time()
        if not self._journaled:
            body = orjson.dumps(record, default=_jsonable)
            row = (record[STEP], flow_checkpoints.method_of(record), record, now)
            with self.store._write(sync=False) as cur:
                cur.execute(SAVE, (flow_id, flow_class, RUNNING, body, now))
                flow_checkpoints.add(cur, flow_id, [row], keep, _jsonable)
            return
        path = self._journal_path(flow_id)
        try:
            with _writers_lock:
                writer = _writers.get(path)
                if writer is None:
                    writer = _writers[path] = journal.Writer(path, _key(flow_id))
                writer.append(record[STEP], 0, [{"class": flow_class, "record": record, "at": now}], _jsonable)
        except OSError as e:
            raise SessionStoreError(f"cannot write a flow's step beside {self.store.url}: {e.strerror or e}") from e

    def load(self, flow_id: str) -> tuple[str, str, dict[str, Any]] | None:
        """(class, status, record) of a flow, or None if the store has none by that id."""
        rows = self.store._read(LOAD, (flow_id,))
        found: tuple[str, str, dict[str, Any]] | None = None
        if rows:
            flow_class, status, body = rows[0]
            try:
                found = flow_class, status, orjson.loads(bytes(body))
            except orjson.JSONDecodeError as e:
                raise SessionStoreError(f"{self.store.url}: the record of flow {flow_id!r} is damaged: {e}") from None
        if self._journaled:
            contents = journal.read(self._journal_path(flow_id))
            if contents.key == _key(flow_id) and contents.records:
                step, _, (last,) = contents.records[-1]
                if found is None or step > int(found[2].get(STEP, -1)):
                    found = str(last["class"]), RUNNING, last["record"]
        return found

    def checkpoints(
        self, flow_id: str, keep: int = flow_checkpoints.DEFAULT_KEEP
    ) -> list[tuple[int, str | None, float]]:
        """(step, method, when) of the flow's checkpoints, oldest first (the newest `keep`)."""
        return flow_checkpoints.listed(self.store, flow_id, self._journal_rows(flow_id), keep)

    def checkpoint(self, flow_id: str, step: int) -> dict[str, Any] | None:
        """The record of the flow's checkpoint `step` (None if it has none)."""
        return flow_checkpoints.body(self.store, flow_id, step, self._journal_rows(flow_id))

    def delete(self, flow_id: str) -> bool:
        """Delete a flow's row, its checkpoints and its journal; whether it had a row."""
        with self.store._write() as cur:
            cur.execute(DELETE, (flow_id,))
            deleted = cur.rowcount == 1
            cur.execute(flow_checkpoints.DROP, (flow_id,))
        if self._journaled:
            self._drop_journal(flow_id)
        return deleted

    def _journal_rows(self, flow_id: str) -> list[flow_checkpoints.Row]:
        """The steps in the flow's journal, as checkpoints ([] without a journal)."""
        if not self._journaled:
            return []
        contents = journal.read(self._journal_path(flow_id))
        if contents.key != _key(flow_id):
            return []
        rows: list[flow_checkpoints.Row] = []
        for step, _, (last,) in contents.records:
            record = last["record"]
            rows.append((step, flow_checkpoints.method_of(record), record, float(last.get("at") or 0.0)))
        return rows

    def _journal_path(self, flow_id: str) -> Path:
        path = self._paths.get(flow_id)
        if path is None:
            assert isinstance(self.store, SQLiteStore)
            path = self._paths[flow_id] = self.store.flow_journal_path(flow_id)
        return path

    def _drop_journal(self, flow_id: str) -> None:
        """Close and remove the flow's journal: the row now holds its latest record."""
        path = self._journal_path(flow_id)
        with _writers_lock:
            writer = _writers.pop(path, None)
            if writer is not None:
                writer.close()
        try:
            journal.remove(path)
        except OSError as e:
            raise SessionStoreError(
                f"flow {flow_id!r} in {self.store.url} was written, but its journal could not be removed "
                f"({e.strerror or e})"
            ) from e


def _key(flow_id: str) -> str:
    """The key in a flow's journal header (ASCII, at most 40 characters, whatever the flow's id)."""
    return "flow-" + hashlib.sha256(flow_id.encode()).hexdigest()[:32]


def _jsonable(value: Any) -> Any:
    """JSON for what orjson cannot write: pydantic models and the like as their dump, the rest as its text."""
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        return dump(mode="json")
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


__all__ = ["FlowStates"]

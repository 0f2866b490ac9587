"""Where recorded traces and evaluation reports are kept: rows of the session store (SQLite by default, PostgreSQL
with a postgresql:// URL: the same URLs as sessions; see `chatagent.sessions.store`), each owned by a principal.

A trace is one row: what the list of runs shows (its name, status, start, duration, tokens, cost, how many steps, a
title) in columns, and the whole trace (its steps, the messages its model calls got) as one JSON body, written in
one statement when the run ends (`chatagent.run.traces` records them; `chatagent.run.trace_body` says what the
compact version 2 body holds, `expanded` reads it, and version 1 bodies, in the shape readers take). An evaluation report
(`chatagent.evals`) is a row the same way. Every read names the owner: another principal's trace is not found,
as if it did not exist. A store keeps at most `keep` traces per owner (the oldest go).
"""

from __future__ import annotations

import os
import time
import zlib
from dataclasses import dataclass
from typing import Any

import orjson

from chatagent.sessions.errors import SessionStoreError
from chatagent.sessions.store import SQLStore
from chatagent.sessions.store_urls import open_store
from chatagent.sessions.tables import ensure_tables

TABLES = [
    "CREATE TABLE IF NOT EXISTS chatagent_traces (trace_id TEXT PRIMARY KEY, owner TEXT NOT NULL, "
    "name TEXT NOT NULL, kind TEXT NOT NULL, status TEXT NOT NULL, started {real} NOT NULL, duration {real}, "
    "input_tokens {int} NOT NULL DEFAULT 0, output_tokens {int} NOT NULL DEFAULT 0, cost {real}, "
    "steps {int} NOT NULL DEFAULT 0, title TEXT NOT NULL DEFAULT '', body {blob} NOT NULL)",
    "CREATE INDEX IF NOT EXISTS chatagent_traces_by_owner ON chatagent_traces (owner, started)",
    "CREATE TABLE IF NOT EXISTS chatagent_eval_reports (report_id TEXT PRIMARY KEY, owner TEXT NOT NULL, "
    "name TEXT NOT NULL, created {real} NOT NULL, cases {int} NOT NULL, pass_rate {real}, body {blob} NOT NULL)",
    "CREATE INDEX IF NOT EXISTS chatagent_eval_reports_by_owner ON chatagent_eval_reports (owner, created)",
]
_COLUMNS = "trace_id, owner, name, kind, status, started, duration, input_tokens, output_tokens, cost, steps, title"
SAVE = (
    f"INSERT INTO chatagent_traces ({_COLUMNS}, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (trace_id) DO UPDATE SET name = excluded.name, kind = excluded.kind, status = excluded.status, "
    "duration = excluded.duration, input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens, "
    "cost = excluded.cost, steps = excluded.steps, title = excluded.title, body = excluded.body "
    "WHERE chatagent_traces.owner = excluded.owner"
)
GET = "SELECT body FROM chatagent_traces WHERE owner = ? AND trace_id = ?"
DELETE = "DELETE FROM chatagent_traces WHERE owner = ? AND trace_id = ?"
CLEAR = "DELETE FROM chatagent_traces WHERE owner = ?"
PRUNE = (
    "DELETE FROM chatagent_traces WHERE owner = ? AND started < (SELECT started FROM chatagent_traces "
    "WHERE owner = ? ORDER BY started DESC LIMIT 1 OFFSET ?)"
)
SAVE_REPORT = (
    "INSERT INTO chatagent_eval_reports (report_id, owner, name, created, cases, pass_rate, body) "
    "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (report_id) DO UPDATE SET name = excluded.name, "
    "cases = excluded.cases, pass_rate = excluded.pass_rate, body = excluded.body "
    "WHERE chatagent_eval_reports.owner = excluded.owner"
)
LIST_REPORTS = (
    "SELECT report_id, name, created, cases, pass_rate FROM chatagent_eval_reports WHERE owner = ? "
    "ORDER BY created DESC LIMIT ?"
)
GET_REPORT = "SELECT body FROM chatagent_eval_reports WHERE owner = ? AND report_id = ?"
DELETE_REPORT = "DELETE FROM chatagent_eval_reports WHERE owner = ? AND report_id = ?"

DEFAULT_KEEP = 10_000  # traces per owner; the oldest go
_ZLIB = b"\x78"  # how a compressed body starts (a JSON one starts with "{")
_PRUNE_EVERY = 100  # writes between two prunings of one store


@dataclass(frozen=True, slots=True)
class TraceInfo:
    """A recorded trace as the list shows it: its id, name (the agent's, a flow's class, ...), kind ('run', 'flow',
    'case'), status ('ok', 'error'), start (Unix seconds), duration (seconds), tokens, cost (US dollars, None when
    no price is known), its number of steps, and a title (the start of its first question)."""

    id: str
    owner: str
    name: str
    kind: str
    status: str
    started: float
    duration: float | None
    input_tokens: int
    output_tokens: int
    cost: float | None
    steps: int
    title: str


@dataclass(frozen=True, slots=True)
class ReportInfo:
    """A stored evaluation report as listed: its id, name, when it was made, its number of cases, its pass rate."""

    id: str
    name: str
    created: float
    cases: int
    pass_rate: float | None


class TraceStore:
    """The traces and evaluation reports of one store (a URL, a file path, a store, or None for the default session
    store: $CHATAGENT_SESSION_STORE, else the workspace's); `keep`: traces kept per owner."""

    __slots__ = ("store", "keep", "_writes")

    def __init__(self, store: str | os.PathLike[str] | SQLStore | None = None, *, keep: int = DEFAULT_KEEP) -> None:
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            raise ValueError(f"keep must be a positive number of traces, got {keep!r}")
        self.store = open_store(store)
        self.keep = keep
        self._writes = 0
        ensure_tables(self.store, "traces", TABLES)

    # ---- traces -------------------------------------------------------------------------------------------

    def save(self, trace: dict[str, Any], body: bytes | None = None) -> None:
        """Write a trace (a dict as `chatagent.run.traces` makes it, with 'id' and 'owner'; `body`: it as JSON, if
        made already), replacing an earlier write of the same trace by the same owner (a trace id of another
        owner's is left alone)."""
        usage = trace.get("usage") or {}
        row = (
            trace["id"], trace["owner"], trace.get("name") or "", trace.get("kind") or "run",
            trace.get("status") or "ok", float(trace["started"]), trace.get("duration"),
            int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0), usage.get("cost"),
            len(trace.get("steps") or ()), (trace.get("title") or "")[:200],
            zlib.compress(body if body is not None else orjson.dumps(trace, default=_jsonable), 1),
        )  # fmt: skip
        with self.store._write(sync=False) as cur:
            cur.execute(SAVE, row)
            self._writes += 1
            if self._writes % _PRUNE_EVERY == 1:
                cur.execute(PRUNE, (trace["owner"], trace["owner"], self.keep - 1))

    def list(
        self,
        owner: str,
        *,
        name: str | None = None,
        status: str | None = None,
        kind: str | None = None,
        text: str | None = None,
        since: float | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[TraceInfo]:
        """`owner`'s traces, newest first: those of agent (or flow) `name`, of `status` ('ok', 'error'), of `kind`,
        whose title holds `text` (any case), started at or after `since` (Unix seconds); `limit` of them from
        `offset`."""
        where: list[str] = ["owner = ?"]
        params: list[Any] = [owner]
        for column, value in (("name", name), ("status", status), ("kind", kind)):
            if value:
                where.append(f"{column} = ?")
                params.append(value)
        if text:
            where.append("LOWER(title) LIKE ?")
            params.append("%" + text.lower().replace("%", "").replace("_", "") + "%")
        if since is not None:
            where.append("started >= ?")
            params.append(float(since))
        sql = f"SELECT {_COLUMNS} FROM chatagent_traces WHERE {' AND '.join(where)} ORDER BY started DESC LIMIT ? OFFSET ?"
        rows = self.store._read(sql, (*params, int(limit), int(offset)))
        return [_info(r) for r in rows]

    def get(self, owner: str, trace_id: str) -> dict[str, Any] | None:
        """The whole trace `trace_id` of `owner`, or None (no such trace, or another owner's)."""
        rows = self.store._read(GET, (owner, trace_id))
        return expanded(_loaded(self.store.url, "trace", trace_id, rows[0][0])) if rows else None

    def delete(self, owner: str, trace_id: str) -> bool:
        with self.store._write() as cur:
            cur.execute(DELETE, (owner, trace_id))
            return cur.rowcount == 1

    def clear(self, owner: str) -> int:
        """Delete every trace of `owner`; how many went."""
        with self.store._write() as cur:
            cur.execute(CLEAR, (owner,))
            return cur.rowcount

    # ---- evaluation reports -------------------------------------------------------------------------------

    def save_report(self, owner: str, report: dict[str, Any]) -> None:
        """Write an evaluation report (a dict with 'id', 'name', 'created', 'cases', 'pass_rate')."""
        row = (report["id"], owner, report.get("name") or "", float(report.get("created") or time.time()),
               len(report.get("cases") or ()), report.get("pass_rate"), orjson.dumps(report, default=_jsonable))  # fmt: skip
        with self.store._write() as cur:
            cur.execute(SAVE_REPORT, row)

    def reports(self, owner: str, limit: int = 100) -> list[ReportInfo]:
        """`owner`'s evaluation reports, newest first."""
        rows = self.store._read(LIST_REPORTS, (owner, int(limit)))
        return [ReportInfo(str(r[0]), str(r[1]), float(r[2]), int(r[3]), r[4]) for r in rows]

    def report(self, owner: str, report_id: str) -> dict[str, Any] | None:
        rows = self.store._read(GET_REPORT, (owner, report_id))
        return _loaded(self.store.url, "report", report_id, rows[0][0]) if rows else None

    def delete_report(self, owner: str, report_id: str) -> bool:
        with self.store._write() as cur:
            cur.execute(DELETE_REPORT, (owner, report_id))
            return cur.rowcount == 1


def _info(r: tuple[Any, ...]) -> TraceInfo:
    return TraceInfo(str(r[0]), str(r[1]), str(r[2]), str(r[3]), str(r[4]), float(r[5]), r[6], int(r[7]), int(r[8]),
                     r[9], int(r[10]), r[11] or "")  # fmt: skip


def _loaded(url: str, what: str, key: str, body: Any) -> dict[str, Any]:
    raw = bytes(body)
    try:
        value = orjson.loads(zlib.decompress(raw) if raw[:1] == _ZLIB else raw)  # (an older row: JSON as it is)
    except (orjson.JSONDecodeError, zlib.error) as e:
        raise SessionStoreError(f"{url}: the {what} {key!r} is damaged: {e}") from None
    if not isinstance(value, dict):
        raise SessionStoreError(f"{url}: the {what} {key!r} is damaged: not a JSON object")
    return value


def expanded(body: dict[str, Any]) -> dict[str, Any]:
    """A stored trace in the shape readers take (version 1's: each step a dict with its id, a message a dict, a
    model call's input and output lists of message indexes, its usage a dict, its times in seconds). A version 2
    body (compact, see `chatagent.run.trace_body`) is rebuilt so; an older one is already so."""
    if body.get("version", 1) < 2:
        return body
    try:
        return _expanded(body)
    except (TypeError, ValueError, IndexError, KeyError) as e:
        raise SessionStoreError(f"the trace {body.get('id')!r} is damaged: {type(e).__name__}") from None


def _expanded(body: dict[str, Any]) -> dict[str, Any]:
    started, refs, cfgs = float(body["started"]), body.get("refs") or [], body.get("cfgs") or []
    stored: list[Any] = body.get("messages") or []
    rows: list[Any] = body.get("steps") or []
    messages: list[dict[str, Any]] = []
    for role, content, name, call, arguments, reasoning, extra in stored:
        m: dict[str, Any] = {"role": role, "content": content}
        for key, value in (("name", name), ("reasoning_content", reasoning), ("extra", extra)):
            if value is not None:
                m[key] = value
        if call is not None:
            m["function_call"] = {"name": call, "arguments": arguments}
        messages.append(m)
    steps: list[dict[str, Any]] = []
    inputs: dict[int, list[int]] = {}  # a model call's id -> its input (a later call's may extend it)
    for at, row in enumerate(rows, 1):
        if isinstance(row, dict):
            steps.append(row)
            continue
        kind, parent, start, duration, name = row[:5]
        step: dict[str, Any] = {"id": at, "kind": kind, "name": name, "parent": parent, "start": started + start / 1e6,
                                "duration": duration / 1e6}  # fmt: skip
        if kind == "model":
            model_type, base, first, count, out, outs, tokens_in, tokens_out, cost, functions, cfg, error = row[5:17]
            given = inputs[at] = (inputs[base] if base is not None else []) + refs[first : first + count]
            step.update(model_type=model_type, input=given, output=list(range(out, out + outs)),
                        usage={"input_tokens": tokens_in, "output_tokens": tokens_out, "cost": cost})  # fmt: skip
            if functions is not None:
                step["functions"] = functions
            if cfg is not None:
                step["cfg"] = cfgs[cfg]
        else:
            call_id, arguments, result, cached, error, error_kind = row[5:11]
            step.update(call_id=call_id, arguments=arguments, result=result, cached=cached)
            if error:
                step["error_kind"] = error_kind
        if error:
            step["error"] = error
        steps.append(step)
    whole = {k: v for k, v in body.items() if k not in ("refs", "cfgs")}
    return {**whole, "messages": messages, "steps": steps}


def _jsonable(value: Any) -> Any:
    """JSON for what orjson cannot write: pydantic models as their dump, sets and tuples as lists, the rest as text."""
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        return dump(mode="json")
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


__all__ = ["DEFAULT_KEEP", "ReportInfo", "TraceInfo", "TraceStore", "expanded"]

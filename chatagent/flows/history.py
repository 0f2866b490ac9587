"""A flow's checkpoint history, and new flow runs branched from it (`Flow.history`, `Flow.fork`, `Flow.replay`):

    for cp in flow.history():           # FlowCheckpoint(id='3', method='work', state={...}, at=...), oldest first
        print(cp.id, cp.method, cp.state)
    branch = flow.fork(cp.id, state={"size": 2})   # a new stored flow at that checkpoint, its state edited
    MyFlow.resume(branch.id)                       # runs it on from there (or: branch, out = flow.replay(...))

A checkpoint is the flow's record after one of its steps (its start, each completed method): its state, the
methods still to run. `fork` copies it into a new flow run (a new id, owned by whom the running run acts for),
`state` fields set over the checkpoint's state; the original flow and its history are left as they are. The
branch's history starts with the fork. Only the flow's owner lists or forks it (as `resume`: another's flow is
as if there were none). A flow keeps its newest `history_limit` checkpoints (100 by default; 0 keeps none).
"""

from __future__ import annotations

import copy
import time
import uuid
from dataclasses import dataclass
from typing import Any

from chatagent.sessions.flow_states import FlowStates


@dataclass(frozen=True, slots=True)
class FlowCheckpoint:
    """A flow as it was after one step: `id` (its step number, as text), the `method` that had just completed
    (None: the flow's start), its `state` then (JSON), `at` (Unix seconds)."""

    id: str
    method: str | None
    state: dict[str, Any]
    at: float


def checkpoints(states: FlowStates, flow_id: str, keep: int) -> list[FlowCheckpoint]:
    """The checkpoints of the stored flow `flow_id`, oldest first (the newest `keep`)."""
    out = []
    for step, method, at in states.checkpoints(flow_id, keep):
        record = states.checkpoint(flow_id, step) or {}
        out.append(FlowCheckpoint(str(step), method, dict(record.get("state") or {}), at))
    return out


def branch_record(states: FlowStates, flow_id: str, checkpoint: str, state: Any, keep: int) -> dict[str, Any]:
    """The record of a new flow run at `checkpoint` of the flow `flow_id`: its state with `state`'s fields (a dict,
    or a state model) set over it and a new id, the fork noted. ValueError for a checkpoint the flow has not."""
    step = str(checkpoint)
    found = states.checkpoint(flow_id, int(step)) if step.isdigit() else None
    if found is None or step not in {c.id for c in checkpoints(states, flow_id, keep)}:
        raise ValueError(f"flow {flow_id[:80]!r} has no checkpoint {step[:40]!r} (see its history())")
    dump = getattr(state, "model_dump", None)
    if callable(dump):
        dumped: Any = dump(mode="json")
        edits: dict[str, Any] = {k: v for k, v in dumped.items() if k != "id"}  # (the model's own id stays out)
    elif state is None or isinstance(state, dict):
        edits = dict(state or {})  # pyright: ignore[reportUnknownArgumentType]
        if "id" in edits:
            raise ValueError("a fork's id is a new one: leave 'id' out of its state")
    else:
        raise TypeError(f"a fork's state is a dict of fields or a state model, got {type(state).__name__}")
    record = copy.deepcopy(found)
    record["state"] = {**record["state"], **edits, "id": uuid.uuid4().hex}
    record["asked"] = None
    record["forked_from"] = {"flow_id": flow_id, "checkpoint": step, "at": time.time()}
    return record


__all__ = ["FlowCheckpoint", "branch_record", "checkpoints"]

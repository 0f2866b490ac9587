"""A session's checkpoint history: the steps of its stored turns, oldest first (`Session.history()`), and a new
conversation branched from any of them (`Session.fork`), the original left as it is.

    for cp in s.history():                  # Checkpoint(id='2.5', turn=2, step=1, kind='model', messages=5, at=...)
        print(cp.id, cp.kind, cp.messages)
    branch = s.fork('2.5')                  # a new Session: the conversation as it was after that step

A *step* is what one phase of a turn added: the person's messages, or a decision on a pause ('input'), a model
reply ('model'), its tool calls' results with what nested runs showed ('tools'), a pause for a person ('pause'). A
*checkpoint* is the conversation after a step: `id` is '<turn>.<messages>' (never reused: a removed turn's number is
not given again), `messages` how many the conversation holds then, `at` when the step completed (Unix seconds; None
for turns stored before chatagent kept it). When each message was done is kept with its turn, in the same store.

`fork(checkpoint)` copies the conversation up to it into a new session (same store, same user: a principal forks
only its own conversations). From a checkpoint that ends a turn, the branch is ready for a new message (try another
question there: a replay with changed input). From one inside a turn, the branch holds the turns before and that
turn up to the step as a *pending* turn: `agent.resume(session=branch)` goes on from the step, the model asked from
there (a replay, with another agent or model if you like); the steps before are not run again.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from chatagent.sessions.errors import SessionError
from chatagent.sessions.pending import PAUSED, RUNNING
from chatagent.sessions.store import _UNCHANGED, SQLStore

INPUT, MODEL, TOOLS, PAUSE = "input", "model", "tools", "pause"
_PAUSES = {"pending_questions": "question", "pending_approval": "approval", "pending_user_input": "input"}


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """The conversation after one step of a stored turn (see the module docstring)."""

    id: str
    turn: int  # the stored turn's number (from 1)
    step: int  # the step's place in its turn (from 0)
    kind: str  # 'input', 'model', 'tools' or 'pause'
    messages: int  # the conversation's messages up to it (its system message not counted)
    at: float | None  # when the step completed (Unix seconds)


def kind_of(message: dict[str, Any]) -> str:
    """The kind of step a stored message belongs to."""
    role, extra = message.get("role"), message.get("extra")
    if extra and not _PAUSES.keys().isdisjoint(extra):  # (a nested run's pause too: it paused the whole run)
        return PAUSE
    if role == "function" or (extra and "nested_in" in extra):
        return TOOLS
    return MODEL if role == "assistant" else INPUT


def steps_of(turn: Sequence[dict[str, Any]], times: Sequence[float | None]) -> list[list[Any]]:
    """A turn's steps: [[messages of the turn up to the step's end, kind, when it completed], ...]."""
    out: list[list[Any]] = []
    for i, m in enumerate(turn):
        kind = kind_of(m)
        if out and out[-1][1] == kind and kind != PAUSE:
            out[-1][0], out[-1][2] = i + 1, times[i]
        else:
            out.append([i + 1, kind, times[i]])
    return out


def history(store: SQLStore, user: str, session_id: str) -> list[Checkpoint]:
    """The checkpoints of `user`'s stored conversation `session_id`, oldest first ([] if it has none)."""
    out: list[Checkpoint] = []
    total = 0
    for number, turn, times in store.turns(user, session_id):
        for k, (end, kind, at) in enumerate(steps_of(turn, times or [None] * len(turn))):
            out.append(Checkpoint(f"{number}.{total + end}", number, k, kind, total + end, at))
        total += len(turn)
    return out


def fork(store: SQLStore, user: str, session_id: str, checkpoint: str, new_id: str | None = None) -> str:
    """Copy `user`'s conversation `session_id` up to `checkpoint` (an id from `history`) into the new conversation
    `new_id` (made up when None), a turn cut at a step left pending there; its id. ValueError for a checkpoint the
    conversation does not have, SessionError when `new_id` holds a conversation already."""
    rows = store.turns(user, session_id)
    found = next((c for c in history(store, user, session_id) if c.id == checkpoint), None)
    if found is None:
        raise ValueError(f"session {session_id!r} has no checkpoint {str(checkpoint)[:40]!r} (see its history())")
    new_id = new_id if new_id is not None else uuid.uuid4().hex
    if store.info(user, new_id) is not None or store.pending(user, new_id) is not None:
        raise SessionError(f"session {new_id!r} exists already: fork into a new one")
    loaded = store.load(user, session_id)  # (its attached files restored: the branch stores them as its own)
    info = store.info(user, session_id)
    title = info.title if info is not None else ""
    system: Any = loaded.system if loaded.system is not None else _UNCHANGED
    total = 0
    for number, turn, times in rows:
        messages = loaded.messages[total : total + len(turn)]
        if number < found.turn:
            store.commit(user, new_id, None, messages, title, system, times=times)
            system = _UNCHANGED
        elif number == found.turn:
            _cut(store, user, new_id, messages[: found.messages - total], len(turn), title, system, times)
            break
        total += len(turn)
    return new_id


def _cut(store: SQLStore, user: str, new_id: str, kept: list[dict[str, Any]], whole: int, title: str, system: Any,
         times: list[float] | None) -> None:  # fmt: skip
    """Store the turn that the checkpoint cuts: whole when it ends there, else pending at the cut."""
    if len(kept) == whole:
        store.commit(user, new_id, None, kept, title, system, times=times)
        return
    n = 0
    while n < len(kept) and kind_of(kept[n]) == INPUT:
        n += 1
    new, response = kept[:n], kept[n:]
    if system is not _UNCHANGED:  # the branch's first turn is cut: its system message goes first in its new ones
        new = [system, *new]
    state, detail = RUNNING, None
    extra: dict[str, Any] = (response[-1].get("extra") or {}) if response else {}
    pause = next((k for k in _PAUSES if k in extra), None)
    if pause is not None:  # cut at a pause: the branch waits for the person, as the turn did
        state, detail = PAUSED, {"kind": _PAUSES[pause], "waiting": extra[pause]}
        if pause == "pending_user_input":
            detail["waiting"] = [{"name": extra[pause]}]
    loaded = store.load(user, new_id, files=False)
    store.checkpoint(user, new_id, loaded, uuid.uuid4().hex, 0, 0, response or None, new, state, detail)


__all__ = ["INPUT", "MODEL", "PAUSE", "TOOLS", "Checkpoint", "fork", "history", "kind_of", "steps_of"]

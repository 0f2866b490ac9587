"""A run bound to a session: the turn it makes, checkpointed as it goes and stored whole at its end.

`run_turn` / `arun_turn` wrap a run's fragments (see `chatagent.run.start`). The run takes the session's run lock
(SessionBusyError if another run has it), runs on the stored conversation followed by the new messages, and its
`Turn` collects what it shows. At the run's phase boundaries (before a tool batch or a model call, once something
completed since the last one) the run calls `Turn.flush`, which writes a checkpoint: the turn is then *pending* in
the store (see `chatagent.sessions.pending`). When the run ends, its turn is written in one transaction:

* completed: the turn is stored whole (its pending rows go);
* stopped by the caller (`close()`/`aclose()`, Ctrl-C, a cancelled task): stored with the partial response (tool
  calls without their results dropped), its last message marked `extra['interrupted'] = True`;
* paused for a person (calls waiting for approval, or a UserAgent waiting for the person's message): it stays
  pending, waiting; the next run with the decision (an approval message, or `Agent.resume(session=...,
  approval=...)`) or with the person's message continues it, and the turn is stored whole with that message in
  it; for an approval, a run with other messages stores the paused turn as it stands (its calls then count as
  not approved);
* failed (an exception): it stays pending if a checkpoint holds work it completed (so that `Agent.resume` can
  continue without repeating it), else nothing is stored;
* the process killed: what the last checkpoint holds stays pending.

A new run on a session whose turn is pending (not paused) raises SessionPendingTurnError: resume it or discard it.
A system message first among the new messages becomes the conversation's system message (it replaces the stored
one); the agent's own `system_message` is merged into it at each run, never stored.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterator, Sequence
from typing import Any, cast

from chatagent.schema import FUNCTION, SYSTEM, Message, drop_unanswered_calls, to_messages
from chatagent.schema.fragment import Fragment, fragment
from chatagent.schema.stream import Collector
from chatagent.sessions.errors import SessionError, SessionPendingTurnError
from chatagent.sessions.pending import FAILED as PENDING_FAILED
from chatagent.sessions.pending import PAUSED, PendingTurn
from chatagent.sessions.session import INTERRUPTED, Session, stored_turn, title_of
from chatagent.sessions.session import checked_session as checked_session  # for run.start: one import
from chatagent.sessions.session import tool_state_key as tool_state_key  # (likewise)
from chatagent.sessions.store import _UNCHANGED, Loaded

logger = logging.getLogger("chatagent.sessions")

DONE, STOPPED, FAILED = "done", "stopped", "failed"
# what marks a run that paused for a person, on its last message (chatagent.run.approval, chatagent.agents.user)
PENDING_APPROVAL, PENDING_INPUT = "pending_approval", "pending_user_input"
PENDING_QUESTIONS = "pending_questions"  # a tool asked a person something (chatagent.run.interrupts)
_CLEAN = 1 << 62  # `Turn._dirty` when nothing checkpointed was changed


class Turn:
    """One run's binding to a session: holds the run lock from creation to `end`, gives the conversation to run
    on, collects the response, checkpoints it (`flush`) and stores the turn at the end (see the module docstring).

    `decision`: the new messages decide on the calls of a turn paused for approval (it continues that turn).
    `resume`: continue the pending turn (SessionError if there is none); `restored` then holds what it had
    completed, which the run takes as input and shows again first. `check(what the paused turn waits for, the new
    messages)`: raises on a decision that does not fit it (the turn then stays paused, as it was).
    """

    __slots__ = (
        "session", "new", "loaded", "conversation", "name", "key", "restored", "replay", "_release", "_collector",
        "offset", "decided", "usage", "_count", "_flushed", "_dirty", "_steps", "_lock", "_shift", "_prefix",
        "_seen",
    )  # fmt: skip

    def __init__(self, session: Session, new: list[Message], *, decision: bool = False, resume: bool = False,
                 check: Callable[[dict[str, Any], list[Message]], None] | None = None) -> None:  # fmt: skip
        self.session = session
        self._collector = Collector()
        self.name: str | None = None  # the agent's, given to response messages that have none
        self.key = uuid.uuid4().hex  # the turn's own: idempotency keys of its tool calls derive from it
        self.restored: list[Message] = []
        self.replay = resume  # resume() shows the whole turn; a decision on a paused one goes on from it
        self.decided = False  # a paused turn goes on with a decision on its calls
        self.usage: Any = None  # the run's Usage (chatagent.llm.request), added to the session's when stored
        self._count = 0  # messages in the response so far
        self._flushed = 0  # of them, those the store's checkpoints hold
        self._dirty = _CLEAN  # the first of those changed since
        self._steps = 0  # checkpoints written (0: the turn is not pending in the store)
        self._lock = threading.Lock()  # flush and end: never at once (a cancelled arun ends while one writes)
        self.offset = 0  # resume(): where the run's response goes in the one shown (after the replayed part)
        self._shift = 0  # a decision: the same, for the stored turn only (the caller saw the restored part)
        self._prefix: list[Message] = []  # what precedes the run's own response: the restored part, a decision
        self._seen: dict[int, float] = {-1: time.time()}  # when each message of the response began (-1: the turn)
        store = session.store
        self._release = store.lock(session.user, session.id)
        try:
            self.loaded: Loaded = store.load(session.user, session.id)
            found = store.pending(session.user, session.id)
            if found is not None and found.state == PAUSED and found.detail.get("kind") == "input" and new:
                decision = True  # the person's message
            if found is not None and not (resume or decision):
                if found.state != PAUSED:
                    raise _pending_error(session, found)
                self._store_paused(found)  # the person went on without deciding: the turn is stored as it is
                found = None
            if found is None and resume:
                raise SessionError(f"session {session.id!r} has no turn to resume")
            tail: list[Message] = []
            if found is not None:
                if check is not None and found.state == PAUSED and new:  # a wrong decision leaves the turn paused
                    check(found.detail, new)
                new, tail = self._adopt(found, new, resume)
        except BaseException:
            self._release()
            raise
        history = to_messages(self.loaded.messages)
        system = new[0] if new and new[0].role == SYSTEM else None
        if system is None and self.loaded.system is not None:
            system = to_messages([self.loaded.system])[0]
        self.new = new
        rest = new[1:] if new and new[0].role == SYSTEM else new
        self.conversation = ([system] if system is not None else []) + history + rest + tail

    def _store_paused(self, found: PendingTurn) -> None:
        s = self.session
        new = to_messages(found.messages)
        system, turn = stored_turn(new, to_messages(found.response))
        s.store.commit(s.user, s.id, self.loaded, turn, title_of(new), system, pending_key=found.key)
        self.loaded = s.store.load(s.user, s.id)

    def _adopt(self, found: PendingTurn, decision: list[Message], resume: bool) -> tuple[list[Message], list[Message]]:
        """Take over the pending turn `found`: (its new messages, what the run takes after them: the restored
        part, then the decision on a paused turn's calls)."""
        if found.state == PAUSED and not decision:
            kind = found.detail.get("kind")
            raise SessionError(
                f"the turn of session {self.session.id!r} waits for a person's message: run with it"
                if kind == "input"
                else f"the turn of session {self.session.id!r} waits for answers to its questions: run with "
                "chatagent.answer_message({question id: answer})"
                if kind == "question"
                else f"the turn of session {self.session.id!r} waits for a decision on its tool calls: resume it "
                "with approval=True, False or {call id: bool}"
            )
        if found.state != PAUSED and decision:
            raise SessionPendingTurnError(
                f"session {self.session.id!r} has no turn waiting for approval: {_pending_error(self.session, found)}"
            )
        if found.base != self.loaded.version:
            raise SessionError(
                f"session {self.session.id!r} was changed after its pending turn started: that turn cannot go on "
                "(session.discard_pending() drops it)"
            )
        self.key, self._steps = found.key, max(found.steps, 1)  # pending already: its next write is not the first
        self.decided = found.state == PAUSED
        self.restored = to_messages(found.response)
        self._prefix = self.restored + decision  # a decision is part of the turn, where it was taken
        self._flushed = len(self.restored)
        self._count = len(self._prefix)
        if resume:
            self.offset = len(self._prefix)
        else:  # a decision on a paused turn, whose caller has seen the restored part: the run goes on from it
            self._shift = len(self._prefix)
            self._collector.add(self.replayed())
        return to_messages(found.messages), self._prefix

    # ---- what the run shows -------------------------------------------------------------------------------

    def replayed(self) -> list[Fragment]:
        """What precedes the run's own response (the restored part, a decision) as fragments, shown first by
        `resume()`."""
        return [fragment(m, i) for i, m in enumerate(self._prefix)]

    def add(self, fragments: Sequence[Fragment], replayed: bool = False) -> None:
        """A piece of the response as the caller sees it (placed after `restored` when that is not replayed)."""
        shift = self._shift
        if shift:
            fragments = [f.copy() for f in fragments]
            for f in fragments:
                f.index += shift
        elif self.offset and not replayed:
            for f in fragments:  # in place: what the caller sees of a resumed turn goes on after the replay
                f.index += self.offset
        for f in fragments:
            i = f.index
            if i >= self._count:
                self._count = i + 1
                self._seen[i] = time.time()
            elif i < self._flushed and not (i == len(self._collector) and not f.replace):  # not a replayed one
                self._dirty = min(self._dirty, i)
        self._collector.add(fragments)

    @property
    def dirty(self) -> bool:
        """Whether something completed or changed since the last checkpoint."""
        return self._count > self._flushed or self._dirty != _CLEAN

    def flush(self, state: str | None = None, detail: dict[str, Any] | None = None) -> None:
        """Write a checkpoint of what completed since the last one (and `state`)."""
        with self._lock:
            self._flush(state, detail)

    def _flush(self, state: str | None = None, detail: dict[str, Any] | None = None) -> None:
        start = self._dirty if self._dirty < self._flushed else self._flushed
        changed = self._collector.dumps(start)  # what the last checkpoint does not hold
        if not changed and state is None:
            return
        s, step = self.session, self._steps
        if step and state is None:  # the usual one
            s.store.append(s.user, s.id, self.key, step, start, changed)
        else:
            new = None if step else [m.model_dump() for m in self.new]
            s.store.checkpoint(s.user, s.id, self.loaded, self.key, step, start, changed or None, new,
                               state or "running", detail)  # fmt: skip
        self._steps = step + 1
        self._flushed, self._dirty = start + len(changed), _CLEAN

    def get(self, call_id: str) -> str | None:
        """The idempotency key of the call `call_id` once a checkpoint holds it (the turn's key and the call's place
        in the response; None before): the run's context looks keys up here (`RunContext.call_keys`)."""
        messages = self._collector.messages()[: self._flushed]
        for i in range(len(messages) - 1, -1, -1):
            m = messages[i]
            if m.function_call is not None and (m.extra or {}).get("function_id") == call_id:
                return f"{self.key}:{i}"
        return None

    def unanswered(self) -> list[Message]:
        """The restored part's last calls that have no result yet (to run first when it is resumed)."""
        k = len(self.restored)
        while k and self.restored[k - 1].role == FUNCTION:  # the results after the last reply's calls
            k -= 1
        answered = [(m.extra or {}).get("function_id") for m in self.restored[k:]]
        start = k
        while start and self.restored[start - 1].function_call is not None:
            start -= 1
        calls = self.restored[start:k]
        if len(answered) >= len(calls):
            return []
        return calls[len(answered) :]  # results come in call order: the first ones are answered

    # ---- the end --------------------------------------------------------------------------------------------

    def end(self, outcome: str, error: BaseException | None = None) -> None:
        """Store the turn as `outcome` says (DONE, STOPPED or FAILED; DONE with calls waiting for approval is a
        pause) and release the run lock."""
        try:
            with self._lock:
                self._end(outcome, error)
        finally:
            self._release()

    def _end(self, outcome: str, error: BaseException | None) -> None:
        if outcome == FAILED:  # what it completed stays pending (not what was in flight: a reply cut off)
            if self._steps:
                detail = {"error": f"{type(error).__name__}: {error}"[:500]} if error is not None else None
                s = self.session
                s.store.checkpoint(s.user, s.id, self.loaded, self.key, self._steps, 0, None, None, PENDING_FAILED,
                                   detail)  # fmt: skip
            return
        response = self._collector.messages()
        last = (response[-1].extra or {}) if response else {}
        if outcome == DONE and last.get(PENDING_APPROVAL):
            self._flush(PAUSED, {"kind": "approval", "waiting": last[PENDING_APPROVAL]})
            return
        if outcome == DONE and last.get(PENDING_QUESTIONS):
            self._flush(PAUSED, {"kind": "question", "waiting": last[PENDING_QUESTIONS]})
            return
        if outcome == DONE and last.get(PENDING_INPUT):
            self._flush(PAUSED, {"kind": "input", "waiting": [{"name": last[PENDING_INPUT]}]})
            return
        for m in response:
            if m.name is None and self.name is not None:
                m.name = self.name
        if outcome == STOPPED:
            response = drop_unanswered_calls(response)
        system, turn = stored_turn(self.new, response)
        if outcome == STOPPED and turn:
            turn[-1].setdefault("extra", {})[INTERRUPTED] = True
        began = [self._seen[-1]] * (len(turn) - len(response)) + [self._seen.get(i, self._seen[-1]) for i in range(
            len(response))]  # fmt: skip
        if not turn and system is _UNCHANGED:
            return
        s = self.session
        pending_key = self.key if self._steps else None
        used = self.usage
        usage = (
            {"prompt_tokens": used.prompt_tokens, "completion_tokens": used.completion_tokens, "calls": used.calls,
             "cost": used.cost} if used is not None and used.calls else None
        )  # fmt: skip
        times = [*began[1:], time.time()]  # a message is done when the next begins (chatagent.sessions.history)
        s.store.commit(s.user, s.id, self.loaded, turn, title_of(self.conversation), system, pending_key, usage, times)


def _pending_error(session: Session, found: PendingTurn) -> SessionPendingTurnError:
    why = f"failed ({found.error})" if found.state == PENDING_FAILED and found.error else "was interrupted"
    return SessionPendingTurnError(
        f"session {session.id!r} has a turn that {why} after {len(found.response)} completed message(s): continue "
        "it with agent.resume(session=...) or drop it with session.discard_pending() before a new run"
    )


#: what a run's start is given: the turn (its conversation, what it restored, its checkpoint writer)
Start = Callable[[Turn], Iterator[list[Fragment]]]
AStart = Callable[[Turn], AsyncIterator[list[Fragment]]]


def run_turn(turn_of: Callable[[], Turn], start: Start, name: str | None) -> Iterator[list[Fragment]]:
    """The fragments of `start(turn)`, a run on the session's conversation, stored as a turn at its end."""
    turn = turn_of()
    turn.name = name
    stream = None
    outcome, error = FAILED, None
    try:
        replay = turn.replayed() if turn.replay else None
        if replay:
            turn.add(replay, replayed=True)
            yield replay
        stream = start(turn)
        for fragments in stream:
            turn.add(fragments)
            yield fragments
        outcome = DONE
    except (GeneratorExit, KeyboardInterrupt):
        outcome = STOPPED
        raise
    except BaseException as e:
        error = e
        raise
    finally:
        if stream is not None:
            cast(Generator[Any, Any, Any], stream).close()  # `start` returns a generator (the agent's driver)
        _end(turn, outcome, error)


async def arun_turn(turn_of: Callable[[], Turn], start: AStart, name: str | None) -> AsyncIterator[list[Fragment]]:
    """`run_turn` for `arun()`: the store is read and written in worker threads, off the event loop."""
    turn = await asyncio.to_thread(turn_of)
    turn.name = name
    stream = None
    outcome, error = FAILED, None
    try:
        replay = turn.replayed() if turn.replay else None
        if replay:
            turn.add(replay, replayed=True)
            yield replay
        stream = start(turn)
        async for fragments in stream:
            turn.add(fragments)
            yield fragments
        outcome = DONE
    except (GeneratorExit, KeyboardInterrupt, asyncio.CancelledError):
        outcome = STOPPED
        raise
    except BaseException as e:
        error = e
        raise
    finally:
        # started before any await, so that a cancellation arriving now cannot keep the turn from ending
        ending = asyncio.get_running_loop().run_in_executor(None, _end, turn, outcome, error)
        try:
            if stream is not None:
                await cast(AsyncGenerator[Any, Any], stream).aclose()  # `start` returns an async generator
        finally:
            await asyncio.shield(ending)


def _end(turn: Turn, outcome: str, error: BaseException | None = None) -> None:
    """End the turn; a completed turn that cannot be saved raises, a stopped one logs why (the stop goes on)."""
    if outcome != STOPPED:
        turn.end(outcome, error)
        return
    try:
        turn.end(outcome)
    except Exception:
        logger.exception("the stopped turn of session %r could not be saved", turn.session.id)


__all__ = ["DONE", "FAILED", "STOPPED", "Turn", "arun_turn", "run_turn"]

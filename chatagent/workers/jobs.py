"""Jobs: what a worker is asked to do, whose it is, and where it stands, read from chatagent's own records.

A job is a JSON object (`JobSpec`): a *turn* of an agent (a crew served as an agent included) on a session, a
*flow* run, or a *task* (a named function on one item, for batch work). It carries its owner (the principal
that submitted it: the session belongs to them, and only they may read the job) and the URL policy of the
surface it came from (`allow_hosts`, `public_only`, `shared`), which the worker applies to the run: its run acts
for its owner under that surface's rules (`chatagent.run.trust`), and a job decides neither.

Where a job stands is read from the records the run writes anyway, never from a second copy: a turn's job id is
marked on the last of the messages it adds (`extra['chatagent_job']`), so that the session's stored turns and its
pending turn (see `chatagent.sessions.pending`) say whether the job has not started, is under way (and how far:
its completed messages), waits for a person, failed, or is done; a flow's record says which methods completed.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from chatagent.errors import ChatAgentError
from chatagent.sessions import Session
from chatagent.sessions.pending import FAILED, PAUSED

TURN, FLOW, TASK = "chatagent.turn", "chatagent.flow", "chatagent.task"  # the DBOS workflows' names
WORKFLOWS = {"turn": TURN, "flow": FLOW, "task": TASK}
DEFAULT_QUEUE = "chatagent"
DEFAULT_SCHEMA = "dbos"  # the PostgreSQL schema of DBOS's tables
JOB_MARK = "chatagent_job"  # extra of the last message a turn job is given: the job's id
KINDS = ("turn", "flow", "task")
# what a job is, to its submitter
QUEUED, RUNNING, PAUSED_STATE, DONE, FAILED_STATE, CANCELLED = (
    "queued",
    "running",
    "paused",
    "done",
    "failed",
    "cancelled",
)
_MAX_ID = 128


def database_url(url: str) -> str:
    """The SQLAlchemy URL DBOS takes for a `postgresql://` URL (psycopg 3 as the driver)."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    if url.startswith("postgresql+psycopg://"):
        return url
    raise ValueError("DBOS workers need a postgresql:// store (the session store and DBOS share the database)")


def new_job_id() -> str:
    """An unguessable job id (also the DBOS workflow id)."""
    return f"job-{uuid.uuid4().hex}"


@dataclass(frozen=True)
class JobSpec:
    """One job (see the module docstring). `target` names an agent, a flow class or a task as the workers
    registered it; `owner` is the principal it runs as; `session_id` the conversation a turn runs on;
    `messages` a turn's new messages (none with `resume`: continue the session's pending turn); `flow_id`,
    `inputs` and `feedback` a flow's (`answering`: the question the feedback answers, `waiting_for` of the flow's
    record when it was submitted: one the flow no longer waits on fails the job, never answers another); `item` a
    task's input; `allow_hosts`/`public_only` the URL policy; `shared`:
    a shared surface took it (`chatagent serve`), whose rules the run keeps (`chatagent.run.trust.served`)."""

    kind: str
    target: str
    owner: str
    session_id: str | None = None
    messages: list[dict[str, Any]] = field(default_factory=lambda: [])
    resume: bool = False
    flow_id: str | None = None
    inputs: dict[str, Any] = field(default_factory=lambda: {})
    feedback: str | None = None
    answering: str | None = None
    item: Any = None
    allow_hosts: tuple[str, ...] = ()
    public_only: bool = False
    shared: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"a job's kind is one of {', '.join(KINDS)}, not {self.kind!r}")
        for name in ("target", "owner"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value or len(value) > _MAX_ID:
                raise ValueError(f"a job's {name} must be a non-empty text of at most {_MAX_ID} characters")
        if self.kind == "turn":
            if not self.session_id:
                raise ValueError("a turn job needs the session it runs on (session_id)")
            if self.resume == bool(self.messages):
                raise ValueError("a turn job has new messages, or resume=True without them: one of the two")
            if not all(isinstance(m, dict) for m in self.messages):
                raise TypeError("a turn job's messages are dicts")
        if self.kind == "flow" and not self.flow_id:
            raise ValueError("a flow job needs its flow id")
        if self.answering is not None and not self.answering.rpartition(":")[2].isdigit():
            raise ValueError("a flow job's 'answering' is the waiting_for() of the flow's record")

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["allow_hosts"] = list(self.allow_hosts)
        return out

    @classmethod
    def from_dict(cls, data: Any) -> JobSpec:
        if not isinstance(data, dict):
            raise TypeError(f"a job is a JSON object, got {type(data).__name__}")
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"a job has no field {sorted(unknown)[0]!r}")
        values = dict(data)
        values["allow_hosts"] = tuple(values.get("allow_hosts") or ())
        return cls(**values)


class FlowNotWaiting(ChatAgentError, ValueError):
    """Feedback for a flow that does not wait for it (it runs, ended, or went on to another question)."""


def waiting_for(record: dict[str, Any]) -> str | None:
    """The question a paused flow's record waits on, as `<invocation id>:<answers it had before>` (the same
    method may ask again); None when it waits for no one."""
    asked = record.get("asked")
    if not isinstance(asked, dict):
        return None
    key = str(asked.get("id"))
    return f"{key}:{len((record.get('answers') or {}).get(key) or ())}"


def feedback_for(spec: JobSpec, record: dict[str, Any]) -> str | None:
    """The feedback a flow job gives its stored flow now: its own if the flow waits on the question it answers;
    None if the question has this answer already (the job recovered after it went on) or the job gives none;
    FlowNotWaiting otherwise (another answer came first, or the flow waits on something else). A job without
    `answering` (from code that did not say) answers whatever the flow waits on."""
    if spec.feedback is None:
        return None
    if spec.answering is None:
        return spec.feedback if record.get("asked") is not None else None
    key, _, before = spec.answering.rpartition(":")
    answers = (record.get("answers") or {}).get(key) or ()
    if len(answers) > int(before):
        if answers[int(before)] == spec.feedback:
            return None  # given: the flow goes on from there
        raise FlowNotWaiting(f"flow {str(spec.flow_id)[:80]!r} had another answer to that question first")
    if waiting_for(record) != spec.answering:
        raise FlowNotWaiting(f"flow {str(spec.flow_id)[:80]!r} no longer waits for that answer")
    return spec.feedback


def marked(messages: list[dict[str, Any]], job_id: str) -> list[dict[str, Any]]:
    """`messages` with the job's id on the last one (copies: the caller's are not changed)."""
    out = [dict(m) for m in messages]
    out[-1]["extra"] = {**(out[-1].get("extra") or {}), JOB_MARK: job_id}
    return out


def _marker(messages: list[dict[str, Any]], job_id: str) -> int | None:
    for i, m in enumerate(messages):
        if (m.get("extra") or {}).get(JOB_MARK) == job_id:
            return i
    return None


def _added(messages: list[dict[str, Any]], start: int) -> list[dict[str, Any]]:
    """What a job added after its marked message `start`: up to the next message of a person (a decision on its
    calls, a later question), which is another job's."""
    out = []
    for m in messages[start + 1 :]:
        if m.get("role") == "user":
            break
        out.append(m)
    return out


@dataclass
class TurnRecord:
    """Where a turn job stands in its session: `state` (QUEUED: nothing of it is stored yet; RUNNING; PAUSED;
    FAILED; DONE), the messages it added so far, what a paused one waits for, why a failed one failed."""

    state: str
    response: list[dict[str, Any]] = field(default_factory=lambda: [])
    waiting: list[dict[str, Any]] = field(default_factory=lambda: [])
    kind: str | None = None
    error: str | None = None


def turn_record(session: Session, job_id: str) -> TurnRecord:
    """Where the turn job `job_id` stands, from the session's stored turns and its pending turn."""
    pending = session.pending_turn
    if pending is not None:
        whole = pending.messages + pending.response  # (a decision on a paused turn is in its response)
        at = _marker(whole, job_id)
        if at is not None:
            added = _added(whole, at)
            if pending.state == PAUSED:
                return TurnRecord(PAUSED_STATE, added, pending.waiting, pending.kind)
            if pending.state == FAILED:
                return TurnRecord(FAILED_STATE, added, error=pending.error)
            return TurnRecord(RUNNING, added)
    stored = session.messages()
    at = _marker(stored, job_id)
    if at is not None:
        return TurnRecord(DONE, _added(stored, at))
    return TurnRecord(QUEUED)


def last_text(messages: list[dict[str, Any]]) -> str:
    """The text of the last assistant message (the answer)."""
    for m in reversed(messages):
        if m.get("role") == "assistant" and isinstance(m.get("content"), str) and m["content"]:
            return m["content"]
    return ""


__all__ = [
    "JOB_MARK",
    "FlowNotWaiting",
    "JobSpec",
    "TurnRecord",
    "feedback_for",
    "marked",
    "new_job_id",
    "turn_record",
    "waiting_for",
]

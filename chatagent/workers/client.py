"""Submitting jobs to the workers and following them, from any process (`chatagent serve`, a script): DBOS's
client enqueues a job on its queue; where the job stands is read from DBOS (queued, running, its outcome) and
from chatagent's records (the messages a turn completed so far, a flow's methods), never from a copy.

    jobs = Jobs("postgresql://app@db/chat")
    job = jobs.turn("assistant", [{"role": "user", "content": "Summarise the report."}], user="alice")
    for message in job.stream(timeout=600):      # each completed message (a model reply, a tool result) as it lands
        ...
    status = job.wait(timeout=600)               # status.state: 'done', 'paused', 'failed', ...; status.messages

A job belongs to the principal that submitted it: `jobs.get(job_id, user=...)` is None for anyone else's.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from chatagent.errors import ChatAgentError
from chatagent.flows.flow import PAUSED
from chatagent.sessions import Session, open_store
from chatagent.sessions.flow_states import FlowStates
from chatagent.workers.jobs import (
    CANCELLED,
    DEFAULT_QUEUE,
    DEFAULT_SCHEMA,
    DONE,
    FAILED_STATE,
    PAUSED_STATE,
    QUEUED,
    RUNNING,
    WORKFLOWS,
    FlowNotWaiting,
    JobSpec,
    database_url,
    new_job_id,
    turn_record,
    waiting_for,
)

_ENDED = (DONE, PAUSED_STATE, FAILED_STATE, CANCELLED)
_POLL_S = 0.2


class JobTimeout(ChatAgentError, TimeoutError):
    """The job did not end within the time given (it goes on)."""


@dataclass
class JobStatus:
    """Where a job stands: `state` (queued, running, paused, failed, done, cancelled), the messages a turn job
    added so far (or its whole answer), a paused turn's `waiting` calls, a paused flow's `question`, a flow's
    `output`, a task's `result`, why a failed one failed (`error`: its type and message, for the owner's eyes)."""

    id: str
    kind: str
    state: str
    owner: str
    session_id: str | None = None
    flow_id: str | None = None
    messages: list[dict[str, Any]] = field(default_factory=lambda: [])
    waiting: list[dict[str, Any]] = field(default_factory=lambda: [])
    question: str | None = None
    output: Any = None
    result: Any = None
    error: dict[str, Any] | None = None

    @property
    def ended(self) -> bool:
        return self.state in _ENDED


class Jobs:
    """Submit jobs and follow them (see the module docstring). `store`: the workers' `postgresql://` store;
    `dbos_schema`: where DBOS keeps its tables (the workers' `dbos_schema`); `queue`: the default queue."""

    def __init__(self, store: str, *, dbos_schema: str = DEFAULT_SCHEMA, queue: str = DEFAULT_QUEUE) -> None:
        self.url = store
        self.queue = queue
        self.dbos_schema = dbos_schema
        from dbos import DBOS, DBOSClient, DBOSPortableJSONSerializer  # sqlalchemy and the rest: when first used

        system_url = database_url(store)
        DBOS.migrate(system_url, schema=dbos_schema)  # DBOS's tables, if no worker made them yet
        self.client: Any = DBOSClient(system_database_url=system_url, dbos_system_schema=dbos_schema,
                                      serializer=DBOSPortableJSONSerializer())  # fmt: skip
        self.store = open_store(store)

    def close(self) -> None:
        self.client.destroy()

    # ---- submitting -----------------------------------------------------------------------------------------

    def submit(self, spec: JobSpec, *, job_id: str | None = None, queue: str | None = None) -> Job:
        """Put `spec` on its queue, in its owner's partition (a queue with `per_principal` shares the workers
        among owners by it; others ignore it); the Job. A `job_id` already used names that job (its spec is not
        replaced): submitting a batch again attaches to what it started."""
        job_id = job_id or new_job_id()
        if spec.kind == "flow" and spec.flow_id is None:
            raise ValueError("a flow job needs its flow id")
        self.client.enqueue(
            {"workflow_name": WORKFLOWS[spec.kind], "queue_name": queue or self.queue, "workflow_id": job_id,
             "authenticated_user": spec.owner, "queue_partition_key": spec.owner},  # (fair shares: QueueLimits)
            spec.to_dict(),
        )  # fmt: skip
        return Job(self, job_id, spec)

    def turn(
        self, agent: str, messages: list[dict[str, Any]] | None = None, *, user: str, session_id: str | None = None,
        resume: bool = False, allow_hosts: tuple[str, ...] = (), public_only: bool = False,
        job_id: str | None = None, queue: str | None = None,
    ) -> Job:  # fmt: skip
        """A turn of `agent` on the session `session_id` (a new one, `job-…`, if None) of `user`."""
        job_id = job_id or new_job_id()
        spec = JobSpec("turn", agent, user, session_id or job_id, list(messages or []), resume,
                       allow_hosts=allow_hosts, public_only=public_only)  # fmt: skip
        return self.submit(spec, job_id=job_id, queue=queue)

    def flow(
        self, flow: str, inputs: dict[str, Any] | None = None, *, user: str, flow_id: str | None = None,
        feedback: str | None = None, job_id: str | None = None, queue: str | None = None,
        allow_hosts: tuple[str, ...] = (), public_only: bool = False,
    ) -> Job:  # fmt: skip
        """A run of the flow `flow` (a new one, whose id is the job's, unless `flow_id` names one to resume, with
        `feedback` for the question it paused on: FlowNotWaiting if it waits on none)."""
        job_id = job_id or new_job_id()
        answering = None
        if feedback is not None:
            found = FlowStates(self.store).load(flow_id) if flow_id is not None else None
            answering = waiting_for(found[2]) if found is not None and found[1] == PAUSED else None
            if answering is None:
                raise FlowNotWaiting(f"flow {str(flow_id)[:80]!r} waits for no feedback now")
        spec = JobSpec("flow", flow, user, flow_id=flow_id or job_id, inputs=dict(inputs or {}), feedback=feedback,
                       answering=answering, allow_hosts=allow_hosts, public_only=public_only)  # fmt: skip
        return self.submit(spec, job_id=job_id, queue=queue)

    def task(self, task: str, item: Any, *, user: str, job_id: str | None = None, queue: str | None = None) -> Job:
        """The task `task` on `item`."""
        return self.submit(JobSpec("task", task, user, item=item), job_id=job_id, queue=queue)

    # ---- following --------------------------------------------------------------------------------------------

    def get(self, job_id: str, *, user: str) -> Job | None:
        """The job `job_id` if it is `user`'s (None for an unknown id and for another principal's job alike)."""
        try:
            status = self.client.retrieve_workflow(job_id).get_status()
        except Exception:  # DBOS says an unknown id in several ways
            return None
        if status is None or status.authenticated_user != user or status.name not in WORKFLOWS.values():
            return None
        args = (status.input or {}).get("args") or ()
        if not args:
            return None
        return Job(self, job_id, JobSpec.from_dict(args[0]))

    def status(self, job: Job) -> JobStatus:
        dbos = self.client.retrieve_workflow(job.id).get_status()
        spec = job.spec
        out = JobStatus(job.id, spec.kind, QUEUED, spec.owner, spec.session_id, spec.flow_id)
        outcome: dict[str, Any] = dbos.output if isinstance(dbos.output, dict) else {}
        if dbos.status == "CANCELLED":
            out.state = CANCELLED
        elif dbos.status == "ERROR":
            out.state, out.error = FAILED_STATE, {"type": type(dbos.error).__name__, "message": str(dbos.error)[:500]}
        elif dbos.status in ("PENDING", "SUCCESS"):
            out.state = outcome.get("state", RUNNING) if dbos.status == "SUCCESS" else RUNNING
            out.error = outcome.get("error")
        if spec.kind == "turn" and spec.session_id is not None and not spec.resume:
            record = turn_record(Session(spec.session_id, self.store, user=spec.owner), job.id)
            out.messages, out.waiting = record.response, record.waiting
            if out.state == RUNNING and record.state not in (QUEUED, RUNNING):
                out.state = RUNNING  # its outcome is written, DBOS's record of it not yet
        elif spec.kind == "flow" and spec.flow_id is not None:
            found = FlowStates(self.store).load(spec.flow_id)
            if found is not None:
                record = found[2]
                out.output = record.get("output") if out.state == DONE else None
                out.question = (record.get("asked") or {}).get("question")
                out.messages = [{"role": "assistant", "name": m, "content": ""} for m in record.get("completed", [])]
        elif spec.kind == "task":
            out.result = outcome.get("result")
        return out


class Job:
    """A submitted job: its `id` and `spec`; `status()`, `wait()`, `stream()`."""

    def __init__(self, jobs: Jobs, job_id: str, spec: JobSpec) -> None:
        self.jobs, self.id, self.spec = jobs, job_id, spec

    def status(self) -> JobStatus:
        return self.jobs.status(self)

    def wait(self, timeout: float, poll: float = _POLL_S) -> JobStatus:
        """The job's status once it ended (done, paused, failed, cancelled); JobTimeout after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            status = self.status()
            if status.ended:
                return status
            if time.monotonic() > deadline:
                raise JobTimeout(f"job {self.id} did not end within {timeout:g} s (it is {status.state})")
            time.sleep(poll)

    def stream(self, timeout: float, poll: float = _POLL_S) -> Iterator[dict[str, Any]]:
        """Each message the job adds, as it is stored (a model reply, a tool result, a flow's completed method),
        until the job ends; JobTimeout after `timeout` seconds. `status()` then says how it ended."""
        deadline = time.monotonic() + timeout
        sent = 0
        while True:
            status = self.status()
            yield from status.messages[sent:]
            sent = max(sent, len(status.messages))
            if status.ended:
                return
            if time.monotonic() > deadline:
                raise JobTimeout(f"job {self.id} did not end within {timeout:g} s (it is {status.state})")
            time.sleep(poll)


def batch_ids(batch: str | None, n: int) -> list[str]:
    """The job ids of a batch's `n` items (a new batch when `batch` is None): submitting it again names the same
    jobs."""
    batch = batch or uuid.uuid4().hex
    return [f"batch-{batch}-{i}" for i in range(n)]


__all__ = ["Job", "JobStatus", "JobTimeout", "Jobs", "batch_ids"]

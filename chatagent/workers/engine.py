"""DBOS as the durable engine: turns, flows and tasks run as DBOS workflows on worker processes, dequeued from
DBOS queues with their concurrency and rate limits, and recovered by another worker when theirs dies.

    workers = Workers("postgresql://app@db/chat", agents={"assistant": bot, "review": crew.as_agent()},
                      flows={"trip": TripFlow}, queues=[QueueLimits("chatagent", worker_concurrency=4)])
    workers.serve_forever()          # until SIGTERM: the jobs in flight finish (within `grace`), then it returns

A workflow's steps are chatagent's own checkpoints: a turn's model replies and tool results (with their
idempotency keys) as `chatagent.sessions.pending` stores them, a flow's completed methods as its record holds
them, a crew's tasks as messages of its turn. DBOS keeps the job (its input, whose it is, its queue, its
outcome) and restarts an interrupted one; the restarted workflow reads those records to know where the work was
(`chatagent.workers.jobs.turn_record`, the flow's record) and goes on from there: `Agent.resume` for a turn,
`Flow.resume` for a flow. Nothing is recorded twice, and a completed step is never done again.

DBOS recovers the workflows of an executor when a process with its id starts; an executor that dies for good
is found by the others (`chatagent.workers.liveness`) and its workflows handed to DBOS's recovery, which puts
them back on their queue for any worker. Workflow inputs and outputs are stored as JSON (DBOS's portable format),
never pickled by us.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from dbos import DBOS, DBOSPortableJSONSerializer

from chatagent.agent import Agent
from chatagent.flows.flow import DONE as FLOW_DONE
from chatagent.flows.flow import PAUSED as FLOW_PAUSED
from chatagent.flows.flow import Flow
from chatagent.run.trust import Trust, acting_as, served
from chatagent.sessions import Session, SessionBusyError, open_store
from chatagent.sessions.flow_states import FlowStates
from chatagent.utils.url_fetch import URLPolicy
from chatagent.workers.jobs import (
    DEFAULT_QUEUE,
    DEFAULT_SCHEMA,
    DONE,
    FAILED_STATE,
    FLOW,
    PAUSED_STATE,
    QUEUED,
    TASK,
    TURN,
    JobSpec,
    database_url,
    feedback_for,
    marked,
    turn_record,
)
from chatagent.workers.liveness import Liveness

logger = logging.getLogger("chatagent.workers")

APP_VERSION = "chatagent-jobs-1"  # the format of these workflows: every worker recovers every job of it
DEFAULT_GRACE = 30.0
_BUSY_WAIT_S = 60.0  # how long a recovered turn waits for a dead run's session lock to be released


@dataclass(frozen=True)
class QueueLimits:
    """A DBOS queue and its limits: `concurrency` jobs at once across every worker, `worker_concurrency` in one
    worker process, `rate` = (at most this many starts, per this many seconds); `polling` is how often a worker
    looks for work on it (seconds). `per_principal`: at most this many jobs of one principal at once across
    every worker (DBOS's partitioned queue, a partition per job owner, taken in random order): one that submits
    a hundred jobs leaves the rest of the workers' room to the others."""

    name: str = DEFAULT_QUEUE
    concurrency: int | None = None
    worker_concurrency: int | None = 4
    rate: tuple[int, float] | None = None
    polling: float = 1.0
    per_principal: int | None = None


_current: Workers | None = None  # DBOS runs one instance per process: so do the workers


def _workers() -> Workers:
    if _current is None:
        raise RuntimeError("a chatagent job ran in a process whose Workers were not launched")
    return _current


@DBOS.workflow(name=TURN)
def _turn_workflow(job: dict[str, Any]) -> dict[str, Any]:
    return _workers().run_turn(JobSpec.from_dict(job), str(DBOS.workflow_id))


@DBOS.workflow(name=FLOW)
def _flow_workflow(job: dict[str, Any]) -> dict[str, Any]:
    return _workers().run_flow(JobSpec.from_dict(job))


@DBOS.workflow(name=TASK)
def _task_workflow(job: dict[str, Any]) -> dict[str, Any]:
    return _workers().run_task(JobSpec.from_dict(job))


class Workers:
    """This process as a DBOS worker for chatagent's jobs (see the module docstring).

    Args:
        store: the `postgresql://` URL of the session store; DBOS keeps its tables in the same database, in the
            schema `dbos_schema`.
        agents: the agents turn jobs may name (a crew: `crew.as_agent()`), by name.
        flows: the Flow classes flow jobs may name.
        tasks: functions `item -> JSON` that task jobs may name (batch work: `chatagent.workers.batch`).
        queues: the queues this worker takes jobs from, with their limits (registered in the database).
        executor_id: this worker's id in DBOS (default: unique per process); a worker restarted with the same id
            recovers its own jobs at once.
        recovery_interval: seconds between looks for dead workers whose jobs to recover.
        grace: seconds the jobs in flight may take to finish when the worker stops.
    """

    def __init__(
        self,
        store: str,
        *,
        agents: Mapping[str, Agent] | None = None,
        flows: Mapping[str, type[Flow[Any]]] | None = None,
        tasks: Mapping[str, Callable[[Any], Any]] | None = None,
        queues: Sequence[QueueLimits] = (QueueLimits(),),
        executor_id: str | None = None,
        dbos_schema: str = DEFAULT_SCHEMA,
        recovery_interval: float = 1.0,
        grace: float = DEFAULT_GRACE,
    ) -> None:
        self.url = store
        self.system_url = database_url(store)
        self.agents = dict(agents or {})
        self.flows = dict(flows or {})
        self.tasks = dict(tasks or {})
        for name, agent in self.agents.items():
            if not isinstance(agent, Agent):
                raise TypeError(f"agents[{name!r}] must be an Agent (a crew: crew.as_agent())")
        for name, flow in self.flows.items():
            if not (isinstance(flow, type) and issubclass(flow, Flow)):
                raise TypeError(f"flows[{name!r}] must be a Flow class")
        self.queues = list(queues)
        if not self.queues:
            raise ValueError("a worker takes jobs from at least one queue")
        for q in self.queues:
            if q.concurrency is not None and q.worker_concurrency is not None and q.worker_concurrency > q.concurrency:
                raise ValueError(f"queue {q.name!r}: a worker's concurrency ({q.worker_concurrency}) cannot exceed the "
                                 f"queue's ({q.concurrency}, across every worker): lower --worker-concurrency")  # fmt: skip
        self.executor_id = executor_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.dbos_schema = dbos_schema
        self.recovery_interval = recovery_interval
        self.grace = grace
        self.store = open_store(store)
        self._liveness: Liveness | None = None
        self._stop = threading.Event()

    # ---- the process ------------------------------------------------------------------------------------------

    def launch(self) -> Workers:
        """Start taking jobs (DBOS launched in this process; one Workers per process)."""
        global _current
        if _current is not None:
            raise RuntimeError("this process already runs chatagent workers (DBOS is one per process)")
        _current = self
        try:
            DBOS(config={
                "name": "chatagent", "system_database_url": self.system_url, "executor_id": self.executor_id,
                "application_version": APP_VERSION, "dbos_system_schema": self.dbos_schema,
                "serializer": DBOSPortableJSONSerializer(),
            })  # fmt: skip
            DBOS.listen_queues([q.name for q in self.queues])
            DBOS.launch()
            for q in self.queues:
                DBOS.register_queue(
                    q.name, global_concurrency=q.concurrency, worker_concurrency=q.worker_concurrency,
                    limiter={"limit": q.rate[0], "period": q.rate[1]} if q.rate else None,
                    partition_concurrency=q.per_principal, polling_interval_sec=q.polling, on_conflict="always_update",
                )  # fmt: skip
            self._liveness = Liveness(self.url, self.dbos_schema, self.executor_id, self.recovery_interval).start()
        except BaseException:
            _current = None
            raise
        logger.info("worker %s takes jobs from %s", self.executor_id, ", ".join(q.name for q in self.queues))
        return self

    def close(self, grace: float | None = None) -> None:
        """Stop taking jobs; the jobs in flight finish (within `grace` seconds; those cut off are recovered by
        another worker), then DBOS stops."""
        global _current
        if _current is not self:
            return
        if self._liveness is not None:
            self._liveness.stop()
        DBOS.destroy(workflow_completion_timeout_sec=int(self.grace if grace is None else grace))
        _current = None

    def serve_forever(self) -> None:
        """Launch (unless launched), then work until SIGTERM or SIGINT (in the main thread) or `stop()`; then close."""
        if _current is not self:
            self.launch()
        try:
            with _stop_on_signals(self._stop):
                while not self._stop.wait(1.0):
                    pass
        finally:
            self.close()

    def stop(self) -> None:
        self._stop.set()

    def __enter__(self) -> Workers:
        return self.launch()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- the jobs -------------------------------------------------------------------------------------------

    def run_turn(self, spec: JobSpec, job_id: str) -> dict[str, Any]:
        """A turn job, from where the session's records say it was (started anew, resumed, or already over)."""
        agent = self.agents.get(spec.target)
        if agent is None:
            return _failed("UnknownAgent", f"this worker has no agent {spec.target!r}")
        session = Session(spec.session_id, self.store, user=spec.owner)
        waited_until = time.monotonic() + _BUSY_WAIT_S
        while True:
            record = turn_record(session, job_id) if not spec.resume else None
            if record is not None and record.state in (DONE, PAUSED_STATE, FAILED_STATE):
                return {"state": record.state, "error": _error(record.error)}
            try:
                with _policy(spec):
                    if record is None:  # a resume job: the session's pending turn, if it still has one
                        run = agent.resume(session=session) if session.pending_turn is not None else iter(())
                    elif record.state == QUEUED:
                        run = agent.run(marked(spec.messages, job_id), session=session)
                    else:  # under way when its worker died: from its last checkpoint
                        run = agent.resume(session=session)
                    for _ in run:
                        pass
                break
            except SessionBusyError:
                if time.monotonic() > waited_until:
                    raise
                logger.info("job %s waits for its session's run lock (a dead run's goes with its connection)", job_id)
                time.sleep(0.2)
            except Exception as e:
                logger.warning("job %s failed: %s", job_id, type(e).__name__, exc_info=True)
                return _failed(type(e).__name__, str(e))
        if spec.resume:
            pending = session.pending_turn
            return {"state": PAUSED_STATE if pending is not None else DONE, "error": None}
        record = turn_record(session, job_id)
        return {"state": record.state, "error": _error(record.error)}

    def run_flow(self, spec: JobSpec) -> dict[str, Any]:
        """A flow job: started, or resumed from its record's last completed method (with `feedback` for a paused
        one). One job at a time goes on with a flow (a lock of the database's on its id): a job that came while
        another runs it waits, then reads where that one left it."""
        cls = self.flows.get(spec.target)
        if cls is None:
            return _failed("UnknownFlow", f"this worker has no flow {spec.target!r}")
        flow_id = str(spec.flow_id)
        states = FlowStates(self.store)
        with _flow_lock(self.url, self.dbos_schema, flow_id):
            found = states.load(flow_id)
            try:
                with _policy(spec):
                    if found is None:
                        cls(store=self.store).kickoff({**spec.inputs, "id": flow_id})
                    else:
                        _, status, record = found
                        feedback = feedback_for(spec, record)
                        if status != FLOW_DONE and (status != FLOW_PAUSED or feedback is not None):
                            cls.resume(flow_id, feedback, store=self.store)
            except Exception as e:
                logger.warning("flow job %s failed: %s", flow_id, type(e).__name__, exc_info=True)
                return _failed(type(e).__name__, str(e))
            found = states.load(flow_id)  # how it ended, from its record (a paused CrewAI flow returns its own type)
        if found is not None and found[1] == FLOW_PAUSED:
            asked = found[2].get("asked") or {}
            return {"state": PAUSED_STATE, "question": asked.get("question"), "method": asked.get("method"),
                    "error": None}  # fmt: skip
        if found is None or found[1] != FLOW_DONE:
            return _failed("FlowNotEnded", f"flow {flow_id[:80]!r} is {found[1] if found else 'not stored'}")
        return {"state": DONE, "error": None}

    def run_task(self, spec: JobSpec) -> dict[str, Any]:
        """A task job: the named function on its item; its result is the job's (a task must be safe to run twice:
        a worker that dies mid-task leaves it to run again)."""
        fn = self.tasks.get(spec.target)
        if fn is None:
            return _failed("UnknownTask", f"this worker has no task {spec.target!r}")
        try:
            with _policy(spec):
                result = fn(spec.item)
        except Exception as e:
            logger.warning("task %s failed: %s", spec.target, type(e).__name__, exc_info=True)
            return _failed(type(e).__name__, str(e))
        return {"state": DONE, "result": result, "error": None}


@contextlib.contextmanager
def _flow_lock(url: str, schema: str, flow_id: str) -> Iterator[None]:
    """Hold the database's advisory lock on `flow_id` (waiting for it): released when done, or when this process
    dies (its connection ends with it)."""
    digest = hashlib.blake2b(f"chatagent-flow\0{schema}\0{flow_id}".encode(), digest_size=8).digest()
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (int.from_bytes(digest, "big", signed=True),))
        yield


def _policy(spec: JobSpec) -> contextlib.AbstractContextManager[Trust]:
    """The job's run acts for its owner (`chatagent.run.trust`): their memories, flows, traces and approvals; a job a
    shared surface took (`chatagent serve`'s `/v1/jobs`) under that surface's rules (code only with approval), each
    under the URL policy of the surface it came from (remote clients' jobs reach public addresses only)."""
    egress = URLPolicy.allowing(spec.allow_hosts) if spec.public_only else None
    return acting_as(served(spec.owner, egress) if spec.shared else Trust(spec.owner, egress=egress))


def _failed(kind: str, message: str) -> dict[str, Any]:
    return {"state": FAILED_STATE, "error": {"type": kind, "message": message[:500]}}


def _error(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    kind, _, message = text.partition(": ")
    return {"type": kind, "message": message[:500]}


@contextlib.contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGTERM and SIGINT set `stop` (in the main thread; the previous handlers are restored afterwards)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


__all__ = ["QueueLimits", "Workers"]

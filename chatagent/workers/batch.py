"""Batch work on the worker pool: one function over many items, each item a job on a DBOS queue (so the queue's
concurrency and rate limits bound it), with progress as items end, results in the items' order, and what ended
kept when a worker dies (DBOS holds each item's outcome; the dead worker's items run again on another).

    pool = Pool(Jobs(url), user="alice", timeout=3600, progress=lambda done, total: print(done, total))
    squares = pool.map("square", [{"n": 1}, {"n": 2}])          # a task the workers registered (Workers(tasks=))
    report = evaluate(pool.task("answer"), dataset)             # each case a job; judged here
    outputs = crew.kickoff_for_each([{"topic": "rivers"}, {"topic": "lakes"}], pool=pool)   # CrewOutputs
    ingest_folder("manuals/", "ingest:manuals", pool)           # Workers(tasks={"ingest:manuals": ingest_into(b)})

`map` is the one fan-out: whatever runs per item (an evaluation case, a document, a crew) is a task or a turn
job. A batch has an id (`batch=`): submitting it again, after the submitter itself died, attaches to the jobs it
started instead of starting them twice. Without a pool, `ingest_folder` and `Crew.kickoff_for_each` run the same
work in this process, with the same results.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chatagent.agents.teams.crew import Crew, CrewOutput
from chatagent.errors import ChatAgentError
from chatagent.rag.chunking import chunk_document
from chatagent.rag.parsers import SUPPORTED_EXTENSIONS, parse_file
from chatagent.sessions import Session
from chatagent.workers.client import Jobs, JobStatus, JobTimeout, batch_ids
from chatagent.workers.jobs import DONE, JobSpec

if TYPE_CHECKING:
    from chatagent.rag.backends import RetrievalBackend  # numpy: ingestion's backends come with chatagent[rag]

Progress = Callable[[int, int], None]  # (items ended, items in all)
_POLL_S = 0.25


class BatchFailed(ChatAgentError, RuntimeError):
    """Some items of a batch failed: `results` holds every item's result (None for a failed one), `failures` the
    index and error of each failed item."""

    def __init__(self, results: list[Any], failures: list[tuple[int, dict[str, Any] | None]]) -> None:
        first = failures[0]
        super().__init__(f"{len(failures)} of {len(results)} items failed (item {first[0]}: {first[1]})")
        self.results, self.failures = results, failures


class Pool:
    """The workers seen as a pool for batch work: submitted through `jobs` as `user` (the owner of every job),
    to `queue` (the Jobs' default if None); `timeout` bounds a whole batch; `progress(done, total)` is told as
    items end."""

    def __init__(
        self, jobs: Jobs, *, user: str, queue: str | None = None, timeout: float = 3600.0,
        progress: Progress | None = None,
    ) -> None:  # fmt: skip
        self.jobs, self.user, self.queue, self.timeout, self.progress = jobs, user, queue, timeout, progress

    def map(self, task: str, items: Sequence[Any], *, batch: str | None = None) -> list[Any]:
        """`task` on each item, on the workers; the results in the items' order (BatchFailed if some failed)."""
        ids = batch_ids(batch, len(items))
        for job_id, item in zip(ids, items, strict=True):
            self.jobs.submit(JobSpec("task", task, self.user, item=item), job_id=job_id, queue=self.queue)
        ended = self._wait(ids)
        return _results(ended, lambda s: s.result)

    def task(self, task: str) -> Callable[[Any], Any]:
        """`task` as a function of one item that runs it on the workers and gives its result (BatchFailed if it
        failed): `evaluate(pool.task("answer"), dataset, concurrency=16)` runs each case on the workers, at most
        16 submitted at once and as many running as the queue allows, and judges them here."""

        def on_the_workers(item: Any) -> Any:
            job = self.jobs.task(task, item, user=self.user, queue=self.queue)
            return _results([job.wait(timeout=self.timeout, poll=_POLL_S)], lambda s: s.result)[0]

        on_the_workers.__name__ = task
        return on_the_workers

    def kickoff_for_each(self, crew: Crew, inputs: Sequence[dict[str, Any]], *, name: str | None = None,
                         batch: str | None = None) -> list[CrewOutput]:  # fmt: skip
        """`crew.kickoff(i)` for each of `inputs`, each a turn job of the crew's agent (registered in the workers
        as `name`, default `crew.name`) on a session of its own; the outputs in the inputs' order."""
        ids = batch_ids(batch, len(inputs))
        for job_id, given in zip(ids, inputs, strict=True):
            self.jobs.turn(name or crew.name, crew.start_messages(given), user=self.user, session_id=job_id,
                           job_id=job_id, queue=self.queue)  # fmt: skip
        ended = self._wait(ids)
        return _results(
            ended, lambda s: crew.output_of(Session(s.session_id, self.jobs.store, user=self.user).messages())
        )

    def _wait(self, ids: list[str]) -> list[JobStatus]:
        """The statuses of the jobs `ids` once each ended, telling `progress` as they do."""
        deadline = time.monotonic() + self.timeout
        ended: dict[str, JobStatus] = {}
        jobs = {i: job for i in ids if (job := self.jobs.get(i, user=self.user)) is not None}
        missing = [i for i in ids if i not in jobs]
        if missing:
            raise RuntimeError(f"the batch's job {missing[0]} is not this user's (another batch has its id)")
        told = -1
        while True:
            for i in [i for i in ids if i not in ended]:
                status = jobs[i].status()
                if status.ended:
                    ended[i] = status
            if self.progress is not None and len(ended) != told:
                told = len(ended)
                self.progress(told, len(ids))
            if len(ended) == len(ids):
                return [ended[i] for i in ids]
            if time.monotonic() > deadline:
                raise JobTimeout(f"{len(ids) - len(ended)} of {len(ids)} items did not end within {self.timeout:g} s "
                                 "(they go on; submit the batch again with its id to wait for them)")  # fmt: skip
            time.sleep(_POLL_S)


def _results(ended: list[JobStatus], value: Callable[[JobStatus], Any]) -> list[Any]:
    results: list[Any] = []
    failures: list[tuple[int, dict[str, Any] | None]] = []
    for k, status in enumerate(ended):
        if status.state == DONE:
            results.append(value(status))
        else:
            results.append(None)
            failures.append((k, status.error or {"type": status.state, "message": f"the item is {status.state}"}))
    if failures:
        raise BatchFailed(results, failures)
    return results


# ---- document ingestion -----------------------------------------------------------------------------------------


def ingest_into(backend: RetrievalBackend) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The task that ingests one document into `backend` (an item {'path': file, 'name': what it is cited as}):
    parsed, chunked, added (ids from the name and the chunk's content: a task run twice writes the same rows)."""

    def ingest(item: dict[str, Any]) -> dict[str, Any]:
        name = str(item["name"])
        chunks = chunk_document(parse_file(item["path"]), key=name)
        backend.add_texts([f"{name}#{c.id}" for c in chunks], [c.text for c in chunks], [name] * len(chunks))
        return {"name": name, "chunks": len(chunks)}

    return ingest


def documents(folder: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The documents under `folder` that chatagent can read, as ingestion items (sorted by their name)."""
    root = Path(folder)
    found = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower().lstrip(".") in SUPPORTED_EXTENSIONS)
    return [{"path": str(p), "name": p.relative_to(root).as_posix()} for p in found]


def ingest_folder(
    folder: str | os.PathLike[str], task: str | Callable[[dict[str, Any]], dict[str, Any]], pool: Pool | None = None,
    *, batch: str | None = None,
) -> list[dict[str, Any]]:  # fmt: skip
    """Ingest every document under `folder`: with a `pool`, each document a job of the workers' task `task` (a
    name they registered, `ingest_into(backend)`); without one, `task` (the function) in this process. What each
    document gave ({'name', 'chunks'}), in the documents' order."""
    items = documents(folder)
    if pool is None:
        if isinstance(task, str):
            raise TypeError("without a pool, give the ingestion function itself: ingest_into(backend)")
        return [task(item) for item in items]
    if not isinstance(task, str):
        raise TypeError("with a pool, name the workers' ingestion task (Workers(tasks={name: ingest_into(...)}))")
    return pool.map(task, items, batch=batch)


__all__ = ["BatchFailed", "Pool", "documents", "ingest_folder", "ingest_into"]

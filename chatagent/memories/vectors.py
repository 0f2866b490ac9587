"""Records waiting for their vectors: a queue kept in the store itself, which any process completes.

A record is stored at once, without a vector; its vector is made on the low-priority embedding thread
(`chatagent.rag.background`) and stored when ready. A record whose vector is not stored by the memory's embedder
(the process ended first, the embedding failed, its text changed, the embedder is another one) is still waiting:
the store is the queue (`MemoryStore.unembedded`). Whoever reads the user's memory next completes it: a recall
embeds a short backlog on the spot (at most INLINE records: what a turn or two stores) and queues a longer one on the
background thread; `wait_for_vectors` waits until nothing is left. One VectorQueue per (store, user, embedder) in a
process knows which records are being embedded, so none is embedded twice here at once.
"""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING

import numpy as np

from chatagent.rag.background import EmbeddingJob

if TYPE_CHECKING:
    from chatagent.memories.store import MemoryStore
    from chatagent.rag.embedders import Embedder

__all__ = ["INLINE", "RETRY_AFTER", "VectorQueue", "vector_queue"]

INLINE = 4  # records a recall embeds itself before answering; a longer backlog goes to the background thread
RETRY_AFTER = 60.0  # seconds before a recall tries again a record whose embedding failed


class VectorQueue:
    """The embedding of one user's records by one embedder in this process (see the module docstring)."""

    def __init__(self, store: MemoryStore, user: str, embedder: Embedder) -> None:
        self.store, self.user, self.embedder = store, user, embedder
        self._jobs: dict[str, tuple[str, EmbeddingJob]] = {}  # record id -> (its text, the job making its vector)
        self._failed: dict[str, float] = {}  # record id -> when the embedding of its vector failed
        self._lock = threading.Lock()

    def submit(self, waiting: list[tuple[str, str]], *, retry: bool = True) -> list[EmbeddingJob]:
        """Queue the vectors of `waiting` (id, text) on the background thread, but those being made already (and,
        unless `retry`, those whose embedding failed lately); the jobs that make all of them."""
        now = time.monotonic()
        jobs: dict[int, EmbeddingJob] = {}
        new: list[tuple[str, str]] = []
        with self._lock:
            self._forget_finished(now)
            for rid, text in waiting:
                found = self._jobs.get(rid)
                if found is not None and found[0] == text:
                    jobs[id(found[1])] = found[1]
                elif retry or now - self._failed.get(rid, -RETRY_AFTER) >= RETRY_AFTER:
                    new.append((rid, text))
            if new:
                job = self._job(new)
                jobs[id(job)] = job
                for rid, text in new:
                    self._jobs[rid] = (text, job)
        for job in jobs.values():
            job.start()
        return list(jobs.values())

    def _forget_finished(self, now: float) -> None:
        """Drop the finished jobs, noting when those that failed did (under the lock)."""
        for rid, (_, job) in list(self._jobs.items()):
            if job.ready.is_set():
                del self._jobs[rid]
                if job.error is not None:
                    self._failed[rid] = now
        for rid, when in list(self._failed.items()):
            if now - when >= RETRY_AFTER:
                del self._failed[rid]

    def catch_up(self, waiting: list[tuple[str, str]]) -> bool:
        """For a recall: embed the records of `waiting` on this thread when they are few (INLINE), else queue them;
        True when vectors were stored (the caller reads the index again)."""
        jobs = self.submit(waiting, retry=False)
        if not jobs or sum(job.total - job.done for job in jobs) > INLINE:
            return False
        for job in jobs:
            job.run_now()
        return any(job.ready.is_set() and job.error is None for job in jobs)

    def wait(self, timeout: float | None = None, *, here: bool = False) -> bool:
        """Until the store holds no record of the user waiting for a vector (embedded on this thread with `here`,
        else on the background thread); False on timeout or when an embedding failed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            waiting = self.store.unembedded(self.user, self.embedder.name)
            if not waiting:
                return True
            for job in self.submit(waiting):
                if here:
                    job.run_now()
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not job.wait(left) or job.error is not None:
                    return False
            # read the store again: a record stored meanwhile, or whose text changed, waits for a job of its own

    def _job(self, items: list[tuple[str, str]]) -> EmbeddingJob:
        store, user, name = self.store, self.user, self.embedder.name
        ids = [rid for rid, _ in items]

        def stored(vectors: np.ndarray) -> None:
            blobs = {rid: v.astype(np.float16).tobytes() for rid, v in zip(ids, vectors, strict=True)}
            store.set_vectors(user, name, blobs, dict(items))

        return EmbeddingJob(self.embedder, [text for _, text in items], on_ready=stored)


_queues: dict[tuple[int, str, str, str], VectorQueue] = {}
_queues_lock = threading.Lock()


def vector_queue(store: MemoryStore, user: str, embedder: Embedder) -> VectorQueue:
    """The VectorQueue of `user`'s records in `store` by `embedder` in this process (a forked child has its own)."""
    key = (os.getpid(), store.url, user, embedder.name)
    with _queues_lock:
        found = _queues.get(key)
        if found is None or found.embedder is not embedder:
            found = _queues[key] = VectorQueue(store, user, embedder)
        return found

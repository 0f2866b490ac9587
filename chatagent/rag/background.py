"""Embedding passages in the background, at low priority, so that no answer waits for it.

    job = EmbeddingJob(embedder, texts, cache)     # vectors found in the cache are taken at once
    job.start()                                    # the rest go to this process's embedding thread
    job.done, job.total, job.ready.is_set()        # progress; job.vectors once ready; job.error if it failed

One worker thread per process embeds the queued jobs in order, a few passages at a time, writing each batch to
the vector cache (so an interrupted job loses at most one batch). The thread runs at the lowest CPU priority
(nice 19; threads the embedding engine starts from it inherit that), so an answer being generated on the same
cores is slowed as little as the scheduler allows.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from chatagent.rag.embedders import Embedder
    from chatagent.rag.vector_cache import VectorCache

__all__ = ["BATCH", "EmbeddingJob"]

logger = logging.getLogger(__name__)

BATCH = 8  # passages per call: progress and the cache advance this often
LOW_PRIORITY = 19


class EmbeddingJob:
    """The vectors of `texts` by `embedder`: from `cache` where it has them, else embedded by the worker thread."""

    def __init__(
        self,
        embedder: Embedder,
        texts: Sequence[str],
        cache: VectorCache | None = None,
        on_ready: Callable[[np.ndarray], object] | None = None,
    ) -> None:
        self.embedder = embedder
        self.on_ready = on_ready  # given the vectors once all are computed (on the thread that finished them)
        self.texts = list(texts)
        self.cache = cache
        self.total = len(self.texts)
        self.done = 0
        self.error: str | None = None
        self.seconds = 0.0  # spent embedding
        self.ready = threading.Event()  # set when `vectors` is complete, or on failure (then `error` says why)
        self.vectors: np.ndarray | None = None
        self._rows: dict[int, np.ndarray] = {}
        self._started = False
        self._finished = False
        self._lock = threading.Lock()

    def start(self) -> EmbeddingJob:
        """Take what the cache has now; queue the rest for the worker thread (once)."""
        with self._lock:
            if self._started:
                return self
            self._started = True
        if self.cache is not None and self.texts:
            self._rows.update(self.cache.get_many(self.embedder.name, self.texts))
        self.done = len(self._rows)
        if self.done == self.total:
            self._finish()
        else:
            _submit(self)
        return self

    def run_now(self) -> None:
        """Embed what is missing on this thread, at its priority (benchmarks and callers that want to wait)."""
        self.start()
        self._embed_missing()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the vectors are ready (or the job failed); False if `timeout` seconds passed first."""
        return self.ready.wait(timeout)

    def _embed_missing(self) -> None:
        missing = [i for i in range(self.total) if i not in self._rows]
        try:
            for start in range(0, len(missing), BATCH):
                if self._finished:
                    return
                part = missing[start : start + BATCH]
                texts = [self.texts[i] for i in part]
                began = time.perf_counter()
                vectors = self.embedder.embed_passages(texts)
                self.seconds += time.perf_counter() - began
                if self.cache is not None:
                    self.cache.put_many(self.embedder.name, texts, vectors)
                with self._lock:
                    if self._finished:  # the other thread completed the job meanwhile
                        return
                    for i, v in zip(part, vectors, strict=True):
                        self._rows[i] = v
                    self.done = len(self._rows)
        except Exception as e:  # the job fails, retrieval stays on keywords; said once in the log and in .error
            self.error = f"{type(e).__name__}: {e}"
            logger.warning("embedding %d passages with %s failed: %s", self.total, self.embedder.name, self.error)
            self.ready.set()
            return
        self._finish()

    def _finish(self) -> None:
        with self._lock:  # once, whichever thread gets here first (the worker, or a caller of run_now)
            if self._finished:
                return
            self._finished = True
            if self.total:
                self.vectors = np.stack([self._rows[i] for i in range(self.total)]).astype(np.float32)
            self._rows = {}
        if self.on_ready is not None and self.vectors is not None:
            try:
                self.on_ready(self.vectors)
            except Exception as e:  # the vectors stay usable here; whoever wanted them stored says why not
                self.error = f"{type(e).__name__}: {e}"
                logger.warning("storing %d vectors of %s failed: %s", self.total, self.embedder.name, self.error)
        self.ready.set()


_queue: queue.Queue[EmbeddingJob] = queue.Queue()
_worker: threading.Thread | None = None
_worker_pid = 0
_worker_lock = threading.Lock()


def _submit(job: EmbeddingJob) -> None:
    global _worker, _worker_pid
    with _worker_lock:
        if _worker is None or not _worker.is_alive() or _worker_pid != os.getpid():  # a forked child starts its own
            _worker = threading.Thread(target=_work, name="chatagent-embedding", daemon=True)
            _worker_pid = os.getpid()
            _worker.start()
    _queue.put(job)


def _work() -> None:
    try:  # this thread only: on Linux a thread id names one thread for setpriority
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), LOW_PRIORITY)
    except (OSError, AttributeError) as e:
        logger.info("could not lower the embedding thread's priority: %s", e)
    while True:
        job = _queue.get()
        try:
            job._embed_missing()
        finally:
            _queue.task_done()

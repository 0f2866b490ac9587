"""Writing recorded traces: one thread that turns finished traces into JSON and writes them to their stores, off the
run's thread and event loop, in the order they ended (`chatagent.run.traces` hands them over)."""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import time
from typing import Any

import orjson

from chatagent.run.trace_body import encode, trace_body

logger = logging.getLogger("chatagent.traces")


class _Writer:
    """One thread that turns finished traces (`chatagent.run.traces.Trace`) into JSON and writes them, in the order
    they ended."""

    def __init__(self) -> None:
        self.queue: queue.SimpleQueue[tuple[Any, Any, float | None, str | None] | None] = queue.SimpleQueue()
        self.pending = 0
        self.idle = threading.Condition()
        self.thread: threading.Thread | None = None
        self.stores: dict[Any, Any] = {}

    def put(self, trace: Any, store: Any, duration: float | None, error: str | None) -> None:
        with self.idle:
            self.pending += 1
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._work, name="chatagent-traces", daemon=True)
                self.thread.start()
        self.queue.put((trace, store, duration, error))

    def flush(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.idle:
            while self.pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.idle.wait(left)
        return True

    def _work(self) -> None:
        while True:
            item = self.queue.get()
            if item is None:
                return
            trace, store, duration, error = item
            try:
                body = trace_body(trace, duration, error)
                blob = encode(body)
                if store is not False:
                    self.store(store).save(body, blob)
                if trace.done is not None:
                    trace.done(orjson.loads(blob))
            except Exception as e:  # a trace that cannot be written costs the trace, never the run
                logger.warning("trace %s of %r not recorded: %s: %s", trace.id, trace.name, type(e).__name__, e)
                if trace.done is not None:
                    trace.done(None)
            finally:
                with self.idle:
                    self.pending -= 1
                    self.idle.notify_all()

    def store(self, store: Any) -> Any:
        key = store if isinstance(store, (str, type(None))) else id(store)
        found = self.stores.get(key)
        if found is None:
            from chatagent.sessions.traces import TraceStore  # sqlite: on the first trace written

            found = self.stores[key] = TraceStore(store)
        return found


_writer = _Writer()


def writer() -> _Writer:
    return _writer


def trace_store(store: Any = None) -> Any:
    """The `chatagent.sessions.traces.TraceStore` of `store` (a URL or path; None: the default session store), one
    per store in the process (the session layer is loaded on first use)."""
    return _writer.store(store)


def flush_traces(timeout: float = 30.0) -> bool:
    """Wait until every finished trace is written (at most `timeout` seconds); False if some still are not."""
    return _writer.flush(timeout)


atexit.register(flush_traces, 10.0)


__all__ = ["flush_traces", "trace_store", "writer"]

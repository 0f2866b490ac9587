"""Which workers are alive, as PostgreSQL knows it: each holds a session-level advisory lock named after its DBOS
executor id on a connection of its own, which the server releases the moment that connection ends (the process
killed, its machine gone, the network cut). Every worker looks, now and then, at the executors that have
workflows in progress; one whose lock it can take is dead, and its workflows go to DBOS's recovery
(`DBOS._recover_pending_workflows`: back on their queue, for any worker to take, the same call DBOS's admin API
and its Conductor make). Holding that lock while it recovers keeps two workers from doing it at once.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
from typing import Any

import psycopg
from dbos import DBOS

logger = logging.getLogger("chatagent.workers")


def lock_key(schema: str, executor_id: str) -> int:
    """The advisory lock that says `executor_id` (of the DBOS tables in `schema`) is alive."""
    digest = hashlib.blake2b(f"chatagent-worker\0{schema}\0{executor_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class Liveness:
    """This worker's lock, and the thread that recovers the workflows of dead workers (see the module docstring)."""

    def __init__(self, url: str, schema: str, executor_id: str, interval: float = 1.0) -> None:
        self.url, self.schema, self.executor_id, self.interval = url, schema, executor_id, interval
        self._conn: Any = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="chatagent-liveness", daemon=True)
        self.recovered: list[str] = []  # the executors whose workflows this one handed to recovery

    def start(self) -> Liveness:
        self._hold()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(self.interval + 10)
        self._drop()

    def _hold(self) -> None:
        """(Re)open the lock connection and take this worker's own lock on it."""
        self._drop()
        self._conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10)
        self._conn.execute("SELECT pg_advisory_lock(%s)", (lock_key(self.schema, self.executor_id),))

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _watch(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                if self._conn is None or self._conn.closed or self._conn.broken:
                    self._hold()
                self.sweep()
            except Exception as e:  # the database away for a while: the next round tries again
                logger.warning("looking for dead workers failed: %s", e)
                self._drop()

    def sweep(self) -> list[str]:
        """Hand the workflows of every dead executor to DBOS's recovery; the executors found dead."""
        busy = {w.executor_id for w in DBOS.list_workflows(status="PENDING", load_input=False, load_output=False)}
        dead = []
        for executor in sorted(e for e in busy if e and e != self.executor_id):
            key = lock_key(self.schema, executor)
            taken = self._conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]
            if not taken:
                continue  # alive
            try:
                handles = DBOS._recover_pending_workflows([executor])  # pyright: ignore[reportPrivateUsage]
                logger.info("worker %s is gone: %d of its jobs go back to their queues", executor, len(handles))
                dead.append(executor)
            finally:
                self._conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
        self.recovered += dead
        return dead


__all__ = ["Liveness", "lock_key"]

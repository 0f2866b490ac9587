"""chatagent's logger, under Qwen-Agent's `qwen_agent.log` names.

Every chatagent module logs under `chatagent.*`; as a library it adds no handler of its own. Call
`setup_logger()` to see its records on stderr (DEBUG when CHATAGENT_DEBUG=1, else INFO).

`BackgroundHandler` writes lines to stderr from a thread of its own, so that logging never blocks a request: a
process whose stderr nobody reads (a pipe left undrained) keeps serving, its lines dropped and counted meanwhile.
The `chatagent` command and `setup_logger` log through it.
"""

from __future__ import annotations

import collections
import logging
import os
import sys
import threading
from typing import TextIO

logger = logging.getLogger("chatagent")

CAPACITY = 256 * 1024  # characters of lines waiting to be written before new lines are dropped


class BackgroundHandler(logging.Handler):
    """Formatted lines go to a queue of at most `capacity` characters and a writer thread writes them to `stream`
    (sys.stderr when None, as it is at write time). The logging thread never waits for the stream: when the queue
    is full (the stream is not read), a line is dropped and counted, and the count is written once the stream takes
    lines again. `close()` writes what is left, waiting at most `timeout` seconds for the stream."""

    def __init__(self, stream: TextIO | None = None, capacity: int = CAPACITY) -> None:
        super().__init__()
        self.stream = stream
        self.capacity = capacity
        self.dropped = 0  # lines dropped and not yet reported
        self._lines: collections.deque[str] = collections.deque()
        self._queued = 0  # characters in `_lines`
        self._wake = threading.Condition(threading.Lock())
        self._writer: threading.Thread | None = None
        self._writer_pid = 0
        self._writing = False  # the writer holds lines it has not finished writing
        self._closing = False

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:
            self.handleError(record)
            return
        with self._wake:
            if self._queued + len(line) > self.capacity:
                self.dropped += 1
                return
            self._lines.append(line)
            self._queued += len(line)
            if self._writer is None or self._writer_pid != os.getpid() or not self._writer.is_alive():
                self._writer = threading.Thread(target=self._write_loop, name="chatagent-log", daemon=True)
                self._writer_pid = os.getpid()  # a forked child starts its own writer
                self._writer.start()
            self._wake.notify_all()  # the writer (a `flush` may wait on the same condition)

    def _write_loop(self) -> None:
        while True:
            with self._wake:
                while not self._lines and not self.dropped and not self._closing:
                    self._wake.wait()
                if not self._lines and not self.dropped:
                    self._wake.notify_all()
                    return  # closing, and nothing left
                lines, dropped = list(self._lines), self.dropped
                self._lines.clear()
                self._queued = self.dropped = 0
                self._writing = True
            if dropped:
                lines.append(f"chatagent: {dropped} log lines were dropped: this process's stderr was not being read")
            try:
                stream = self.stream or sys.stderr
                stream.write("\n".join(lines) + "\n")
                stream.flush()
            except (OSError, ValueError):  # a closed stream: the lines have nowhere to go
                pass
            with self._wake:
                self._writing = False
                self._wake.notify_all()

    def flush(self, timeout: float = 2.0) -> None:
        """Wait (at most `timeout` seconds) until the lines logged so far are written."""
        with self._wake:
            if self._writer is None or not self._writer.is_alive():
                return
            self._wake.wait_for(lambda: not self._lines and not self._writing, timeout)

    def close(self, timeout: float = 2.0) -> None:
        self.flush(timeout)
        with self._wake:
            self._closing = True
            self._wake.notify_all()
        super().close()


class _Handler(BackgroundHandler):
    """The stderr handler `setup_logger` adds (told apart from others so that it is added once)."""


def setup_logger(level: int | None = None) -> logging.Logger:
    """Send chatagent's records to stderr at `level` (once: calling it again only changes the level)."""
    if level is None:
        level = (
            logging.DEBUG if os.environ.get("CHATAGENT_DEBUG", "").strip().lower() in ("1", "true") else logging.INFO
        )
    if not any(isinstance(h, _Handler) for h in logger.handlers):
        handler = _Handler()
        handler.setFormatter(logging.Formatter("%(asctime)s - %(name)s - %(levelname)s - %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(level)
    return logger


__all__ = ["BackgroundHandler", "logger", "setup_logger"]

"""The journal of a running turn on a SQLite store: its usual checkpoints appended to a file, not committed.

A turn's usual checkpoint (a model reply or a tool result completed while it runs) costs one `os.write` of a framed
record to a file beside the session's run lock (`<database>-locks/<lock name>.journal`, mode 0600), on a descriptor
the run keeps open while it holds the lock. A write to a regular file survives the death of the process (the page
cache keeps it), as a commit at SQLite's `synchronous=NORMAL` does, and a crash of the machine may lose the last
records alike. What changes the pending turn's state (its first checkpoint, a pause, a failure, its end) stays a
SQLite transaction, which folds the journal's records into the database; the journal is then removed.

A record is `length`, `CRC32` (little-endian, 4 bytes each) and an orjson body `[turn key, step, at, messages]`
(see `chatagent.sessions.pending`). Reading stops at the first record that is incomplete or does not match its CRC
(a process killed while writing it): what follows is never taken as data, and a writer that opens the journal again
cuts it there first. Records of another turn than the pending one (a journal left by a crash between a turn's
commit and the journal's removal) are ignored, and a new turn's writer starts the file anew.

A discard (or a clear) unlinks the journal: the writer sees it (`st_nlink` 0 after its write) and stops the run
with SessionConflictError, as a checkpoint whose turn is gone does on every store.
"""

from __future__ import annotations

import errno
import logging
import os
import struct
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

logger = logging.getLogger("chatagent.sessions")

_HEAD = struct.Struct("<II")  # body length, CRC32 of the body
#: a record as read: (turn key, step, at, messages)
Record = tuple[str, int, int, list[dict[str, Any]]]


def read(path: Path) -> tuple[list[Record], int, int]:
    """The valid records of the journal at `path` (none if there is no file), the offset where they end, and the
    file's size (more than that offset when the journal ends in a torn or damaged record)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return [], 0, 0
    return (*_records(data), len(data))


def _records(data: bytes) -> tuple[list[Record], int]:
    records: list[Record] = []
    end, size, head = 0, len(data), _HEAD.size
    while end + head <= size:
        length, crc = _HEAD.unpack_from(data, end)
        body = data[end + head : end + head + length]
        if len(body) != length or zlib.crc32(body) != crc:
            break
        try:
            key, step, at, messages = orjson.loads(body)
        except (orjson.JSONDecodeError, ValueError):
            break
        records.append((key, step, at, messages))
        end += head + length
    return records, end


def after(records: Sequence[Record], key: str, last: int) -> Iterator[Record]:
    """The records of the turn `key` whose steps follow `last` (the last step the database holds), in order: those
    of another turn, and those already folded into the database, are not its."""
    for record in records:
        if record[0] == key and record[1] > last:
            last = record[1]
            yield record


class Writer:
    """The journal of one turn, open for appending (see the module docstring): `append` writes a record and says
    whether the journal is still there (False: discarded)."""

    __slots__ = ("key", "fd", "_pack")

    def __init__(self, path: Path, key: str) -> None:
        """Open (or create) the journal at `path` for the turn `key`: a journal of another turn is started anew,
        one that ends in a torn record is cut after its last valid one."""
        self.key = key
        self._pack = _HEAD.pack
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0), 0o600)
        try:
            os.fchmod(self.fd, 0o600)  # private, whoever made the file
            with os.fdopen(os.dup(self.fd), "rb") as f:
                data = f.read()
            records, end = _records(data)
            if records and records[0][0] != key:
                os.ftruncate(self.fd, 0)
            elif end < len(data):
                logger.warning("a turn's journal ended in an incomplete record (a process died writing it): cut there")
                os.ftruncate(self.fd, end)
        except BaseException:
            os.close(self.fd)
            raise

    def append(self, step: int, at: int, messages: list[dict[str, Any]]) -> bool:
        body = orjson.dumps((self.key, step, at, messages))
        fd = self.fd
        record = self._pack(len(body), zlib.crc32(body)) + body
        written = os.write(fd, record)
        if written != len(record):  # the disk is full: the part written goes, so that records can follow it
            os.ftruncate(fd, os.lseek(fd, 0, os.SEEK_END) - written)
            raise OSError(errno.ENOSPC, f"only {written} of the record's {len(record)} bytes could be written")
        return os.fstat(fd).st_nlink != 0

    def close(self) -> None:
        os.close(self.fd)


def remove(path: Path) -> None:
    """Remove the journal at `path`, if there is one."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


__all__ = ["Record", "Writer", "read", "remove"]

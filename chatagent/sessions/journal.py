"""The journal of a running turn on a SQLite store: its usual checkpoints written to a file, not committed.

A turn's usual checkpoint (a model reply or a tool result completed while it runs) is a record copied into a file
beside the session's run lock (`<database>-locks/<lock name>.journal`, mode 0600), which the run keeps mapped
(`mmap`, shared) while it holds the lock: no system call, no lock, no transaction. What is copied into a shared
mapping is in the page cache at once, so it survives the death of the process (kill -9, OOM), as a commit at
SQLite's `synchronous=NORMAL` does, and a crash of the machine may lose the last records alike. The file's space
is written (with zeros) before it is mapped, so a full disk is an error when the journal grows, not a fault in the
middle of a copy. What changes the pending turn's state (its first checkpoint, a pause, a failure, its end) stays a
SQLite transaction, which folds the journal's records into the database; the journal is then removed.

The file: a header (`CAJ1`, a discarded flag, the turn's key), then records, then zeros. A record is `length`,
`CRC32` (little-endian, 4 bytes each) and an orjson body `[step, at, messages]` (see `chatagent.sessions.pending`).
Reading stops at the first record that is empty, incomplete or does not match its CRC (a process killed while
copying it): what follows is never taken as data, and a writer that opens the journal again cuts it there first.
A journal of another turn than the pending one (left by a crash between a turn's commit and the journal's removal)
is ignored, and the new turn's writer starts the file anew.

A discard (or a clear) sets the flag of its turn's journal and removes the file: the writer reads the flag after
each record (a byte of its mapping) and stops the run with SessionConflictError, as a checkpoint whose turn is gone
does on every store.

A journal is created with O_EXCL and opened with O_NOFOLLOW, and one that exists must be a regular file of this
user's that no one else can write (`chatagent.utils.workspace.check_private_file`, `UnsafePathError` otherwise),
so a file or a link another user planted is neither written to nor read from.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import struct
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from chatagent.utils.workspace import NOFOLLOW, check_private_file

try:
    import fcntl
except ImportError:  # pragma: no cover  (Windows: no journal; see chatagent.sessions.sqlite)
    fcntl = None

logger = logging.getLogger("chatagent.sessions")

_HEADER = struct.Struct("<4sB3x40s")  # magic, discarded (1) or not (0), the turn's key
_MAGIC, _FLAG = b"CAJ1", 4
_HEAD = struct.Struct("<II")  # a record's body length and CRC32
_SPACE = 1 << 14  # the journal's first size; it doubles as it fills
#: a record as read: (step, at, messages)
Record = tuple[int, int, list[dict[str, Any]]]


class Contents(NamedTuple):
    """What a journal holds: its turn's key (None: no journal, or a discarded one), its valid records, the offset
    where they end, and whether something other than zeros follows them (a torn or damaged record)."""

    key: str | None
    records: list[Record]
    end: int
    torn: bool


def read(path: Path) -> Contents:
    """The contents of the journal at `path` (UnsafePathError for a file that is not this user's own)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | NOFOLLOW)
    except FileNotFoundError:
        return Contents(None, [], 0, False)
    with os.fdopen(fd, "rb") as f:
        check_private_file(path, fd)
        return _parse(f.read())


def _parse(data: bytes) -> Contents:
    if len(data) < _HEADER.size:
        return Contents(None, [], 0, bool(data.strip(b"\0")))
    magic, discarded, key = _HEADER.unpack_from(data)
    if magic != _MAGIC or discarded:
        return Contents(None, [], 0, magic != _MAGIC)
    records: list[Record] = []
    end, size, head = _HEADER.size, len(data), _HEAD.size
    while end + head <= size:
        length, crc = _HEAD.unpack_from(data, end)
        body = data[end + head : end + head + length]
        if not length or len(body) != length or zlib.crc32(body) != crc:
            break
        try:
            step, at, messages = orjson.loads(body)
        except (orjson.JSONDecodeError, ValueError):
            break
        records.append((step, at, messages))
        end += head + length
    return Contents(key.rstrip(b"\0").decode("ascii", "replace"), records, end, bool(data[end:].strip(b"\0")))


def after(records: Sequence[Record], last: int) -> Iterator[Record]:
    """The records whose steps follow `last` (the last step the database holds), in order: those already folded
    into the database are not new."""
    for record in records:
        if record[0] > last:
            last = record[0]
            yield record


class Writer:
    """The journal of one turn, open for writing (see the module docstring): `append` copies a record into it and
    says whether the journal is still the turn's (False: discarded)."""

    __slots__ = ("key", "fd", "map", "end", "space")

    def __init__(self, path: Path, key: str) -> None:
        """Open (or create) the journal at `path` for the turn `key`: a journal of another turn (or a discarded
        one) is started anew, one that ends in a torn record is cut after its last valid one."""
        self.key = key
        if fcntl is None:  # pragma: no cover
            raise OSError(errno.ENOSYS, "no journal where flock is missing")
        while True:
            self.fd = _open(path)
            fcntl.flock(self.fd, fcntl.LOCK_EX)  # kept from a discard's look at the header (see `discard`)
            if os.fstat(self.fd).st_nlink:
                break
            os.close(self.fd)  # removed by a discard while we waited: open the file now at `path`
        try:
            check_private_file(path, self.fd)  # this user's, 0600 (not a file someone else left there)
            with os.fdopen(os.dup(self.fd), "rb") as f:
                found = _parse(f.read())
            self.end = found.end if found.key == key else _HEADER.size
            if found.key == key and found.torn:
                logger.warning("a turn's journal ended in an incomplete record (a process died writing it): cut there")
            os.ftruncate(self.fd, self.end)  # what follows the last valid record goes (zeros come back)
            self.space = _allocate(self.fd, self.end, self.end + 1)
            if found.key != key:
                os.pwrite(self.fd, _HEADER.pack(_MAGIC, 0, key.encode("ascii")), 0)
            self.map = mmap.mmap(self.fd, self.space)
        except BaseException:
            os.close(self.fd)  # (which unlocks it)
            raise
        fcntl.flock(self.fd, fcntl.LOCK_UN)

    def append(self, step: int, at: int, messages: list[dict[str, Any]]) -> bool:
        body = orjson.dumps((step, at, messages))
        end = self.end
        stop = end + 8 + len(body)
        if stop > self.space:
            self._grow(stop)
        m = self.map
        m[end + 8 : stop] = body
        _HEAD.pack_into(m, end, len(body), zlib.crc32(body))
        self.end = stop
        return not m[_FLAG]

    def _grow(self, needed: int) -> None:
        self.space = _allocate(self.fd, self.space, needed)
        self.map.close()
        self.map = mmap.mmap(self.fd, self.space)

    def close(self) -> None:
        self.map.close()
        os.close(self.fd)


def _open(path: Path) -> int:
    """The journal at `path` open for writing: made anew (O_EXCL), or the one there, never through a link."""
    flags = os.O_RDWR | os.O_CLOEXEC | NOFOLLOW
    try:
        return os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return os.open(path, flags)


def _allocate(fd: int, size: int, needed: int) -> int:
    """Make the file (of `size` bytes) at least `needed` bytes long, doubling; its new size. Zeros are written (the
    file system then holds the blocks) rather than reserved with fallocate, whose unwritten extents made a turn's
    journal cost ~60 times more on ext4 (3 ms against 0.05 ms, their conversion when the mapping is written)."""
    new = max(_SPACE, size)
    while new < needed:
        new *= 2
    if os.pwrite(fd, bytes(new - size), size) != new - size:
        os.ftruncate(fd, size)
        raise OSError(errno.ENOSPC, "the disk is full")
    return new


def discard(path: Path, key: str) -> None:
    """Mark the journal of the turn `key` discarded, and remove it (a journal of another turn is left alone)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | NOFOLLOW)
    except FileNotFoundError:
        return
    try:
        check_private_file(path, fd)
        if fcntl is not None:  # a writer opening it (and maybe starting it anew) does so before or after
            fcntl.flock(fd, fcntl.LOCK_EX)
        header = os.pread(fd, _HEADER.size, 0)
        if len(header) == _HEADER.size and _HEADER.unpack(header)[2].rstrip(b"\0") == key.encode("ascii"):
            os.pwrite(fd, b"\1", _FLAG)
            remove(path)
    finally:
        os.close(fd)


def remove(path: Path) -> None:
    """Remove the journal at `path`, if there is one."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


__all__ = ["Contents", "Record", "Writer", "after", "discard", "read", "remove"]

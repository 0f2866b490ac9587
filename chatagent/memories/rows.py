"""Recall's vectors by position, in blocks that are never copied to grow: a saved index's block is its file's.

    rows = Rows.of(saved)             # the vectors of a saved index (a copy-on-write map of its file)
    rows.grow(capacity)               # a new block of zeros (float32) for the positions beyond
    rows[at] = vector                 # one position's vector
    rows.take(positions)              # float32 rows of those positions: only their pages of the file are read
    rows.dot(vector, n)               # the cosine of each of positions 0..n-1

A new process's first recall above EXACT records (`chatagent.memories.recall`) reads the vectors of its candidates
and sample only: the saved file's block is read where it is used. It is float32 there too (made from float16 on each
use, the sample's vectors would cost a recall at 100k records more than its search). Growing adds a block: no
vector is copied.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

__all__ = ["Rows"]

MERGE_BELOW = 20_000  # rows (up to 30 MB): growing copies them into one block; above, it adds a block


class Rows:
    """Vectors of `dim` numbers for positions 0..len-1 (see the module docstring)."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.blocks: list[np.ndarray] = []  # float32, each (rows, dim)
        self.starts: list[int] = []  # the first position of each block
        self.size = 0

    @classmethod
    def of(cls, saved: np.ndarray) -> Rows:
        """The rows of a saved index, used where they are (its first block)."""
        rows = cls(int(saved.shape[1]))
        if len(saved):
            rows.blocks, rows.starts, rows.size = [saved], [0], len(saved)
        return rows

    def __len__(self) -> int:
        return self.size

    def grow(self, size: int) -> None:
        """Room for positions up to `size`: a block of zeros (which the system gives as pages are written), or
        up to MERGE_BELOW rows one block of them all (a search then takes one product, not one per block)."""
        if size <= self.size:
            return
        if size <= MERGE_BELOW:
            merged = np.zeros((size, self.dim), dtype=np.float32)
            for block, start in zip(self.blocks, self.starts, strict=True):
                merged[start : start + len(block)] = block
            self.blocks, self.starts = [merged], [0]
        else:
            self.blocks.append(np.zeros((size - self.size, self.dim), dtype=np.float32))
            self.starts.append(self.size)
        self.size = size

    def _find(self, at: int) -> int:
        for b in range(len(self.blocks) - 1, -1, -1):
            if at >= self.starts[b]:
                return b
        raise IndexError(at)

    def __setitem__(self, at: int, vector: np.ndarray) -> None:
        b = self._find(at)
        self.blocks[b][at - self.starts[b]] = vector  # a saved block's page is copied as it is written

    def take(self, positions: np.ndarray) -> np.ndarray:
        """The float32 vectors of `positions`."""
        positions = np.asarray(positions, dtype=np.int64)
        if len(self.blocks) == 1:
            return self.blocks[0][positions]
        out = np.empty((len(positions), self.dim), dtype=np.float32)
        for block, start in zip(self.blocks, self.starts, strict=True):
            inside = (positions >= start) & (positions < start + len(block))
            out[inside] = block[positions[inside] - start]
        return out

    def chunks(self, n: int) -> Iterator[tuple[int, np.ndarray]]:
        """(first position, rows) covering positions 0..n-1, block by block."""
        for block, start in zip(self.blocks, self.starts, strict=True):
            if start >= n:
                return
            yield start, block[: n - start]

    def dot(self, vector: np.ndarray, n: int) -> np.ndarray:
        """The dot product of `vector` with the rows of positions 0..n-1."""
        parts = [np.einsum("ij,j->i", block, vector) for _, block in self.chunks(n)]
        return parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)

"""What the loopback servers answer to embedding requests: a small real embedding of text, not a model.

`toy_vector(text)` hashes the text's character trigrams into 64 dimensions (then unit length): texts that share
pieces of words get close vectors, so a test can check that vectors come back in order and that a search on them
works, through the real wire formats of /v1/embeddings and DashScope's text-embedding API.
"""

from __future__ import annotations

import hashlib
import math

DIM = 64


def toy_vector(text: str, dim: int = DIM) -> list[float]:
    v = [0.0] * dim
    s = f"  {text.lower()}  "
    for i in range(len(s) - 2):
        h = int.from_bytes(hashlib.blake2b(s[i : i + 3].encode(), digest_size=4).digest(), "little")
        v[h % dim] += 1.0 if h & 1 << 31 else -1.0
    norm = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / norm for x in v]

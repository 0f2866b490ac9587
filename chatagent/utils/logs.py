"""What chatagent's logs may contain: model text only as a short quote.

logger.warning("the host answered %s, naming no participant", quote(answer))
"""

from __future__ import annotations

QUOTE_CHARS = 80


def quote(text: str, limit: int = QUOTE_CHARS) -> str:
    """`text` for a log line: its repr, cut to its first `limit` characters (saying how long it was)."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}… ({len(text)} chars)"

"""Who holds the MCP sessions of `serve --mcp`, and how many each may hold.

The MCP SDK keeps at most `max_sessions` (10,000) stateful sessions for the whole server and answers 503 past it:
alone, one principal opening sessions it never uses (an `initialize` each, dozens a second) would shut every other
one out. So each session is recorded with the principal that opened it (another principal's requests for it are
answered as for an unknown one), a principal may hold at most `per_principal` open sessions (then 429), and a
session that has not listed or called a tool within `unused_timeout` seconds of opening is closed when the next
one is opened. Without API keys every client is the same principal: the limit then holds per client address.
"""

from __future__ import annotations

import time
from typing import Any

from chatagent.server.identity import ANONYMOUS

DEFAULT_PER_PRINCIPAL = 32
DEFAULT_UNUSED_TIMEOUT = 60.0


class SessionQuota:
    """The open MCP sessions: each one's principal, when it opened, whether it was used."""

    def __init__(self, per_principal: int = DEFAULT_PER_PRINCIPAL, unused_timeout: float = DEFAULT_UNUSED_TIMEOUT):
        if per_principal <= 0 or not unused_timeout > 0:
            raise ValueError("an MCP session quota needs a positive number of sessions and a positive timeout")
        self.per_principal = per_principal
        self.unused_timeout = unused_timeout
        self._owners: dict[str, str] = {}  # session id -> its principal
        self._holders: dict[str, str] = {}  # session id -> whom it counts against (the principal, or its address)
        self._opened: dict[str, float] = {}  # session id -> when, for those not used yet

    def owner(self, sid: str) -> str | None:
        return self._owners.get(sid)

    def opened(self, sid: str, principal: str, holder: str) -> None:
        self._owners[sid], self._holders[sid], self._opened[sid] = principal, holder, time.monotonic()

    def used(self, sid: str) -> None:
        """The session listed or called a tool: it lives as long as the SDK keeps it (its idle timeout)."""
        self._opened.pop(sid, None)

    def closed(self, sid: str) -> None:
        for held in (self._owners, self._holders, self._opened):
            held.pop(sid, None)

    def unused(self) -> list[str]:
        """The sessions opened more than `unused_timeout` seconds ago and never used: to be closed."""
        now = time.monotonic()
        return [sid for sid, at in self._opened.items() if now - at >= self.unused_timeout]

    def full(self, holder: str, live: Any) -> bool:
        """Whether `holder` holds as many open sessions as it may (`live`: the SDK's open session ids; the others,
        ended by the SDK, are forgotten first)."""
        for gone in [sid for sid in self._owners if sid not in live]:
            self.closed(gone)
        return sum(1 for h in self._holders.values() if h == holder) >= self.per_principal


def holder_of(principal: str, scope: dict) -> str:
    """Whom a request's sessions count against: its principal, or without keys its client's address."""
    if principal != ANONYMOUS:
        return principal
    client = scope.get("client") or ("?", 0)
    return f"{ANONYMOUS}@{client[0]}"


__all__ = ["DEFAULT_PER_PRINCIPAL", "DEFAULT_UNUSED_TIMEOUT", "SessionQuota", "holder_of"]

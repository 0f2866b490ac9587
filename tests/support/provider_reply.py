"""The scripted reply the native providers' loopback servers share (anthropic_server.py, gemini_server.py,
bedrock_server.py, responses_server.py): what the model says, and how the server misbehaves.

    Reply(text='Hi', chunks=['H', 'i'])                       # the text, in these events (else chunk_size=4)
    Reply(thinking='hmm...', text='42')                       # reasoning first (each protocol's own form)
    Reply(tool_calls=[('get_weather', {'city': 'Paris'})])    # calls; arguments streamed chunk_size at a time
    Reply(stop='max_tokens')                                  # the provider's own stop reason
    Reply(usage={...})                                        # the usage object as sent (else counted)
    Reply(status=429, headers={'Retry-After': '0.1'})         # an HTTP error, in the provider's error body
    Reply(status=400, error='prompt is too long: 300000 tokens > 200000 maximum')
    Reply(text=..., drop_after=2)                             # close the connection after 2 events
    Reply(text=..., end_after=2)                              # end the body cleanly after 2 events, no end event
    Reply(text=..., error_after=2, error_type='overloaded_error')   # an error event after 2 events
    Reply(text=..., interval=0.01)                            # wait between events
    Reply(text='x', repeat=True)                              # served for every request from now on

A queued str is `Reply(text=...)`; a callable `request -> Reply | str` is called with the request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from tests.support.loopback import ScriptedText


@dataclass
class Reply(ScriptedText):
    """One scripted answer (see the module docstring)."""

    text: str = ""
    chunks: list[str] | None = None
    chunk_size: int = 4
    thinking: str = ""
    tool_calls: list[tuple[str, dict | str]] = field(default_factory=list)
    stop: str | None = None
    usage: dict | None = None
    # faults
    status: int = 200
    error: str | None = None
    error_type: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    interval: float = 0.0
    drop_after: int | None = None
    end_after: int | None = None
    error_after: int | None = None
    repeat: bool = False
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def argument_chunks(self, args: str) -> list[str]:
        n = self.chunk_size
        return [args[i : i + n] for i in range(0, len(args), n)] or [""]

    def call_objects(self) -> list[tuple[str, str, dict]]:
        """(id, name, arguments as an object) of each call."""
        return [(cid, name, json.loads(args) if args.strip() else {}) for cid, name, args in self.calls()]


def tokens(value: object) -> int:
    """A loopback server's token count of anything it received or sends: a JSON character count / 4."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return len(text) // 4 + 1 if text else 0

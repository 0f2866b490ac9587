"""One model call as the layers between `chat()` and a backend hand it on: what is asked (`ModelRequest`, with the
`Usage` it is counted in) and what those layers need of the model that answers it (`Backend`).

`BaseChatModel.chat()` makes the request; `chatagent.llm.routing` decides where it goes, and prompt-based function
calling (`chatagent.llm.fncall_prompt`) rewrites it. Each takes `(backend, request)` and hands on a new request
(`request.replace(...)`): nothing is changed in place. A backend itself still receives its arguments one by one
(`_chat_stream(messages, functions, cfg, usage, *, tool_choice=...)`), so custom backends need not know this type.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, Final, Protocol

from chatagent.llm.settings import Settings
from chatagent.schema import Message
from chatagent.schema.fragment import Fragment

logger = logging.getLogger("chatagent.llm")

#: The most tokens one call may be reported to use; a server reporting more (or a negative count, or no integer) is
#: not believed: the call's usage is estimated instead (`reported_tokens`).
MAX_REPORTED_TOKENS = 10_000_000


def reported_tokens(model: str, prompt: Any, completion: Any) -> tuple[int, int] | None:
    """A model server's report of one call's tokens, if it can be believed: two integers from 0 to
    `MAX_REPORTED_TOKENS` (a JSON number like 12.0 counts). None (logged) for anything else (negative, absurd, not a
    number): the caller estimates the usage then, so that a server cannot make costs negative or huge."""
    counts = (_count(prompt), _count(completion))
    if counts[0] is None or counts[1] is None:
        logger.warning("%s reported a usage that cannot be right (prompt %.40r, completion %.40r tokens): estimated "
                       "instead", model, prompt, completion)  # fmt: skip
        return None
    return counts[0], counts[1]


def _count(value: Any) -> int | None:
    if value is None:
        return 0
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_REPORTED_TOKENS:
        return None
    return value


@dataclass
class Usage:
    """Tokens used, summed over every model call it was passed to; `cost` (US dollars) sums the calls whose
    model's prices are known (`chatagent.llm.prices`), None while none was."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    cost: float | None = None

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, prompt_tokens: int = 0, completion_tokens: int = 0, cost: float | None = None) -> None:
        self.prompt_tokens += prompt_tokens or 0
        self.completion_tokens += completion_tokens or 0
        if cost is not None:
            self.cost = (self.cost or 0.0) + cost

    def merge(self, other: Usage) -> None:
        """Add what `other` counted (its calls too)."""
        self.add(other.prompt_tokens, other.completion_tokens, other.cost)
        self.calls += other.calls


@dataclass(slots=True)
class ModelRequest:
    """One call to a model: the checked messages, the function schemas (None: no tools), the backend's own cfg
    (generate_cfg less the framework's keys), the framework's `settings` for the call, the `usage` it is counted
    in, and whether the reply streams. Never changed in place (`settings` neither): `replace` makes the next one."""

    # Final: read-only to the type checker, at no cost per call (a frozen dataclass's __init__ costs about 1 us more)
    messages: Final[list[Message]]
    functions: Final[list[dict[str, Any]] | None]
    cfg: Final[dict[str, Any]]
    settings: Final[Settings]
    usage: Final[Usage | None] = None
    stream: Final[bool] = True

    def replace(self, **changes: Any) -> ModelRequest:
        """This request with `changes` (field names as keywords; another name is a TypeError)."""
        return dataclasses.replace(self, **changes)


class Backend(Protocol):
    """What routing and prompt-based function calling need of a model (`BaseChatModel` has it): its name, whether
    its server takes native tools (set False for good once the server turns out to reject them), and its own reply
    to a request, with the retry and deadline rules and nothing else (no cache, no routing, no parsing)."""

    model: str
    native_tools: bool

    def backend_reply(self, request: ModelRequest) -> Iterator[list[Fragment]]: ...

    def abackend_reply(self, request: ModelRequest) -> AsyncIterator[list[Fragment]]: ...


__all__ = ["MAX_REPORTED_TOKENS", "Backend", "ModelRequest", "Usage", "reported_tokens"]

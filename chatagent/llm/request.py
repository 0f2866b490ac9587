"""One model call as the layers between `chat()` and a backend hand it on: what is asked (`ModelRequest`, with the
`Usage` it is counted in), what those layers need of the model that answers it (`Backend`), and how the reply is
read (`ReplyPlan`).

`BaseChatModel.chat()` makes the request; `chatagent.llm.routing` plans where it goes (`plan`), and prompt-based
function calling (`chatagent.llm.fncall_prompt`) rewrites it. Each takes `(backend, request)` and hands on a new
request (`request.replace(...)`): nothing is changed in place. The plan is carried out once for both sides,
`reply(SYNC)` in the calling thread, `reply(ASYNC)` on an event loop (`Reading`: its reply filters pumped by
`ReplyFilter.run` or `arun`). A backend itself still receives its arguments one by one (`_chat_stream(messages, functions, cfg, usage, *,
tool_choice=...)`), so custom backends need not know these types.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Generic, Protocol, TypeVar

from chatagent.errors import ModelServiceError
from chatagent.llm.pumps import Failed, Plan, ReplyFilter, aplayed, first_answer, played
from chatagent.llm.settings import Settings
from chatagent.llm.stream_modes import aas_fragments, placed
from chatagent.schema import Message
from chatagent.schema.fragment import Fragment

if TYPE_CHECKING:
    from chatagent.llm.cache import ResponseCache

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
    model's prices are known (`chatagent.llm.prices`), None while none was.

    `prompt_tokens` counts every input token, those a provider's prompt cache served (`cache_read_tokens`) and
    wrote (`cache_write_tokens`) included: both are parts of it, priced at the cache's rates."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    cost: float | None = None
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(
        self,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        cost: float | None = None,
        *,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> None:
        self.prompt_tokens += prompt_tokens or 0
        self.completion_tokens += completion_tokens or 0
        self.cache_read_tokens += cache_read_tokens or 0
        self.cache_write_tokens += cache_write_tokens or 0
        if cost is not None:
            self.cost = (self.cost or 0.0) + cost

    def merge(self, other: Usage) -> None:
        """Add what `other` counted (its calls too)."""
        self.add(
            other.prompt_tokens, other.completion_tokens, other.cost,
            cache_read_tokens=other.cache_read_tokens, cache_write_tokens=other.cache_write_tokens,
        )  # fmt: skip
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


#: the stream a reply is read as: in the calling thread or on the event loop (see `Reading`)
ReplyStream = TypeVar("ReplyStream", Iterator[list[Fragment]], AsyncIterator[list[Fragment]])


class Reading(Generic[ReplyStream]):
    """How a model call's reply is read: `SYNC` in the calling thread (`chat()`), `ASYNC` on the running event loop
    (`achat()`), as `chatagent.run.start`'s `Driving` pair drives a run. Each member is one side of a sync/async pair
    the layers share, so that each layer is written once: a backend's stream (`stream(model)`, its `_chat_stream` or
    `_achat_stream`) and whole answer (`once(model)`, as fragments), a reply filter's pump, and a plan's
    (`chatagent.llm.pumps`: the retries, the response cache, streams tried in turn)."""

    __slots__ = ("on_loop", "stream", "once", "filtered", "played")

    def __init__(
        self, on_loop: bool, stream: Callable[[Any], Callable[..., ReplyStream]], once: Callable[[Any], Callable[..., ReplyStream]],
        filtered: Callable[[ReplyFilter, ReplyStream], ReplyStream], played: Callable[[Plan], ReplyStream],
    ) -> None:  # fmt: skip
        self.on_loop = on_loop
        self.stream, self.once, self.filtered, self.played = stream, once, filtered, played


class Backend(Protocol):
    """What routing and prompt-based function calling need of a model (`BaseChatModel` has it): its name, whether
    its server takes native tools (set False for good once the server turns out to reject them), and its own reply
    to a request, read as `io` says, with the retry and deadline rules and nothing else (no cache, no routing, no
    parsing)."""

    model: str
    native_tools: bool

    def backend_reply(self, request: ModelRequest, io: Reading[ReplyStream]) -> ReplyStream: ...


class ReplyPlan(ReplyFilter):
    """How one model call is answered (`chatagent.llm.routing.plan` makes it): `request` is what `backend` is asked;
    its reply is read through `filters` in turn (the plan is itself the filter that chains them); `fallback`, given
    the error of a server that turned the request down, returns the plan to answer by instead, or raises the error;
    `cache` holds the response cache, the key, and the plan that answers when the cache does not."""

    __slots__ = ("backend", "request", "filters", "fallback", "cache")

    def __init__(
        self, backend: Backend, request: ModelRequest, filters: Sequence[ReplyFilter] = (),
        fallback: Callable[[ModelServiceError], ReplyPlan] | None = None,
        cache: tuple[ResponseCache, str, Callable[[], ReplyPlan]] | None = None,
    ) -> None:  # fmt: skip
        self.backend, self.request, self.filters, self.fallback, self.cache = backend, request, filters, fallback, cache

    def push(self, fragments: list[Fragment]) -> list[Fragment]:
        for f in self.filters:
            fragments = f.push(fragments)
            if not fragments:
                break
        return fragments

    def end(self) -> list[Fragment]:
        out: list[Fragment] = []
        for f in self.filters:  # what one filter still held goes through those after it
            out = (f.push(out) if out else out) + f.end()
        return out

    def reply(self, io: Reading[ReplyStream]) -> ReplyStream:
        """The reply's fragments, read as `io` says (`SYNC`: in this thread; `ASYNC`: on the event loop, the response
        cache read and written in worker threads)."""
        if self.cache is not None:
            store, key, answer = self.cache
            return io.played(_cache().recording(store, key, lambda: answer().reply(io)))
        if self.fallback is not None:
            return io.played(first_answer(lambda: io.filtered(self, self.backend.backend_reply(self.request, io)),
                                          self._falling_back(self.fallback, io)))  # fmt: skip
        stream = self.backend.backend_reply(self.request, io)
        return io.filtered(self, stream) if self.filters else stream  # (returned, not wrapped: one layer less a chunk)

    @staticmethod
    def _falling_back(
        fallback: Callable[[ModelServiceError], ReplyPlan], io: Reading[ReplyStream]
    ) -> Failed[ReplyStream]:
        """After the backend's error: the reply of the plan `fallback` gives instead (its own error is raised)."""
        tried: list[ModelServiceError] = []

        def failed(e: ModelServiceError, sent: bool) -> Callable[[], ReplyStream]:
            if tried:
                raise e
            tried.append(e)
            instead = fallback(e)
            return lambda: instead.reply(io)

        return failed


def _cache() -> Any:
    from chatagent.llm import cache  # sqlite: with a response cache only

    return cache


#: `chat()`: the reply read in the calling thread
SYNC: Reading[Iterator[list[Fragment]]] = Reading(
    False, lambda model: model._chat_stream, lambda model: lambda *a, **k: iter((placed(model._chat_once(*a, **k)),)),
    ReplyFilter.run, played,
)  # fmt: skip
#: `achat()`: the reply read on the running event loop
ASYNC: Reading[AsyncIterator[list[Fragment]]] = Reading(
    True, lambda model: model._achat_stream, lambda model: lambda *a, **k: aas_fragments(model._achat_once(*a, **k)),
    ReplyFilter.arun, aplayed,
)  # fmt: skip


__all__ = [
    "ASYNC",
    "MAX_REPORTED_TOKENS",
    "SYNC",
    "Backend",
    "ModelRequest",
    "Reading",
    "ReplyPlan",
    "Usage",
    "reported_tokens",
]

"""Retries with backoff for model calls: a failed attempt is tried again (transient failures only, before anything
was yielded), waits capped by `max_retry_wait` and by the run's deadline.

Retries share a budget per backend (`RetryBudget`: every request earns a fifth of a retry, the budget refills by
a few retries a second, a retry spends one), so that a burst of failing requests (a thousand runs started at once
against a server that cannot take them) does not multiply itself by `max_retries`: once the budget is spent, a
failure is raised at once. In a burst (past a few retry warnings a second per backend, other requests to it in
flight) a warning is held back, and the next one logged says how many it stands for."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence

from chatagent.errors import ModelServiceError, RunDeadlineExceeded
from chatagent.llm.pacing import Pace
from chatagent.llm.pumps import Give, Plan, Relay, Sleep
from chatagent.llm.settings import Settings
from chatagent.schema import ASSISTANT, Message
from chatagent.schema.fragment import STREAMING_CALL, Fragment, typed

logger = logging.getLogger("chatagent.llm")
LOG_BURST, LOG_PER_SECOND = 5.0, 1.0  # retry warnings per backend: a few at once, then one a second


class RetryBudget:
    """The retries one backend may make: `reserve` at first and at most, refilled by `per_second`, and by `ratio`
    of a retry for every request made; each retry spends one (thread-safe, shared by the event loops)."""

    __slots__ = (
        "reserve", "per_second", "ratio", "in_flight", "_balance", "_at", "_lock", "_log_tokens", "_logged_at", "_held",
    )  # fmt: skip

    def __init__(self, reserve: float = 20.0, per_second: float = 10.0, ratio: float = 0.2) -> None:
        self.reserve, self.per_second, self.ratio = reserve, per_second, ratio
        self.in_flight = 0  # requests being made now (retries included)
        self._balance = reserve
        self._at = time.monotonic()
        self._lock = threading.Lock()
        self._log_tokens, self._logged_at = LOG_BURST, self._at  # the warnings' own budget
        self._held = 0  # warnings held since the last one logged

    def _refill(self, now: float) -> None:
        self._balance = min(self.reserve, self._balance + (now - self._at) * self.per_second)
        self._at = now

    def requested(self) -> None:
        """A request was made (a first try): it earns `ratio` of a retry. `finished()` says when it is over."""
        with self._lock:
            self.in_flight += 1
            self._refill(time.monotonic())
            self._balance = min(self.reserve, self._balance + self.ratio)

    def finished(self) -> None:
        """A request (and its retries) is over."""
        with self._lock:
            self.in_flight -= 1

    def spend(self) -> bool:
        """Take one retry; False when the budget is spent."""
        with self._lock:
            self._refill(time.monotonic())
            if self._balance < 1.0:
                return False
            self._balance -= 1.0
            return True

    def should_log(self) -> int:
        """0 if a retry warning now is held back (in a burst: other requests in flight, and more than a few warnings
        a second); else how many it stands for (the ones held since the last, and itself)."""
        with self._lock:
            now = time.monotonic()
            self._log_tokens = min(LOG_BURST, self._log_tokens + (now - self._logged_at) * LOG_PER_SECOND)
            self._logged_at = now
            if self._log_tokens < 1.0 and self.in_flight > 1:
                self._held += 1
                return 0
            self._log_tokens = max(0.0, self._log_tokens - 1.0)
            count, self._held = self._held + 1, 0
            return count


_budgets: dict[str, RetryBudget] = {}
_budgets_lock = threading.Lock()


def budget_of(backend: str) -> RetryBudget:
    """The process's retry budget of `backend` (a server: its type and URL)."""
    found = _budgets.get(backend)
    if found is None:
        with _budgets_lock:
            found = _budgets.setdefault(backend, RetryBudget())
    return found


class Shown:
    """What the tries of one call showed, and what a retry may take back: only a call's arguments as they stream (a
    call is acted on only once complete). The retry's first fragment at each place shown before replaces it, and a
    place the retry does not reach becomes an empty message; anything else shown (text, a complete call) means no
    retry, as ever."""

    __slots__ = ("places", "final", "again")

    def __init__(self) -> None:
        self.places: set[int] = set()  # where streaming arguments were shown
        self.final = False  # something a retry cannot take back was shown
        self.again: set[int] = set()  # in a retry: the places shown before it has not reached yet

    def see(self, given: Sequence[Message]) -> list[Fragment]:
        """A try's fragments as shown (typed: backends may still mark them the older way)."""
        fragments = typed(given)
        if self.final and not self.again:  # the usual case after the first text: nothing to take back
            return fragments
        for f in fragments:
            if f.index in self.again:
                self.again.discard(f.index)
                f.replace = True  # (fragments are single-use)
            extra = f.extra
            if extra and STREAMING_CALL in extra and not (f.content or f.reasoning_content or f.function_call):
                self.places.add(f.index)
            else:
                self.final = True
        return fragments

    def retry(self) -> None:
        self.again = set(self.places)

    def rest(self) -> list[Fragment]:
        """After the retry's last fragment: the places it did not reach, emptied."""
        left, self.again = sorted(self.again), set()
        return [Fragment.unchecked(ASSISTANT, "", index=i, replace=True) for i in left]


def retrying(
    attempt: Callable[[], Iterable[Sequence[Message]] | AsyncIterator[Sequence[Message]]],
    settings: Settings,
    model: str,
    api_key: str | None,
    pace: Pace | None = None,
    budget: RetryBudget | None = None,
) -> Plan:
    """Run `attempt` (a plan: `played` in the calling thread, `aplayed` on the event loop), retrying transient
    failures that happen before anything was yielded.

    A stream that breaks after content was yielded is not replayed (the caller would see the
    start twice): it raises ModelServiceError with `partial=True`; one that showed only a call's arguments as they
    streamed is (see `Shown`). With `settings.deadline`, a failure
    after the deadline raises RunDeadlineExceeded, and no retry waits past the deadline. `model` names the
    model in the log; `api_key` is scrubbed from the error's text. With `pace`, each try waits for its slot.
    Retries spend `budget` (the backend's; without one, this call's own).
    """
    budget = budget or RetryBudget()
    budget.requested()
    tries = 0
    shown = Shown()
    try:
        while True:
            if pace is not None:
                slot = pace.take(settings.deadline)
                if slot > 0:
                    yield Sleep(slot)
            try:
                yield Relay(attempt, each=shown.see)
                rest = shown.rest()
                if rest:
                    yield Give((rest,))
                return
            except ModelServiceError as e:
                e.partial = e.partial or bool(shown.places)  # (kept only if it is raised)
                wait = retry_wait(e, tries, settings, shown.final, model, api_key, budget)
            tries += 1
            shown.retry()
            yield Sleep(wait)
    finally:
        budget.finished()


def retry_wait(
    e: ModelServiceError,
    tries: int,
    settings: Settings,
    yielded: bool,
    model: str,
    api_key: str | None,
    budget: RetryBudget,
) -> float:
    """After failure `e` of try number `tries`: how long to wait before the next try, or raise what the
    caller must raise instead."""
    e.scrubbed(api_key)
    deadline = settings.deadline
    if deadline is not None and time.monotonic() >= deadline:
        raise RunDeadlineExceeded(f"the run went past its deadline waiting for the model ({e})") from e
    if yielded:
        e.partial = True
        raise e
    if not e.retryable or tries >= settings.max_retries:
        raise e
    wait = backoff(tries, settings.retry_delay, e.retry_after, settings.max_retry_wait)
    if deadline is not None and time.monotonic() + wait >= deadline:
        logger.warning("%s: %s; not retried: waiting %.2fs would pass the run's deadline", model, e, wait)
        raise e
    if not budget.spend():
        count = budget.should_log()
        if count:
            logger.warning(
                "%s: %s; not retried: the server's retry budget is spent (%d such failures)", model, e, count
            )
        raise e
    count = budget.should_log()
    if count == 1:
        logger.warning("%s: %s; retry %d/%d in %.2fs", model, e, tries + 1, settings.max_retries, wait)
    elif count:
        logger.warning("%s: %s; retry %d/%d in %.2fs (%d retries since the last warning)",
                       model, e, tries + 1, settings.max_retries, wait, count)  # fmt: skip
    return wait


def backoff(tries: int, base: float, retry_after: float | None, cap: float) -> float:
    """Exponential backoff with jitter (between half and all of `base * 2**tries`, so that requests failing
    together retry apart); the server's Retry-After wins when it gave one."""
    if retry_after is not None:
        return min(max(retry_after, 0.0), cap)
    return min(cap, base * (2**tries)) * (0.5 + random.random() / 2)

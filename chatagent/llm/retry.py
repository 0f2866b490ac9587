"""Retries with backoff for model calls: a failed attempt is tried again (transient failures only, before anything
was yielded), waits capped by `max_retry_wait` and by the run's deadline."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence

from chatagent.errors import ModelServiceError, RunDeadlineExceeded
from chatagent.llm.pacing import Pace
from chatagent.llm.settings import Settings
from chatagent.llm.stream_modes import closing_stream
from chatagent.schema import Message
from chatagent.schema.fragment import Fragment, typed

logger = logging.getLogger("chatagent.llm")


def retrying(
    attempt: Callable[[], Iterable[Sequence[Message]]],
    settings: Settings,
    model: str,
    api_key: str | None,
    pace: Pace | None = None,
) -> Iterator[list[Fragment]]:
    """Run `attempt`, retrying transient failures that happen before anything was yielded.

    A stream that breaks after content was yielded is not replayed (the caller would see the
    start twice): it raises ModelServiceError with `partial=True`. With `settings.deadline`, a failure
    after the deadline raises RunDeadlineExceeded, and no retry waits past the deadline. `model` names the
    model in the log; `api_key` is scrubbed from the error's text. With `pace`, each try waits for its slot.
    """
    tries = 0
    while True:
        yielded = False
        if pace is not None:
            pace.wait(settings.deadline)
        try:
            for fragments in attempt():
                yielded = True
                yield typed(fragments)  # (a check per fragment: backends may still mark them the older way)
            return
        except ModelServiceError as e:
            wait = retry_wait(e, tries, settings, yielded, model, api_key)
        tries += 1
        time.sleep(wait)


async def aretrying(
    attempt: Callable[[], AsyncIterator[Sequence[Message]]],
    settings: Settings,
    model: str,
    api_key: str | None,
    pace: Pace | None = None,
) -> AsyncIterator[list[Fragment]]:
    """`retrying` for asyncio (the same rules)."""
    tries = 0
    while True:
        yielded = False
        if pace is not None:
            await pace.await_turn(settings.deadline)
        try:
            async with closing_stream(attempt()) as stream:
                async for fragments in stream:
                    yielded = True
                    yield typed(fragments)
            return
        except ModelServiceError as e:
            wait = retry_wait(e, tries, settings, yielded, model, api_key)
        tries += 1
        await asyncio.sleep(wait)


def retry_wait(
    e: ModelServiceError, tries: int, settings: Settings, yielded: bool, model: str, api_key: str | None
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
    logger.warning("%s: %s; retry %d/%d in %.2fs", model, e, tries + 1, settings.max_retries, wait)
    return wait


def backoff(tries: int, base: float, retry_after: float | None, cap: float) -> float:
    """Exponential backoff with full jitter; the server's Retry-After wins when it gave one."""
    if retry_after is not None:
        return min(max(retry_after, 0.0), cap)
    return min(cap, base * (2**tries)) * (0.5 + random.random() / 2)

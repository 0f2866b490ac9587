"""`raised_within(call, deadline)`: run `call()` on a thread of its own that must end within `deadline` seconds,
and say what it raised (None: it returned), for a test whose failure would be a call that waits for ever."""

from __future__ import annotations

import threading
from collections.abc import Callable


def raised_within(call: Callable[[], object], deadline: float = 60.0) -> BaseException | None:
    """What `call()` raised (None: it returned); an AssertionError if it was still running after `deadline` s."""
    raised: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            raised.append(None)
        except BaseException as e:
            raised.append(e)

    t = threading.Thread(target=run, name="raised-within", daemon=True)
    t.start()
    t.join(deadline)
    assert raised, f"the call was still running after {deadline:g} s (it waits for ever?)"
    return raised[0]

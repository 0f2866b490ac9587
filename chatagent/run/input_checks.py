"""A run's input checks (`check_input` hooks): what the client supplied, checked before anything of the answer is
shown and before any tool runs.

They check the whole conversation (every message, whatever its role: over `serve` the client writes the history),
then, as each model call comes, the text the agent added to the model's input in user and system messages (a
document's excerpts, recalled knowledge), which the client may have supplied too (an attached file). A concurrent
check (`Plugin.concurrent`, the default) runs in a thread beside the answer; the others run in place, before the
model is called.
"""

from __future__ import annotations

import contextvars
import threading
import time
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from typing import TYPE_CHECKING, Any

from chatagent.errors import RunDeadlineExceeded
from chatagent.run.plugin import Blocked, Hook, Plugins, failed, plugin_name
from chatagent.schema import SYSTEM, USER, Message, content_text

if TYPE_CHECKING:
    from chatagent.run.protocol import Runnable


class InputChecks:
    """The checks of one run: `start(messages)`, `start_unseen(model_input)`; `pending` until `results()` is called
    (it raises the Blocked of a check that tripped); `done()`, `wait(deadline)`."""

    __slots__ = ("agent", "plugins", "hooks", "pending", "seen")

    def __init__(self, agent: Runnable, plugins: Plugins) -> None:
        self.agent, self.plugins = agent, plugins
        self.hooks = plugins.each("check_input")
        self.pending: list[tuple[Any, Future[None]]] = []  # started, not settled
        self.seen: set[str] = set()  # the texts checked so far

    def __bool__(self) -> bool:
        return bool(self.pending)

    def start(self, msgs: list[Message]) -> None:
        """Check `msgs` (a concurrent check in a thread; the others here, which may raise Blocked)."""
        if not self.hooks:
            return
        self.seen.update(_text(m) for m in msgs)
        for p, fn in self.hooks:
            if getattr(p, "concurrent", True) is False:
                self.plugins.call(p, "check_input", fn, self.agent, list(msgs))
                continue
            self.pending.append((p, self._in_thread(fn, list(msgs))))

    def start_unseen(self, messages: list[Message]) -> None:
        """Check what the model is about to be given in user and system messages that no check has seen."""
        if not self.hooks:
            return
        seen = sorted(self.seen, key=len, reverse=True)
        new: list[Message] = []
        for m in messages:
            if m.role not in (USER, SYSTEM):
                continue
            text = _text(m)
            if text in self.seen:
                continue
            for known in seen:  # what was checked is left out: the question an excerpt goes with, say
                if known and known in text:
                    text = text.replace(known, "\n")
            if text.strip():
                new.append(Message.unchecked(m.role, text))
        if new:
            self.start(new)
            self.seen.update(_text(m) for m in messages if m.role in (USER, SYSTEM))

    def _in_thread(self, fn: Hook, msgs: list[Message]) -> Future[None]:
        future: Future[None] = Future()
        context = contextvars.copy_context()

        def check() -> None:
            try:
                future.set_result(context.run(fn, self.agent, msgs))
            except BaseException as e:
                future.set_exception(e)

        threading.Thread(target=check, name="chatagent-input-check", daemon=True).start()
        return future

    def done(self) -> bool:
        return all(f.done() for _, f in self.pending)

    def wait(self, deadline: float | None) -> None:
        """Wait for the pending checks (RunDeadlineExceeded past `deadline`, a time.monotonic() value)."""
        timeout = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        _, waiting = wait_futures([f for _, f in self.pending], timeout)
        if waiting:
            raise RunDeadlineExceeded("the run went past its deadline waiting for its input checks")

    def results(self) -> None:
        """Settle the finished checks: raise the Blocked of one that tripped, fail the run for one that failed."""
        checks, self.pending = self.pending, []
        for p, future in checks:
            error = future.exception()
            if error is None:
                continue
            if isinstance(error, Blocked):
                error.plugin = error.plugin or plugin_name(p)
                raise error
            if isinstance(error, Exception):
                failed(p, "check_input", error)
            else:
                raise error


def _text(m: Message) -> str:
    call = m.function_call
    text = content_text(m.content)
    return f"{text}\n{call.name}({call.arguments})" if call is not None else text


__all__ = ["InputChecks"]

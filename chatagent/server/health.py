"""Health, readiness and drain of `chatagent serve`, what a load balancer sees: `/healthz` (alive), `/readyz` (takes
requests: not draining, its session store answering), and SIGTERM's drain (`stop_on_signals`: readiness off at
once, the listening socket closed `drain_delay` seconds later, the streams in flight then finished within the
server's grace).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

from chatagent.server.app import Service, send_json
from chatagent.sessions import SessionError

logger = logging.getLogger("chatagent.server")


class Health:
    """`GET /healthz`: 200 while the process is alive (draining too)."""

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        await send_json(send, 200, {"status": "ok"})


_LATE_S = 10.0  # a ping still unanswered after this long: the store counts as down (as a connect timing out would)


class Ready:
    """`GET /readyz`: 200 while the server takes requests; 503 while it drains (after SIGTERM) or when the session
    store it was given (or $CHATAGENT_SESSION_STORE names) failed its last ping or has not answered the one in
    progress within `_LATE_S` seconds (at most one ping a second, on a thread of its own: a server busy with turns
    still answers its health checks within a second; the reason is for the log)."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.store_ok, self.checked, self.started = True, 0.0, 0.0
        self.pinging: asyncio.Future[Any] | None = None

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        svc = self.service
        if svc.draining:
            await send_json(send, 503, {"status": "draining"})
            return
        loop = asyncio.get_running_loop()
        # the store given, or the one $CHATAGENT_SESSION_STORE names (opened by the ping, if no request has yet)
        named = svc.store is not None or bool(os.environ.get("CHATAGENT_SESSION_STORE"))
        if named and self.pinging is None and loop.time() - self.checked > 1.0:
            self.pinging, self.started = asyncio.ensure_future(self._ping(svc.session_store)), loop.time()
            await asyncio.wait([self.pinging], timeout=1.0)
        if self.pinging is not None and self.store_ok and loop.time() - self.started > _LATE_S:
            logger.warning("not ready: the session store has not answered a ping for %g s", _LATE_S)
            self.store_ok = False  # until a ping is answered
        if not self.store_ok:
            await send_json(send, 503, {"status": "unavailable"})
            return
        await send_json(send, 200, {"status": "ready"})

    async def _ping(self, store: Callable[[], Any]) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def ping() -> None:
            ok = False
            try:
                store().ping()
                ok = True
            except SessionError as e:
                logger.warning("not ready: %s", e)
            except Exception as e:  # (its message may hold the store's URL: only its type)
                logger.warning("not ready: the session store's ping failed (%s)", type(e).__name__)
            finally:
                done.get_loop().call_soon_threadsafe(done.set_result, None)
                self.store_ok = ok

        threading.Thread(target=ping, name="chatagent-readyz", daemon=True).start()
        try:
            await done
        finally:
            self.checked, self.pinging = asyncio.get_running_loop().time(), None


@contextlib.contextmanager
def stop_on_signals(server: Any, service: Service, drain_delay: float = 0.0) -> Iterator[None]:
    """SIGTERM and SIGINT stop `server` gracefully (a second one: at once), whatever handling the process inherited
    (a background job starts with SIGINT ignored): `/readyz` turns 503 at once, and `drain_delay` seconds later
    the server stops taking connections and finishes the streams in flight. The previous handlers are restored
    afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def exit_now() -> None:
        server.should_exit = True
        logger.info("stopping: finishing the streams in flight (a second signal stops at once)")

    def stop(signum: int, frame: object) -> None:
        if service.draining:
            server.force_exit = server.should_exit
            exit_now()
            return
        service.draining = True
        if drain_delay > 0:
            logger.info("draining: /readyz says 503; stopping in %g s", drain_delay)
            timer = threading.Timer(drain_delay, exit_now)
            timer.daemon = True
            timer.start()
        else:
            exit_now()

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


__all__ = ["Health", "Ready", "stop_on_signals"]

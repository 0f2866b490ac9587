"""A served conversation's turn, as durable as the session store: it outlives the client, and a client that
reconnects gets it.

A run on a session (a request with a session id) is driven by a task of its own (`Detachable`, started by
`chatagent.server.turns.start_turn` through `SessionRuns`); the request reads its fragments. When the client goes away, the run goes on to its end and its turn is stored (within the server's
deadline and its limit on runs at once). A request with `"resume": true` and the session id (no messages) then
gets the turn (`resumed`):

* a run on it still going in this process: it waits for the run's end, then answers with the stored turn;
* a pending turn (the process that ran it died, or its run failed after doing work): it is resumed from its last
  checkpoint (`Agent.aresume`), its tool calls not run again, and the whole turn streams as if uninterrupted;
* a turn waiting for approval: its calls so far, with `chatagent.pending_approval` (send the decision as an
  approval message to go on);
* otherwise: the last stored turn's answer.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from chatagent.agent import Agent
from chatagent.llm.request import Usage
from chatagent.schema import USER, Message, to_messages
from chatagent.schema.fragment import Fragment, fragment
from chatagent.sessions import Session
from chatagent.sessions.pending import PAUSED

logger = logging.getLogger("chatagent.server")

_END = object()


class Counted(Protocol):
    """What counts the server's runs at once (its limit on them)."""

    running: int


class Detachable:
    """A run driven by a task of its own, read through a queue: `aclose(detach=True)` leaves it running to its end
    (its turn is stored) instead of closing it."""

    __slots__ = ("run", "queue", "task", "dicts")

    def __init__(self, run: Any, dicts: bool = False) -> None:
        self.run = run
        self.dicts = dicts  # the run yields fragments as dicts (`aresume` does): read back as Fragments
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.task = asyncio.ensure_future(self._drive())

    @property
    def usage(self) -> Usage:
        return self.run.usage

    async def _drive(self) -> None:
        try:
            async for fragments in self.run:
                self.queue.put_nowait([Fragment(**f) for f in fragments] if self.dicts else fragments)
            self.queue.put_nowait(_END)
        except Exception as e:
            self.queue.put_nowait(e)
        finally:
            await self.run.aclose()

    def __aiter__(self) -> Detachable:
        return self

    async def __anext__(self) -> list[Fragment]:
        item = await self.queue.get()
        if item is _END:
            raise StopAsyncIteration
        if isinstance(item, Exception):
            raise item
        return item

    async def aclose(self, detach: bool = False) -> None:
        """Close the run, or with `detach` let it go on to its end."""
        if self.task.done() or detach:
            return
        self.task.cancel()
        try:
            await self.task
        except asyncio.CancelledError:
            pass


class Replay:
    """Stored messages answered as if a run had just produced them."""

    __slots__ = ("items", "usage")

    def __init__(self, messages: list[Message]) -> None:
        self.items = [[fragment(m, i) for i, m in enumerate(messages)]] if messages else []
        self.usage = Usage()

    def __aiter__(self) -> Replay:
        return self

    async def __anext__(self) -> list[Fragment]:
        if not self.items:
            raise StopAsyncIteration
        return self.items.pop(0)

    async def aclose(self, detach: bool = False) -> None:
        self.items = []


class SessionRuns:
    """The session runs going on in this process, by (user, session id); each counts among the server's runs at once
    (`counted.running`) until it ends, since it may outlive its request."""

    __slots__ = ("counted", "going")

    def __init__(self, counted: Counted) -> None:
        self.counted = counted
        self.going: dict[tuple[str, str], Detachable] = {}

    async def start(self, agent: Agent, session: Session, messages: list[Message], resume: bool,
                    deadline: float | None, **options: Any) -> Detachable | Replay:  # fmt: skip
        """The run of a request on `session`: its new turn on `messages` (`options`: the run's `callbacks`), or with
        `resume` the turn it resumes."""
        if resume:
            run = await resumed(agent, session, deadline, self.going)
        else:
            run = Detachable(agent.arun(messages, delta_stream=True, deadline=deadline, session=session, **options))
        if isinstance(run, Detachable):
            self._track(run, (session.user, session.id))
        return run

    def _track(self, run: Detachable, key: tuple[str, str]) -> None:
        self.counted.running += 1
        self.going.setdefault(key, run)  # (a second run on the session fails at once: SessionBusyError)

        def ended(_: object) -> None:
            self.counted.running -= 1
            if self.going.get(key) is run:
                del self.going[key]

        run.task.add_done_callback(ended)


async def resumed(
    agent: Agent, session: Session, deadline: float | None, going: dict[tuple[str, str], Detachable]
) -> Detachable | Replay:
    """What a `"resume": true` request gets (see the module docstring): a run, or a Replay."""
    ongoing = going.get((session.user, session.id))
    if ongoing is not None:
        await asyncio.wait_for(asyncio.shield(ongoing.task), deadline)
    pending = await asyncio.to_thread(lambda: session.pending_turn)
    if pending is not None and pending.state != PAUSED:
        return Detachable(agent.aresume(session=session, delta_stream=True, deadline=deadline), dicts=True)
    if pending is not None:
        return Replay(to_messages(pending.response))
    stored = to_messages(await asyncio.to_thread(session.messages))
    last = max((i for i, m in enumerate(stored) if m.role == USER), default=len(stored) - 1)
    return Replay(stored[last + 1 :])


__all__ = ["Counted", "Detachable", "Replay", "SessionRuns", "resumed"]

"""One browser session: its conversation, its agents, and the streaming of one turn.

A turn runs the agent in a worker thread (agents are synchronous iterators) and hands its incremental
output to the event loop through an asyncio queue. The Gradio handler awaits that queue, so it holds no
thread while the model thinks, takes every fragment that arrived since its last update in one go (a fast
model costs one UI update per batch, not per chunk), and can stop at once: `request_stop()` wakes it, the
worker closes the agent's Run iterator, and closing the Run closes the model's stream underneath.
"""

from __future__ import annotations

import asyncio
import logging
import mimetypes
import secrets
import threading
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from chatagent.agent import Agent
from chatagent.gui.icons import icon
from chatagent.gui.notes import model_label, status_message, status_text
from chatagent.gui.render import chat_message, render_conversation, render_error, render_message
from chatagent.run.trust import acting_as, served
from chatagent.schema import USER, ContentItem, Message, drop_unanswered_calls, to_messages
from chatagent.schema.fragment import Fragment
from chatagent.schema.stream import Response
from chatagent.sessions.errors import SessionBusyError
from chatagent.utils.url_fetch import url_policy

if TYPE_CHECKING:
    from chatagent.sessions import Session

logger = logging.getLogger("chatagent.gui")

STOPPED_NOTE = chat_message("assistant", f"{icon('stopped')} *Stopped.*")
BUSY_NOTE = chat_message(
    "assistant",
    f"{icon('waiting')} *This conversation is answering in another tab or window. Your message is back in the box:"
    " send it again when that answer is done.*",
)
WORKER_JOIN_S = 30.0  # how long to wait for a stopped turn's run to close


class _Signal:
    """The end of a turn's queue: the run ended (`_END`) or was stopped (`_STOP`)."""

    __slots__ = ()


_END = _Signal()
_STOP = _Signal()


class _Status(str):
    """What the run is doing (from its events), shown until the answer starts."""


class _Failed:
    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


_Item = list[Fragment] | _Status | _Failed | _Signal  # what the worker thread hands the handler


def content_kind(path: str) -> str:
    """The content item kind for an uploaded file: image, audio or video by its type, else file."""
    mime = mimetypes.guess_type(path)[0] or ""
    kind = mime.split("/", 1)[0]
    return kind if kind in ("image", "audio", "video") else "file"


def user_message(text: str, files: list[str]) -> Message:
    """The user's message: plain text, or text then one content item per uploaded file."""
    if not files:
        return Message(USER, text)
    items = [ContentItem(text=text)] if text else []
    items += [ContentItem(**{content_kind(f): f}) for f in files]
    return Message(USER, items)


def box_value(msg: Message) -> dict[str, Any]:
    """The input box's value that `user_message` made `msg` from: its text and its files' paths."""
    if isinstance(msg.content, str):
        return {"text": msg.content, "files": []}
    text = "\n".join(str(item.value) for item in msg.content if item.kind == "text")
    return {"text": text, "files": [str(item.value) for item in msg.content if item.kind != "text"]}


class ChatSession:
    """The state of one browser session: the conversation (as Messages and as rendered) and the agents.

    `session_id` (random, unguessable) is what the agents' tools keep per-conversation state under: each
    browser session has its own code sandbox and files. `clear()` starts a new one; `close()` ends it.

    Bound to a stored `chatagent.Session` (see `bind`), each turn runs with `session=` on only the messages not
    stored yet (`pending`), so the conversation outlives the page and the server.
    """

    def __init__(self, agents: list[Agent], history: list[Message] | None = None, show_names: bool = False) -> None:
        self.agents = agents
        self.show_names = show_names
        self.history: list[Message] = list(history or [])
        self.display: list[dict[str, Any]] = render_conversation(self.history, show_names=show_names)
        self.generation = 0  # bumped by clear(): a turn from before a clear must not write back
        self.session_id = secrets.token_hex(16)
        self._stop: threading.Event | None = None
        self._wake: Callable[[], None] | None = None
        self.stored: Session | None = None
        self.pending: list[Message] = []  # messages of the conversation not in the store yet
        self._worker: threading.Thread | None = None
        # the user's message taken back because another tab is answering this conversation (for the input box)
        self.bounced: Message | None = None
        self.clear_armed_at = 0.0  # when Clear was clicked once (time.monotonic()); a second click clears

    def bind(self, stored: Session) -> None:
        """Show and continue the stored conversation `stored` (the messages shown so far, if it has none yet)."""
        self.detach()
        history = to_messages(stored.messages())
        waiting = stored.pending_turn  # a turn that did not end (paused for approval, or interrupted): shown too
        if waiting is not None:
            history += to_messages([m for m in waiting.messages if m.get("role") != "system"] + waiting.response)
        self.pending = [] if history else list(self.history)
        self.history = history or self.history
        self.display = render_conversation(self.history, show_names=self.show_names)
        self.stored = stored

    def detach(self) -> None:
        """Stop the turn in progress (its partial answer is stored) and wait until it has been written."""
        self.request_stop()
        self.generation += 1
        if self._worker is not None:
            self._worker.join(WORKER_JOIN_S)

    # ---- conversation edits ----------------------------------------------------------------------------

    def add_user(self, msg: Message) -> None:
        """Append the user's message to the conversation."""
        self.history.append(msg)
        if self.stored is not None:
            self.pending.append(msg)
        self.display = self.display + render_message(msg)

    def clear(self) -> None:
        """Stop any turn and forget the conversation (the stored one too, and its tools' state: a new session_id)."""
        self.detach()
        if self.stored is not None:
            self.stored.clear()
        self.history = []
        self.pending = []
        self.display = []
        self.close()
        self.session_id = secrets.token_hex(16)

    def close(self) -> None:
        """End what the agents' tools keep for this session (its code sandbox and files)."""
        for agent in self.agents:
            try:
                agent.close_session(self.session_id)
            except Exception:  # the browser session is going away: never let one tool keep the others alive
                logger.exception("ending the session's tool state failed")

    def pop_response(self) -> bool:
        """Drop everything after the last user message (for regenerate); False if there is no user message."""
        last = max((i for i, m in enumerate(self.history) if m.role == USER), default=-1)
        if last < 0:
            return False
        if self.stored is not None and not self.pending:  # the last turn is stored: take it back
            self.detach()
            popped = to_messages(self.stored.pop())
            asked = max((i for i, m in enumerate(popped) if m.role == USER), default=-1)
            self.pending = popped[: asked + 1]
        self.history = self.history[: last + 1]
        self.display = render_conversation(self.history, show_names=self.show_names)
        return True

    @property
    def running(self) -> bool:
        """Whether a turn is streaming."""
        return self._stop is not None

    def request_stop(self) -> None:
        """Stop the turn in progress, if any: the handler returns now, the agent's run is closed."""
        if self._stop is not None:
            self._stop.set()
        if self._wake is not None:
            self._wake()

    # ---- one turn ----------------------------------------------------------------------------------------

    async def stream_turn(self, agent: Agent, **run_kwargs: Any) -> AsyncIterator[list[dict[str, Any]]]:
        """Run `agent` on the conversation; yield the rendered conversation as the answer grows.

        The answer (partial, if stopped) is added to the history when the turn ends.
        """
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[_Item] = asyncio.Queue()
        stop = threading.Event()
        generation = self.generation

        def put(item: _Item) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the event loop is gone (server shutting down)
                stop.set()

        if self._worker is not None:  # the previous turn's run may still be closing (and storing its turn)
            await asyncio.to_thread(self._worker.join, WORKER_JOIN_S)
        stored, sent = self.stored, list(self.pending)
        label: list[str] = []  # the model's name, found at the first event that needs it

        def on_event(event: Any) -> None:  # called in the worker thread by the run
            if not label and event.kind == "llm_start":
                label.append(model_label(agent.llm))
            text = status_text(event, label[0] if label else "")
            if text:
                put(_Status(text))

        # a visitor of the page: its login or browser (the stored conversation's user), code run only with approval
        trust = served(stored.user if stored is not None else None, url_policy())

        def pump() -> None:
            run = None
            failed = False
            try:
                callbacks = [on_event, *run_kwargs.pop("callbacks", ())]
                kwargs = {"session_id": self.session_id, "callbacks": callbacks, **run_kwargs}
                with acting_as(trust):  # the run takes it at its start (this thread's context is its own)
                    if stored is None:
                        run = agent.run(to_messages(self.history), delta_stream=True, **kwargs)
                    else:  # the stored conversation, then what is not stored yet; the turn is stored at the end
                        run = agent.run(sent, delta_stream=True, session=stored, **kwargs)
                for delta in run:
                    put(delta)
                    if stop.is_set():
                        break
            except BaseException as e:  # reported in the chat by the handler
                failed = True
                put(_Failed(e))
            finally:
                if run is not None:
                    try:
                        run.close()
                    except Exception:
                        logger.exception("closing the agent's run failed")
                if stored is not None and not failed:  # stored: completed, or stopped with its partial answer
                    del self.pending[: len(sent)]
                put(_END)

        self._stop = stop
        self._wake = lambda: put(_STOP)
        worker = self._worker = threading.Thread(target=pump, name="chatagent-gui-turn", daemon=True)
        response = Response()
        rendered: list[list[dict[str, Any]]] = []
        tail: list[dict[str, Any]] = []
        status: str | None = "Starting"  # what the run does while no answer text is coming
        done = False  # the run ended or was stopped (not: the handler was closed mid-turn)
        busy = False  # another tab is running this stored conversation: nothing of this turn happened
        worker.start()
        try:
            while not done:
                items = [await queue.get()]
                while not queue.empty():
                    items.append(queue.get_nowait())
                for item in items:
                    if isinstance(item, _Signal):  # _END or _STOP
                        done = True
                        break
                    if isinstance(item, _Failed):
                        if isinstance(item.error, SessionBusyError):
                            busy, tail = True, [BUSY_NOTE]
                            continue
                        logger.error("the agent failed", exc_info=item.error)
                        tail = [render_error(item.error)]
                        continue
                    if isinstance(item, _Status):
                        status = item
                        continue
                    status = None
                    for i in response.add(item):
                        msg = response.messages[i]
                        view = render_message(msg, show_name=self.show_names)
                        if i == len(rendered):
                            rendered.append(view)
                        else:
                            rendered[i] = view
                if stop.is_set() and not tail:
                    tail = [STOPPED_NOTE]
                if self.generation != generation:
                    return
                working = [status_message(status)] if status and not done and not tail else []
                yield self.display + [d for view in rendered for d in view] + tail + working
        finally:
            stop.set()
            if self._stop is stop:  # not a turn started after a clear
                self._stop = None
                self._wake = None
            if self.generation == generation and busy:
                self._take_back_the_message()
                self.display = self.display + tail
            elif self.generation == generation:
                answer = response.messages
                if tail or not done:  # stopped, failed or abandoned: a call without its result would be invalid
                    answer = drop_unanswered_calls(answer)
                self.history.extend(answer)
                self.display = self.display + [d for view in rendered for d in view] + tail

    def _take_back_the_message(self) -> None:
        """Undo `add_user` of the turn that could not run: the message goes to `bounced`, out of the conversation."""
        last = self.pending[-1] if self.pending else None
        if last is None or last.role != USER or not self.history or self.history[-1] is not last:
            return
        self.pending.pop()
        self.history.pop()
        self.bounced = last
        self.display = render_conversation(self.history, show_names=self.show_names)

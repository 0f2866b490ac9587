"""The web UI's "try again from here" (with conversations: `WebUI(agent, conversations=True)`, `chatagent gui`): a
panel under the chat showing the open conversation's history (its checkpoints: `chatagent.Session.history`), turn by
turn, and a control on each of the user's past messages that forks the conversation just before that message
(`Session.fork`: a new conversation in the sidebar, the original as it was) and runs the message there, as it was or
edited.

Every handler builds the conversation's Session from the name Gradio signed in (or the browser's signed identity,
`chatagent.gui.conversations.user_of`), never from what the page sends: a user sees and forks only their own.

(No `from __future__ import annotations` here: Gradio finds the `gr.Request` parameter by its annotation.)
"""

import os
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import gradio as gr

from chatagent.gui.conversations import user_of
from chatagent.gui.render import escape_markdown
from chatagent.gui.session import ChatSession, user_message
from chatagent.schema import USER, to_messages
from chatagent.sessions import Checkpoint, Session, open_store
from chatagent.sessions.history import INPUT

NOTHING = "*No history yet: the steps of this conversation's turns show here.*"
SHOWN_CHARS = 60  # of a message, in the list
KIND_NAMES = {"input": "you", "model": "model", "tools": "tools", "pause": "paused"}


class HistoryPanel:
    """The panel and its handlers over one store (`store`: a URL or path, or None for the default store); build it
    inside the page's Blocks."""

    def __init__(self, ui: Any, store: "str | os.PathLike[str] | None" = None) -> None:
        self.ui = ui  # the WebUI: it makes the ChatSessions and runs turns
        self.store = open_store(store)
        self._state: Any = None  # the page's state (`wire`)
        with gr.Accordion("History", open=False, elem_id="history-panel"):
            self.steps = gr.Markdown(NOTHING, elem_id="history-steps")
            self.choice = gr.Dropdown(choices=[], value=None, label="Try again from one of your messages",
                                      elem_id="history-message", interactive=True)  # fmt: skip
            self.edit = gr.Textbox(label="Message (edit it, or send it as it was)", lines=2, elem_id="history-edit")
            self.retry = gr.Button("Try again from here", elem_id="history-retry", size="sm")
            self.note = gr.Markdown("", visible=False, elem_id="history-note")

    def wire(self, chatbot: Any, textbox: Any, state: Any, selector: Any) -> Any:
        """Connect the controls to the page's chatbot, input box, state and agent selector. Returns the retry's
        event (its turn changes the conversation list)."""
        self._state = state
        shown = [self.steps, self.choice, self.edit, self.note]
        self.choice.input(self._on_pick, [self.choice, state], [self.edit], queue=False, api_visibility="private")
        retried = self.retry.click(self._on_retry, [self.choice, self.edit, state, selector],
                                   [chatbot, textbox, state, self.note], show_progress="hidden",
                                   concurrency_limit=self.ui.concurrency_limit, api_visibility="private")  # fmt: skip
        retried.then(self._on_show, [state], shown, queue=False, api_visibility="private")
        return retried

    def show_after(self, events: Sequence[Any]) -> None:
        """Show the open conversation's history after each of `events` (the page's load, a conversation opened, a
        turn); after `wire`."""
        for event in events:
            event.then(self._on_show, [self._state], [self.steps, self.choice, self.edit, self.note], queue=False,
                       api_visibility="private")  # fmt: skip

    # ---- handlers ------------------------------------------------------------------------------------------

    def _on_show(self, chat: ChatSession | None, request: gr.Request) -> tuple:
        stored = self._stored(chat, request)
        if stored is None:
            return gr.Markdown(NOTHING), gr.Dropdown(choices=[], value=None), "", gr.Markdown(visible=False)
        if chat is not None and chat.running:  # shown once its turn is stored
            return gr.skip(), gr.skip(), gr.skip(), gr.skip()
        found = stored.history()
        said = _said(stored, found)
        choices = [(f"Turn {c.turn}: {_short(said.get(c.id, ''))}", c.id) for c in _retry_points(found, said)]
        return (
            gr.Markdown(_steps(found, said)),
            gr.Dropdown(choices=choices, value=None),
            "",
            gr.Markdown(visible=False),
        )

    def _on_pick(self, choice: str | None, chat: ChatSession | None, request: gr.Request) -> Any:
        stored = self._stored(chat, request)
        return _said(stored, stored.history()).get(str(choice), "") if stored is not None and choice else gr.skip()

    async def _on_retry(self, choice: str | None, text: str, chat: ChatSession | None, agent_name: str | None,
                        request: gr.Request) -> AsyncIterator[tuple]:  # fmt: skip
        user = user_of(request, getattr(self.ui, "identity_key", None))
        stored = self._stored(chat, request)
        if chat is None or stored is None or chat.running:
            yield gr.skip(), gr.skip(), chat, _note("Open one of your conversations, and wait for its answer.")
            return
        found = stored.history()
        points = {c.id: c for c in _retry_points(found, _said(stored, found))}
        if not choice or str(choice) not in points:
            yield gr.skip(), gr.skip(), chat, _note("Pick one of your messages of this conversation first.")
            return
        if not (text or "").strip():
            yield gr.skip(), gr.skip(), chat, _note("Write the message to send from there.")
            return
        at = found.index(points[str(choice)])
        # the conversation as it was before that message: forked at the end of the turn before, or a new one
        branch = stored.fork(found[at - 1].id) if at > 0 else Session(None, self.store, user=user)
        chat.detach()
        opened = self.ui.new_session()
        opened.bind(branch)
        opened.add_user(user_message(text.strip(), []))
        async for display, box, state in self.ui._turn(opened, agent_name):
            yield display, box, state, gr.Markdown(visible=False)

    # ---- helpers -------------------------------------------------------------------------------------------

    def _stored(self, chat: ChatSession | None, request: gr.Request) -> Session | None:
        """The open conversation as the signed-in user's (None when none is open, or it is not theirs)."""
        user = user_of(request, getattr(self.ui, "identity_key", None))
        if chat is None or chat.stored is None or chat.stored.user != user:
            return None
        return Session(chat.stored.id, self.store, user=user)


def _said(stored: Session, found: list[Checkpoint]) -> dict[str, str]:
    """{checkpoint id: the text of the user's message it ends with} for those of `found` that end with one."""
    messages = stored.messages()
    if messages and messages[0].get("role") == "system":
        messages = messages[1:]
    out: dict[str, str] = {}
    for c in found:
        last = to_messages(messages[c.messages - 1 : c.messages]) if c.kind == INPUT and c.messages else []
        if last and last[0].role == USER and last[0].text.strip():
            out[c.id] = last[0].text
    return out


def _retry_points(found: list[Checkpoint], said: dict[str, str]) -> list[Checkpoint]:
    """The checkpoints a retry starts before: each turn's first step, when it is a message of the user's."""
    return [c for c in found if c.step == 0 and c.id in said]


def _steps(found: list[Checkpoint], said: dict[str, str]) -> str:
    """The history as Markdown: a line per turn, its steps in order."""
    if not found:
        return NOTHING
    lines: list[str] = []
    for c in found:
        if c.step == 0:
            when = time.strftime(" (%H:%M:%S)", time.localtime(c.at)) if c.at else ""
            lines.append(f"**Turn {c.turn}**{when}:")
        part = KIND_NAMES.get(c.kind, c.kind) + (f" “{escape_markdown(_short(said[c.id]))}”" if c.id in said else "")
        lines[-1] += ("" if c.step == 0 else " →") + f" `{c.id}` {part}"
    return "\n\n".join(lines)


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def _note(text: str) -> Any:
    return gr.Markdown(f"*{escape_markdown(text)}*", visible=True)


__all__ = ["HistoryPanel"]

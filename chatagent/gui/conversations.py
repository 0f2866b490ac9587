"""The web UI's conversation sidebar: the signed-in user's stored conversations (new, switch, rename, delete).

With `WebUI(agent, conversations=True)` (or a store URL; `chatagent gui` turns it on) each conversation is a
`chatagent.Session` kept under the user's name: Gradio's login name when the page has `auth`, else one local user.
Opening or reloading the page shows the user's most recent conversation, also after a server restart; titles come
from the first question until renamed. Users never see each other's conversations: every handler builds its
Session from the name Gradio signed in, never from what the page sends.

(No `from __future__ import annotations` here: Gradio finds the `gr.Request` parameter by its annotation.)
"""

import os
import secrets
import weakref
from collections.abc import Sequence
from typing import Any

import gradio as gr

from chatagent.gui.security import browser_of
from chatagent.gui.session import ChatSession
from chatagent.sessions import DEFAULT_USER, Session, SessionInfo, open_store

NEW_TITLE = "New conversation"


class Conversations:
    """The sidebar and its handlers, over one store (`store`: a URL or path, or None for the default store)."""

    def __init__(self, ui: Any, store: str | os.PathLike[str] | None = None) -> None:
        self.ui = ui  # the WebUI: it makes the ChatSessions (with their agents)
        self.store = open_store(store)  # opened now: a bad URL or a damaged file is an error at start
        # the title each page's title box shows: refreshed after a turn only when the stored title changed, so a
        # title being typed is not overwritten by the refresh that follows a turn
        self._shown: weakref.WeakKeyDictionary[ChatSession, str] = weakref.WeakKeyDictionary()

    def attach(self, demo: Any, state: Any, chatbot: Any, textbox: Any, turn_events: Sequence[Any]) -> list[Any]:
        """Render the sidebar in `demo` and wire it to the page's state and chatbot; `turn_events` are the
        events after which the list may have changed (a turn, a clear). The page's `textbox` (made not
        interactive) is enabled once the user's conversation is open: a message sent before would be kept in
        no conversation, and the opening would then replace it. Returns the events that open a conversation."""
        with gr.Sidebar(label="Conversations", elem_id="conversations"):
            new_btn = gr.Button("New conversation", elem_id="new-conversation", size="sm")
            listing = gr.Radio(choices=[], value=None, show_label=False, elem_id="conversation-list")
            with gr.Row():
                title = gr.Textbox(placeholder="Title", show_label=False, elem_id="conversation-title", scale=3)
                rename_btn = gr.Button("Rename", elem_id="rename-conversation", size="sm", scale=1)
            delete_btn = gr.Button("Delete conversation", variant="stop", elem_id="delete-conversation", size="sm")
        opened = [chatbot, state, listing, title]
        loaded = demo.load(self._on_load, [state], [*opened, textbox], queue=False)
        made = new_btn.click(self._on_new, [state], opened, queue=False, api_visibility="private")
        switched = listing.input(self._on_switch, [listing, state], opened, queue=False, api_visibility="private")
        for renamed in (rename_btn.click, title.submit):
            renamed(self._on_rename, [title, state], [listing, title], queue=False, api_visibility="private")
        deleted = delete_btn.click(self._on_delete, [state], opened, queue=False, api_visibility="private")
        for event in turn_events:
            event.then(self._on_changed, [state], [listing, title], queue=False, api_visibility="private")
        return [loaded, made, switched, deleted]

    # ---- handlers ------------------------------------------------------------------------------------------

    def _on_load(self, chat: ChatSession | None, request: gr.Request) -> tuple:
        user = self._user(request)
        found = self.store.list(user)
        opened = self._open(chat, Session(found[0].id if found else None, self.store, user=user), found)
        return (*opened, gr.MultimodalTextbox(interactive=True))

    def _on_new(self, chat: ChatSession | None, request: gr.Request) -> tuple:
        return self._open(chat, Session(None, self.store, user=self._user(request)))

    def _on_switch(self, session_id: str | None, chat: ChatSession | None, request: gr.Request) -> tuple:
        if not session_id:
            return gr.skip(), gr.skip(), gr.skip(), gr.skip()
        return self._open(chat, Session(session_id, self.store, user=self._user(request)))

    def _on_rename(self, title: str, chat: ChatSession | None, request: gr.Request) -> tuple:
        if chat is None or chat.stored is None or not title.strip():
            return gr.skip(), gr.skip()
        chat.stored.title = title
        return self._listing(self._user(request), chat), self._title_box(chat)

    def _on_delete(self, chat: ChatSession | None, request: gr.Request) -> tuple:
        user = self._user(request)
        if chat is not None and chat.stored is not None:
            chat.detach()
            chat.stored.delete()
        found = self.store.list(user)
        return self._open(None, Session(found[0].id if found else None, self.store, user=user), found)

    def _on_changed(self, chat: ChatSession | None, request: gr.Request) -> tuple:
        if chat is None or chat.stored is None:
            return gr.skip(), gr.skip()
        same = self._shown.get(chat) == chat.stored.title
        return self._listing(self._user(request), chat), gr.skip() if same else self._title_box(chat)

    # ---- helpers -------------------------------------------------------------------------------------------

    def _user(self, request: gr.Request) -> str:
        return user_of(request, getattr(self.ui, "identity_key", None))

    def _open(self, current: ChatSession | None, stored: Session, found: list[SessionInfo] | None = None) -> tuple:
        """Show `stored` in a fresh ChatSession (a turn streaming in `current` is stopped and its answer kept)."""
        if current is not None:
            current.detach()
        chat = self.ui.new_session()
        chat.bind(stored)
        listing = self._listing(stored.user, chat, found)
        return chat.display, chat, listing, self._title_box(chat)

    def _title_box(self, chat: ChatSession) -> Any:
        title = chat.stored.title if chat.stored is not None else ""
        self._shown[chat] = title
        return gr.Textbox(value=title)

    def _listing(self, user: str, chat: ChatSession, found: list[SessionInfo] | None = None) -> Any:
        found = self.store.list(user) if found is None else found
        current = chat.stored.id if chat.stored is not None else None
        choices = [(info.title or NEW_TITLE, info.id) for info in found]
        return gr.Radio(choices=choices, value=current if any(i.id == current for i in found) else None)


def user_of(request: gr.Request | None, key: bytes | None = None) -> str:
    """Whose conversations a request reaches: the signed-in user's name (Gradio auth), else its browser's signed
    identity (`chatagent.gui.security.BrowserIdentity`, with `key`), else (no key: the page is not served by `WebUI.run`)
    the one local user. A request with neither a login nor a valid identity reaches no one's: a name of its own."""
    name = getattr(request, "username", None) if request is not None else None
    if isinstance(name, str) and name:
        return name
    if key is None:
        return DEFAULT_USER
    headers = getattr(request, "headers", None) or {}
    browser = browser_of(headers.get("cookie", ""), key)
    return f"browser:{browser}" if browser is not None else f"browser:unknown-{secrets.token_hex(16)}"

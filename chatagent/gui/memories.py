"""The web UI's memory panel: what the assistant remembers about the signed-in user, and forgetting it.

Shown with conversations (each turn then runs on the signed-in user's Session, so the Assistant recalls and
stores that user's memories) when an agent of the page has a `memory` (`Assistant(memory=...)`). The list is
read, and records deleted, as the user Gradio signed in (without a login: as the browser's signed identity, the
one its conversations and turns have), never as a name the page sends: an id of another user's record deletes
nothing. It is refreshed after every turn.

(No `from __future__ import annotations` here: Gradio finds the `gr.Request` parameter by its annotation.)
"""

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import gradio as gr

from chatagent.gui.conversations import user_of

if TYPE_CHECKING:  # a page without memory must not need [rag] (numpy) to load
    from chatagent.memories.longterm import LongTermMemory

MAX_SHOWN = 200  # the most recent; the CLI lists them all


def page_memory(agents: Sequence[Any]) -> "LongTermMemory | None":
    """The memory of the page's first agent that has one (`Assistant(memory=...)`)."""
    return next((a.memory for a in agents if getattr(a, "memory", None) is not None), None)


class MemoryPanel:
    """The panel and its handlers over one LongTermMemory (used for each signed-in user or browser); `ui`: the
    WebUI, whose `identity_key` signs browsers' identities."""

    def __init__(self, memory: "LongTermMemory", ui: Any = None) -> None:
        self.memory = memory
        self.ui = ui

    def _user(self, request: gr.Request) -> str:
        return user_of(request, getattr(self.ui, "identity_key", None))  # the browser's, as the conversations'

    def attach(self, demo: Any, turn_events: Sequence[Any]) -> None:
        with gr.Sidebar(label="Memories", position="right", open=False, elem_id="memories"):
            gr.Markdown("What the assistant remembers about you, newest first.")
            listing = gr.CheckboxGroup(choices=[], value=[], show_label=False, elem_id="memory-list")
            forget_btn = gr.Button("Forget selected", variant="stop", size="sm", elem_id="forget-memories")
        demo.load(self._on_show, [], [listing], queue=False)
        forget_btn.click(self._on_forget, [listing], [listing], queue=False, api_visibility="private")
        for event in turn_events:
            event.then(self._on_show, [], [listing], queue=False, api_visibility="private")

    def _on_show(self, request: gr.Request) -> Any:
        return self._listing(self._user(request))

    def _on_forget(self, selected: list[str] | None, request: gr.Request) -> Any:
        user = self._user(request)
        mem = self.memory.for_user(user)
        for record_id in selected or []:
            if isinstance(record_id, str):
                mem.forget(record_id)
        return self._listing(user)

    def _listing(self, user: str) -> Any:
        records = self.memory.for_user(user).list()[:MAX_SHOWN]
        choices = [(f"[{r.date}] {' '.join(r.text.split())[:300]}", r.id) for r in records]
        return gr.CheckboxGroup(choices=choices, value=[])

"""Tool approval in the web UI: `ApprovalControls`, the Approve / Deny row under the chat, shown while the
conversation's last message waits for approval; it resumes the run with the decision (`chatagent.run.approval`).
How blocked answers, calls waiting for approval and the decision look is `chatagent.gui.render.render_control`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any

from chatagent.run.approval import approval_message, pending_approval
from chatagent.schema import to_message

if TYPE_CHECKING:
    from chatagent.gui.session import ChatSession

#: Runs a turn of a session with an agent (the page's own `WebUI._turn`): the page's updates as they come.
Turn = Callable[["ChatSession", Any], AsyncIterator[tuple]]


def waiting_for_approval(session: ChatSession | None) -> bool:
    """Whether the session's conversation ends with tool calls waiting for a decision (and no turn is running)."""
    return session is not None and not session.running and bool(pending_approval(session.history))


class ApprovalControls:
    """The Approve / Deny row (hidden unless a call waits) and its handlers; build it inside the page's Blocks."""

    def __init__(self, turn: Turn) -> None:
        import gradio as gr

        self.turn = turn
        with gr.Row(visible=False, elem_id="approval-row") as row:
            self.reason = gr.Textbox(
                placeholder="Reason for a denial (optional, told to the agent)", show_label=False,
                elem_id="deny-reason", scale=3,
            )  # fmt: skip
            self.approve = gr.Button("Approve", variant="primary", elem_id="approve-btn", size="sm", scale=1)
            self.deny = gr.Button("Deny", variant="stop", elem_id="deny-btn", size="sm", scale=1)
        self.row = row

    def wire(self, chatbot: Any, textbox: Any, state: Any, selector: Any, events: Sequence[Any]) -> list[Any]:
        """Connect the buttons, and show or hide the row after each of `events` (turns, clears); the buttons'
        events."""
        outputs = [chatbot, textbox, state]
        decided = []
        for button, approve in ((self.approve, True), (self.deny, False)):

            async def decide(session: Any, agent_name: Any, reason: str, _approve: bool = approve) -> AsyncIterator:
                async for update in self._decide(session, agent_name, reason, _approve):
                    yield update

            done = button.click(decide, [state, selector, self.reason], outputs, show_progress="hidden")
            done.then(self._visibility, [state], [self.row, self.reason], queue=False)
            decided.append(done)
        for event in events:
            event.then(self._visibility, [state], [self.row, self.reason], queue=False)
        return decided

    async def _decide(self, session: Any, agent_name: Any, reason: str, approve: bool) -> AsyncIterator[tuple]:
        import gradio as gr

        if not waiting_for_approval(session):
            yield gr.skip(), gr.skip(), session
            return
        session.add_user(to_message(approval_message(approve, "" if approve else (reason or "").strip())))
        async for update in self.turn(session, agent_name):
            yield update

    @staticmethod
    def _visibility(session: Any) -> tuple:
        import gradio as gr

        return gr.Row(visible=waiting_for_approval(session)), gr.Textbox(value="")

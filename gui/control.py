"""What plugins and tool approval look like in the web UI: blocked answers, calls waiting for approval and the
person's decision, and the Approve / Deny buttons.

`render_control(msg)` renders a message that carries one of the control marks (`CONTROL_KEYS`); `gui.render`
hands such messages here. `ApprovalControls` is the row of buttons under the chat: shown while the conversation's
last message waits for approval, they resume the run with the decision (`chatagent.approval`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from chatagent.approval import APPROVAL, PENDING_APPROVAL, approval_message, pending_approval
from chatagent.plugins import BLOCKED_BY, BLOCKED_REASON
from chatagent.schema import USER, Message, content_text, to_message
from gui.render import chat_message, escape_html, escape_markdown, render_message, safe_name

if TYPE_CHECKING:
    from gui.session import ChatSession
    from gui.web_ui import WebUI

CONTROL_KEYS = frozenset({BLOCKED_BY, PENDING_APPROVAL, APPROVAL})
BLOCKED_TITLE = "🛡️ Blocked"


def render_control(msg: Message, *, show_name: bool = False) -> list[dict[str, Any]]:
    """A message with a control mark as Gradio chatbot messages."""
    extra = msg.extra or {}
    if msg.role == USER and APPROVAL in extra:
        return [chat_message("user", _decision_text(extra[APPROVAL], content_text(msg.content)))]
    if BLOCKED_BY in extra:
        by = escape_html(safe_name(str(extra[BLOCKED_BY])))
        reason = extra.get(BLOCKED_REASON)
        note = f"🛡️ *Blocked by **{by}**" + (f": {escape_markdown(str(reason))}*" if reason else ".*")
        return [chat_message("assistant", f"{escape_markdown(msg.text)}\n\n{note}" if msg.text else note)]
    rest = {k: v for k, v in extra.items() if k != PENDING_APPROVAL}
    out = render_message(msg.copy(extra=rest or None), show_name=show_name)
    names = ", ".join(
        f"**{escape_html(safe_name(str(c.get('name', '?'))))}**" for c in extra.get(PENDING_APPROVAL) or []
    )
    out.append(chat_message("assistant", f"⏸️ *Waiting for your approval to run {names}: Approve or Deny below.*"))
    return out


def _decision_text(decision: Any, reason: str) -> str:
    if decision is True:
        text = "✅ Approved."
    elif decision is False:
        text = "❌ Denied."
    elif isinstance(decision, dict):
        yes = sum(1 for v in decision.values() if v)
        text = f"☑️ Approved {yes} of {len(decision)} calls."
    else:
        text = "Decision."
    return text + (f" {escape_markdown(reason)}" if reason else "")


def waiting_for_approval(session: ChatSession | None) -> bool:
    """Whether the session's conversation ends with tool calls waiting for a decision (and no turn is running)."""
    return session is not None and not session.running and bool(pending_approval(session.history))


class ApprovalControls:
    """The Approve / Deny row (hidden unless a call waits) and its handlers; build it inside the page's Blocks."""

    def __init__(self, ui: WebUI) -> None:
        import gradio as gr

        self.ui = ui
        with gr.Row(visible=False, elem_id="approval-row") as row:
            self.reason = gr.Textbox(
                placeholder="Reason for a denial (optional, told to the agent)", show_label=False,
                elem_id="deny-reason", scale=3,
            )  # fmt: skip
            self.approve = gr.Button("✅ Approve", variant="primary", elem_id="approve-btn", size="sm", scale=1)
            self.deny = gr.Button("❌ Deny", variant="stop", elem_id="deny-btn", size="sm", scale=1)
        self.row = row

    def wire(self, chatbot: Any, textbox: Any, state: Any, selector: Any, events: Sequence[Any]) -> None:
        """Connect the buttons, and show or hide the row after each of `events` (turns, clears)."""
        outputs = [chatbot, textbox, state]
        for button, approve in ((self.approve, True), (self.deny, False)):

            async def decide(session: Any, agent_name: Any, reason: str, _approve: bool = approve) -> AsyncIterator:
                async for update in self._decide(session, agent_name, reason, _approve):
                    yield update

            done = button.click(decide, [state, selector, self.reason], outputs, show_progress="hidden")
            done.then(self._visibility, [state], [self.row, self.reason], queue=False)
        for event in events:
            event.then(self._visibility, [state], [self.row, self.reason], queue=False)

    async def _decide(self, session: Any, agent_name: Any, reason: str, approve: bool) -> AsyncIterator[tuple]:
        import gradio as gr

        if not waiting_for_approval(session):
            yield gr.skip(), gr.skip(), session
            return
        session.add_user(to_message(approval_message(approve, "" if approve else (reason or "").strip())))
        async for update in self.ui._turn(session, agent_name):
            yield update

    @staticmethod
    def _visibility(session: Any) -> tuple:
        import gradio as gr

        return gr.Row(visible=waiting_for_approval(session)), gr.Textbox(value="")

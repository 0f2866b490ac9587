"""How blocks, calls waiting for approval and the person's decisions render, and when the Approve / Deny row shows."""

from __future__ import annotations

import asyncio
import json

from chatagent import FnCallAgent, Message, ScriptedLLM, tool, tool_call
from chatagent.gui import WebUI
from chatagent.gui.control import waiting_for_approval
from chatagent.gui.icons import icon
from chatagent.gui.render import message_text, render_message
from chatagent.gui.session import user_message
from chatagent.run.approval import approval_message
from chatagent.schema import to_message


def texts(msg: Message) -> list[str]:
    return [message_text(d) for d in render_message(msg)]


def test_a_blocked_answer_says_by_whom_and_why_escaped() -> None:
    msg = Message("assistant", "No <b>way</b>.", extra={"blocked_by": "pii<x>", "blocked_reason": "an <e-mail>"})
    assert texts(msg) == [f"No &lt;b>way&lt;/b>.\n\n{icon('blocked')} *Blocked by **piix**: an &lt;e-mail>*"]


def test_a_call_waiting_for_approval_shows_the_call_then_the_wait_with_its_arguments() -> None:
    args = '{"disk": "sda"}'
    call = Message("assistant", "", function_call={"name": "wipe", "arguments": args},
                   extra={"function_id": "c1", "pending_approval": [{"id": "c1", "name": "wipe", "arguments": args}]})  # fmt: skip
    views = render_message(call)
    assert views[0]["metadata"]["title"].endswith("wipe") and '"disk": "sda"' in message_text(views[0])
    assert "metadata" not in views[1]  # in view, not folded: the person decides on what it shows
    assert message_text(views[1]) == (
        f"{icon('paused')} *Waiting for your approval to run **wipe**: Approve or Deny below.*\n\n"
        '```json\n{\n  "disk": "sda"\n}\n```'
    )


def test_the_approval_prompt_names_each_of_several_calls_and_shortens_long_arguments() -> None:
    long = json.dumps({"text": "x" * 10_000})
    pending = [
        {"id": "a", "name": "wipe", "arguments": '{"disk": "sda"}'},
        {"id": "b", "name": "note", "arguments": long},
    ]
    shown = message_text(render_message(Message("assistant", "", extra={"pending_approval": pending}))[-1])
    assert "**wipe**\n\n```json" in shown and "**note**\n\n```json" in shown and '"disk": "sda"' in shown
    assert "characters more, in the call's block above" in shown and len(shown) < 9_000


def test_decisions_render_as_the_persons_message() -> None:
    assert texts(to_message(approval_message(True))) == [f"{icon('approved')} Approved."]
    assert texts(to_message(approval_message(False, "not <now>"))) == [f"{icon('denied')} Denied. not &lt;now>"]
    assert texts(to_message(approval_message({"a": True, "b": False}))) == [
        f"{icon('approved')} Approved 1 of 2 calls."
    ]


def test_the_row_shows_only_while_a_call_waits() -> None:
    @tool(requires_approval=True)
    def wipe(disk: str) -> str:
        """Wipe a disk."""
        return "wiped"

    agent = FnCallAgent(function_list=[wipe], llm=ScriptedLLM([tool_call("wipe", {"disk": "a"}), "Done."]))
    ui = WebUI(agent)
    session = ui.new_session()
    assert not waiting_for_approval(session) and not waiting_for_approval(None)
    session.add_user(user_message("wipe a", []))

    async def turn():
        async for _ in session.stream_turn(agent):
            pass

    asyncio.run(turn())
    assert waiting_for_approval(session)
    session.add_user(to_message(approval_message(True)))
    asyncio.run(turn())
    assert not waiting_for_approval(session) and session.history[-1].text == "Done."
    demo = ui.build()
    ids = {getattr(b, "elem_id", None) for b in demo.blocks.values()}
    assert {"approval-row", "approve-btn", "deny-btn", "deny-reason"} <= ids

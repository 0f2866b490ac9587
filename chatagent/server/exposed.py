"""An agent's checks on a direct call of one of its tools (`serve --mcp --expose-tools`): the call is a turn with no
model, whose input is the client's arguments and whose answer is the tool's result, so the agent's plugins see them
as they would see a turn's.

    args = checked_arguments(agent, plugins, args)   # before_run (redaction, forbidden patterns), check_input
    text = checked_result(agent, plugins, text)      # check_text (per-sentence checks), after_run (the answer's)

Either raises `Blocked` as the turn would. A plugin with an `after_model` hook checks what a model wrote, which a
direct call has none of: `unseen_checks` names such plugins, and the MCP server exposes that agent's tools only when
the operator names the agent (`expose_tools=['name']`).
"""

from __future__ import annotations

from typing import Any

import orjson

from chatagent.run.plugin import Blocked, Plugins, plugin_name
from chatagent.schema import ASSISTANT, USER, Message, content_text


def unseen_checks(plugins: Plugins) -> list[str]:
    """The plugins whose output checks cannot see a direct tool call (their `after_model` hooks)."""
    return [plugin_name(p) for p, _ in plugins.each("after_model")]


def checked_arguments(agent: Any, plugins: Plugins, args: dict[str, Any]) -> dict[str, Any]:
    """`args` as the agent's input checks leave them (as a user message of their JSON); Blocked if one trips."""
    text = orjson.dumps(args).decode()
    messages = [Message.unchecked(USER, text)]
    for p, fn in plugins.each("before_run"):
        changed = plugins.call(p, "before_run", fn, agent, messages)
        if changed is not None:
            messages = changed
    for p, fn in plugins.each("check_input"):
        plugins.call(p, "check_input", fn, agent, messages)
    given = content_text(messages[-1].content) if messages else ""
    if given == text:
        return args
    try:
        changed_args = orjson.loads(given)
    except orjson.JSONDecodeError:
        changed_args = None
    if not isinstance(changed_args, dict):
        raise Blocked("the agent's input policy changed these arguments beyond reading: not run")
    return changed_args  # pyright: ignore[reportUnknownVariableType]


def checked_result(agent: Any, plugins: Plugins, text: str) -> str:
    """The tool's result as the agent's output checks leave it (as the answer); Blocked if one trips."""
    for p, fn in plugins.each("check_text"):
        shown = plugins.call(p, "check_text", fn, agent, text)
        if isinstance(shown, str):
            text = shown
    response = [Message.unchecked(ASSISTANT, text)]
    for p, fn in plugins.each("after_run"):
        changed = plugins.call(p, "after_run", fn, agent, response)
        if changed is not None:
            response = changed
    answers = [m for m in response if m.role == ASSISTANT]
    return content_text(answers[-1].content) if answers else ""


__all__ = ["checked_arguments", "checked_result", "unseen_checks"]

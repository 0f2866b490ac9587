"""`chatagent chat --session NAME` resumes a stored conversation; `chatagent sessions` lists, shows and deletes."""

from __future__ import annotations

import json
import signal
import sys
import textwrap
from pathlib import Path

import pytest

from chatagent import BasicAgent, ModelServiceError, ScriptedLLM, Session
from chatagent.cli import main
from chatagent.cli.terminal import chat_loop
from chatagent.sessions import close_stores
from tests.cli.test_cli_command import AGENT_MODULE, Proc
from tests.support import processes


@pytest.fixture(autouse=True)
def _closed_stores():
    yield
    close_stores()


def lines(*items: str):
    it = iter(items)
    return lambda prompt: next(it)


def test_chat_loop_with_a_session_resumes_and_keeps_a_failed_message_for_the_next_turn(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/s.db"
    llm = ScriptedLLM(default=lambda messages, functions: f"seen {len(messages)}")
    chat_loop(BasicAgent(llm=llm), read=lines("one", "/exit"), out=_Out(), session=Session("c", store))
    chat_loop(BasicAgent(llm=llm), read=lines("two", "/exit"), out=_Out(), session=Session("c", store))
    assert [m.text for m in llm.calls[-1].messages] == ["one", "seen 1", "two"]

    failing = BasicAgent(llm=ScriptedLLM([ModelServiceError(400, "refused"), "fine"]))
    out = _Out()
    chat_loop(failing, read=lines("three", "four", "/clear", "/exit"), out=out, session=Session("c", store))
    assert "[error] ModelServiceError" in out.getvalue()
    assert [m.text for m in failing.llm.calls[-1].messages][-3:] == ["seen 3", "three", "four"]  # three was kept
    assert Session("c", store).messages() == []  # /clear cleared the store


class _Out:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, s: str) -> None:
        self.parts.append(s)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def getvalue(self) -> str:
        return "".join(self.parts)


def test_chat_session_survives_the_process_and_sessions_lists_shows_deletes(tmp_path: Path, capsys) -> None:
    agent_file = tmp_path / "my_agent.py"
    agent_file.write_text(textwrap.dedent(AGENT_MODULE))
    store = f"sqlite:///{tmp_path}/sessions.db"
    args = ["chat", "--agent", f"{agent_file}:agent", "--session", "trip", "--store", store]

    def chat(*steps: tuple[str | None, str]) -> str:
        """Run `chatagent chat`: for each step send a line (None: Ctrl-C) and wait for the text that follows; the
        output."""
        proc = Proc(args)
        try:
            proc.read_until("you> ")
            for line, expected in steps:
                if line is None:
                    proc.p.send_signal(signal.SIGINT)
                else:
                    proc.send(line)
                proc.read_until(expected)
            proc.send("/exit")
            assert proc.p.wait(30) == 0
            return proc.out.decode()
        finally:
            proc.close()

    # Ctrl-C stops the second answer: it is stored with what was said, marked interrupted
    chat(("hello", "echo: hello"), ("slow 2000", "w5 "), (None, "[stopped]"))
    stored = Session("trip", store).messages()
    assert [m["content"] for m in stored[:3]] == ["hello", "echo: hello", "slow 2000"]
    assert stored[3]["content"].startswith("w0 w1 ") and stored[3]["extra"] == {"interrupted": True}
    assert "(resuming 'trip': 4 messages so far" in chat(("again", "echo: again"))

    assert main(["sessions", "--store", store]) == 0
    listed = capsys.readouterr().out
    assert listed.startswith("trip\t6 messages\t") and listed.rstrip().endswith("\thello")
    assert main(["sessions", "--store", store, "--show", "trip"]) == 0
    assert "user: again\nassistant: echo: again" in capsys.readouterr().out
    assert main(["sessions", "--store", store, "--delete", "trip"]) == 0
    assert main(["sessions", "--store", store, "--show", "trip"]) == 2
    assert "no session 'trip' for user 'local'" in capsys.readouterr().err
    assert main(["sessions", "--store", "mysql://x/y"]) == 2
    assert "unknown session store URL" in capsys.readouterr().err


def test_gui_auth_must_be_user_and_password(capsys) -> None:
    assert main(["gui", "--auth", "alice", "--port", "1"]) == 2
    assert "expected USER:PASSWORD" in capsys.readouterr().err


def test_the_sessions_command_is_in_the_help() -> None:
    out = processes.run([sys.executable, "-m", "chatagent", "--help"], capture_output=True, text=True, timeout=60)
    assert "sessions" in out.stdout


def test_a_session_resumed_without_file_still_reads_its_files(tmp_path: Path, openai_server) -> None:
    """`chat --session NAME --file F`, then `chat --session NAME` alone: the file came back with the conversation."""
    manual = tmp_path / "manual.txt"
    manual.write_text("The boiler pressure limit is 7 bar.\n\nThe pump pressure limit is 3 bar.", encoding="utf-8")
    openai_server.add("The boiler limit is 7 bar.", "The pump limit is 3 bar.")
    store = f"sqlite:///{tmp_path}/sessions.db"
    common = ["chat", "--server", openai_server.base_url, "--model", "m", "--session", "plant", "--store", store]
    env = {"CHATAGENT_WORKSPACE": str(tmp_path / "ws")}
    for args, question, answer in (
        ([*common, "--file", str(manual)], "What is the boiler pressure limit?", "The boiler limit is 7 bar."),
        (common, "And the pump pressure limit?", "The pump limit is 3 bar."),
    ):
        proc = Proc(args, **env)
        try:
            banner = proc.read_until("you> ")
            proc.send(question)
            proc.read_until(answer)
            proc.send("/exit")
            assert proc.p.wait(30) == 0
        finally:
            proc.close()
    assert "(resuming 'plant': 2 messages so far, with its files manual.txt;" in banner
    resumed = openai_server.chat_requests[1].json["messages"]
    assert "The pump pressure limit is 3 bar." in json.dumps(resumed)  # the stored file was searched again

"""People do not share a code-interpreter session: each browser session and each API conversation has its own.

Issue 19 item 5.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from chatagent.agents.fncall import FnCallAgent
from chatagent.llm.scripted import ScriptedLLM, tool_call
from tests.security.conftest import needs_bwrap

LOOK = "import os\ntry:\n    print(secret)\nexcept NameError:\n    print('no secret')\nprint(sorted(os.listdir('.')))"


def _echo_result(messages: list, functions: list) -> str:
    return "saw: " + messages[-1].text


def _agent(tmp_path: Path, script: list | None = None) -> FnCallAgent:
    llm = ScriptedLLM(script) if script else ScriptedLLM(default=_echo_result)
    cfg = {"name": "code_interpreter", "timeout": 10, "work_dir": str(tmp_path / "w"), "sandbox": "bwrap"}
    agent = FnCallAgent(llm=llm, function_list=[cfg])
    # the operator's own choice: no approval for the interpreter (served runs ask before code otherwise): what these
    # tests attack is the sessions' isolation
    agent.function_map["code_interpreter"].requires_approval = False
    return agent


@needs_bwrap
@pytest.mark.timeout(120)
def test_browser_sessions_do_not_share_variables_or_uploads(tmp_path: Path) -> None:
    pytest.importorskip("gradio")
    from chatagent.gui.session import ChatSession, user_message

    upload = tmp_path / "alice-upload.csv"
    upload.write_text("salary\n100000\n")
    script = [
        tool_call("code_interpreter", {"code": "secret = 'alice'"}), _echo_result,
        tool_call("code_interpreter", {"code": "print(open('alice-upload.csv').read())"}), _echo_result,
        tool_call("code_interpreter", {"code": LOOK}), _echo_result,
    ]  # fmt: skip
    agent = _agent(tmp_path, script)
    alice, bob = ChatSession([agent]), ChatSession([agent])

    async def turn(s: ChatSession, text: str, files: list[str]) -> None:
        s.add_user(user_message(text, files))
        async for _ in s.stream_turn(agent):
            pass

    try:
        asyncio.run(turn(alice, "remember this", []))
        asyncio.run(turn(alice, "and read my file", [str(upload)]))
        assert "100000" in [m for m in alice.history if m.role == "function"][-1].text
        asyncio.run(turn(bob, "what do you see?", []))
        seen = [m for m in bob.history if m.role == "function"][-1].text
        assert "no secret" in seen and "alice" not in seen, seen
        alice.close()
        assert agent.function_map["code_interpreter"].live_sessions() == [bob.session_id]
    finally:
        agent.close()


def _post(url: str, body: dict, headers: dict | None = None) -> dict:
    req = urllib.request.Request(
        url + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer k1", **(headers or {})},
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.load(resp)


def _answer(reply: dict) -> str:
    return reply["choices"][0]["message"]["content"]


@needs_bwrap
@pytest.mark.timeout(120)
def test_api_clients_do_not_share_a_sandbox(tmp_path: Path) -> None:
    from chatagent.server.runner import AgentServer

    writes = "secret = 'client-a'\nopen('a.txt', 'w').write('private')\nprint('stored')"
    script = [
        tool_call("code_interpreter", {"code": writes}), _echo_result,  # request 1: no session named
        tool_call("code_interpreter", {"code": LOOK}), _echo_result,  # request 2: no session named
        tool_call("code_interpreter", {"code": writes}), _echo_result,  # request 3: session 'conv-1'
        tool_call("code_interpreter", {"code": LOOK}), _echo_result,  # request 4: 'conv-1' by header
        tool_call("code_interpreter", {"code": LOOK}), _echo_result,  # request 5: session 'conv-2'
    ]  # fmt: skip
    agent = _agent(tmp_path, script)
    server = AgentServer(agent, "127.0.0.1", 0, api_key="k1").start()
    tool = agent.function_map["code_interpreter"]
    try:
        user = {"model": server.model_name, "messages": [{"role": "user", "content": "go"}]}
        assert "stored" in _answer(_post(server.url, user))
        assert "no secret" in _answer(_post(server.url, user))  # another request: another client, maybe
        deadline = time.monotonic() + 10  # a request without a session gets one that ends with it (just after)
        while tool.live_sessions() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert tool.live_sessions() == []
        assert "stored" in _answer(_post(server.url, {**user, "session_id": "conv-1"}))
        later = _answer(_post(server.url, user, {"X-Session-Id": "conv-1"}))
        assert "client-a" in later and "a.txt" in later  # the same client's named conversation goes on
        other = _answer(_post(server.url, {**user, "session_id": "conv-2"}))
        assert "no secret" in other and "a.txt" not in other
        named = tool.live_sessions()
        assert len(named) == 2 and "conv-1" not in named  # kept, under names scoped by the client's key
    finally:
        server.close()
        agent.close()


@needs_bwrap
def test_a_bad_session_id_is_refused(tmp_path: Path) -> None:
    from chatagent.server.runner import AgentServer

    server = AgentServer(_agent(tmp_path), "127.0.0.1", 0).start()
    try:
        body = {"model": server.model_name, "messages": [{"role": "user", "content": "go"}], "session_id": 5}
        with pytest.raises(urllib.error.HTTPError) as err:
            _post(server.url, body)
        assert err.value.code == 400 and "session_id" in err.value.read().decode()
    finally:
        server.close()


def test_chat_session_ids_are_unguessable_and_new_after_clear() -> None:
    pytest.importorskip("gradio")
    from chatagent.gui.session import ChatSession

    a, b = ChatSession([]), ChatSession([])
    assert a.session_id != b.session_id and len(a.session_id) >= 32
    old = a.session_id
    a.clear()
    assert a.session_id != old


@needs_bwrap
@pytest.mark.timeout(60)
def test_a_group_chats_members_keep_their_tools_state_per_conversation(tmp_path: Path) -> None:
    from chatagent.agents.group_chat import GroupChat

    cfg = {"name": "code_interpreter", "timeout": 10, "sandbox": "bwrap"}
    member = FnCallAgent(
        llm=ScriptedLLM([tool_call("code_interpreter", {"code": "x = 1"}), "done"]), function_list=[cfg], name="coder"
    )
    chat = GroupChat([member], selection="round_robin", max_rounds=1, llm=ScriptedLLM(default="unused"))
    tool = member.function_map["code_interpreter"]
    try:
        chat.run_nonstream([{"role": "user", "content": "go"}], session_id="conv-9")
        assert tool.live_sessions() == ["conv-9"]  # not 'default', shared by every conversation
        chat.close_session("conv-9")
        assert tool.live_sessions() == []
    finally:
        chat.close()

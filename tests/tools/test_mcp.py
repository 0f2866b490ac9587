"""MCP servers as tools, against real MCP servers (tests/support/mcp_servers) over stdio and streamable HTTP."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from chatagent.agents.fncall import FnCallAgent  # noqa: E402
from chatagent.llm.scripted import ScriptedLLM, tool_call  # noqa: E402
from chatagent.schema import ContentItem  # noqa: E402
from chatagent.tools.base import make_tools  # noqa: E402
from chatagent.tools.mcp import MCPServerError, tools_from_config  # noqa: E402
from tests.support import processes  # noqa: E402
from tests.support.processes import alive  # noqa: E402

SERVER = str(Path(__file__).resolve().parents[1] / "support" / "mcp_servers" / "demo_server.py")


def stdio_cfg(**extra: object) -> dict:
    return {"command": sys.executable, "args": [SERVER, "stdio"], "timeout": 3, **extra}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_http(port: int, how: list[str] | None = None) -> subprocess.Popen:
    proc = processes.popen(
        [sys.executable, SERVER, *(how or ["http", str(port)])], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("the MCP HTTP test server did not start")


@pytest.fixture
def http_server() -> Iterator[tuple[int, list[subprocess.Popen]]]:
    port = _free_port()
    procs = [_start_http(port)]
    yield port, procs
    for p in procs:
        p.kill()
        p.wait(5)


@pytest.fixture(scope="module")
def stdio_tools() -> Iterator[dict]:
    tools = make_tools([{"mcpServers": {"demo": stdio_cfg()}}])
    yield tools
    next(iter(tools.values())).close()


@pytest.mark.timeout(60)
def test_every_tool_is_listed_with_its_full_schema(stdio_tools: dict) -> None:
    assert sorted(stdio_tools) == sorted(
        f"demo-{n}"
        for n in ("add", "echo", "fail", "slow", "pid", "picture", "document")
        + ("list_resources", "read_resource", "list_prompts", "get_prompt")
    )
    echo = stdio_tools["demo-echo"].function
    assert echo["description"] == "Repeat a text."
    assert echo["parameters"] == {
        "type": "object",
        "properties": {
            "text": {"title": "Text", "type": "string"},
            "times": {"default": 1, "title": "Times", "type": "integer"},
        },
        "required": ["text"],
        "title": "echoArguments",
    }


@pytest.mark.timeout(60)
def test_calls_map_text_image_and_resource_contents(stdio_tools: dict) -> None:
    assert stdio_tools["demo-add"].call({"a": 2, "b": 40}) == "42"
    assert stdio_tools["demo-echo"].call('{"text": "hi", "times": 3}') == "hi hi hi"
    picture = stdio_tools["demo-picture"].call({})
    assert isinstance(picture, list) and len(picture) == 1 and isinstance(picture[0], ContentItem)
    assert picture[0].image.startswith("data:image/png;base64,iVBORw0KGgo")
    assert (
        stdio_tools["demo-document"].call({})
        == "see the attached notes\n[resource file:///notes.txt]\nremember the milk"
    )


@pytest.mark.timeout(60)
def test_tool_error_and_timeout_become_messages(stdio_tools: dict) -> None:
    err = stdio_tools["demo-fail"].call({"reason": "no"})
    assert err.startswith("Error: demo-fail failed:")
    slow = stdio_tools["demo-slow"].call({"seconds": 30})  # (had it waited, the answer would be the tool's)
    assert slow.startswith("Error: demo-slow did not answer within 3 seconds")
    assert stdio_tools["demo-add"].call({"a": 1, "b": 1}) == "2"  # the session is still usable


@pytest.mark.timeout(90)
def test_server_killed_mid_conversation_then_reconnected() -> None:
    pids: list[int] = []

    def kill_then_call(messages: list, functions: list) -> object:
        pids.append(int(messages[-1].text.split("\n")[1]))  # the result, between its untrusted-data markers
        os.kill(pids[0], signal.SIGKILL)
        time.sleep(0.2)
        return tool_call("demo-add", {"a": 1, "b": 2})

    llm = ScriptedLLM(
        [
            tool_call("demo-pid", {}),
            kill_then_call,
            tool_call("demo-add", {"a": 1, "b": 2}),
            tool_call("demo-pid", {}),
            "Done.",
        ]
    )
    with FnCallAgent(llm=llm, function_list=[{"mcpServers": {"demo": stdio_cfg()}}]) as bot:
        response = bot.run_nonstream([{"role": "user", "content": "go"}])
        results = [m["content"] for m in response if m["role"] == "function"]
        new_pid = int(results[3])
        assert alive(new_pid)
    assert "Error: demo-add failed" in results[1] and "reconnects" in results[1]
    assert results[2] == "3"
    assert new_pid != pids[0]
    assert response[-1]["content"] == "Done."
    deadline = time.monotonic() + 10
    while alive(new_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(new_pid), "closing the agent must end the stdio server"


@pytest.mark.timeout(150)
def test_streamable_http_list_call_error_and_reconnect(http_server: tuple[int, list[subprocess.Popen]]) -> None:
    port, procs = http_server
    url = f"http://127.0.0.1:{port}/mcp"
    # a time limit no healthy call reaches on a loaded machine, and a slow call that does
    tools = make_tools([{"mcpServers": {"remote": {"url": url, "timeout": 10}}}])
    try:
        assert "remote-add" in tools and tools["remote-add"].function["parameters"]["required"] == ["a", "b"]
        assert tools["remote-add"].call({"a": 5, "b": 6}) == "11"
        assert tools["remote-fail"].call({"reason": "x"}).startswith("Error: remote-fail failed:")
        assert tools["remote-slow"].call({"seconds": 60}).startswith("Error: remote-slow did not answer within 10")
        procs[0].kill()
        procs[0].wait(5)
        down = tools["remote-add"].call({"a": 1, "b": 1})
        assert down.startswith("Error: remote-add")
        procs.append(_start_http(port))
        assert tools["remote-add"].call({"a": 1, "b": 1}) == "2"
    finally:
        tools["remote-add"].close()


@pytest.mark.timeout(60)
def test_bad_configs_fail_at_once_with_the_servers_name() -> None:
    with pytest.raises(ValueError, match="'broken'.*'command'"):
        make_tools([{"mcpServers": {"broken": {"args": ["x"]}}}])
    with pytest.raises(MCPServerError, match="'gone'"):
        make_tools([{"mcpServers": {"gone": {"command": sys.executable, "args": ["-c", "pass"], "timeout": 3}}}])
    with pytest.raises(MCPServerError, match="'missing'.*'surely-not-a-command-xyz' was not found"):
        make_tools([{"mcpServers": {"missing": {"command": "surely-not-a-command-xyz"}}}])
    with pytest.raises(MCPServerError, match="'nothere'"):
        make_tools([{"mcpServers": {"nothere": {"url": f"http://127.0.0.1:{_free_port()}/mcp", "connect_timeout": 5}}}])


# ---- under arun: sessions on the caller's loop ------------------------------------------------------------------


@pytest.mark.timeout(90)
def test_under_arun_a_session_lives_on_the_callers_loop_and_ends_with_it() -> None:
    import asyncio

    tools = make_tools([{"mcpServers": {"demo": stdio_cfg()}}])
    try:
        sync_pid = int(tools["demo-pid"].call({}))

        async def main() -> tuple[int, int, str]:
            first = int(await tools["demo-pid"].acall({}))
            second = int(await tools["demo-pid"].acall({}))
            return first, second, await tools["demo-add"].acall({"a": 2, "b": 2})

        first, second, added = asyncio.run(main())
        assert first == second != sync_pid and added == "4"  # one session for this loop, its own server
        deadline = time.monotonic() + 10
        while alive(first) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(first), "the loop's session (and its server) must end when the loop does"
        assert int(tools["demo-pid"].call({})) == sync_pid and alive(sync_pid)  # the synchronous one goes on
    finally:
        tools["demo-add"].close()
    assert _ends(sync_pid)


def _ends(pid: int) -> bool:
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


@pytest.mark.timeout(90)
def test_under_arun_a_deadline_cancels_the_call_and_the_session_goes_on() -> None:
    import asyncio

    from chatagent.errors import RunDeadlineExceeded

    llm = ScriptedLLM([tool_call("demo-slow", {"seconds": 60}), "never"])
    cfg = stdio_cfg(timeout=60)
    with FnCallAgent(llm=llm, function_list=[{"mcpServers": {"demo": cfg}}]) as bot:

        async def main() -> tuple[list, list[str], str]:
            out: list = []
            try:
                async for rsp in bot.arun([{"role": "user", "content": "go"}], deadline=2):
                    out = rsp
            except RunDeadlineExceeded:
                pass
            # awaited on this loop and cancelled: no thread is left waiting for the server's answer
            waiting = [t.name for t in threading.enumerate() if t.name.startswith("tool-")]
            return out, waiting, await bot.function_map["demo-add"].acall({"a": 1, "b": 2})

        out, waiting, after = asyncio.run(main())
    assert waiting == []
    results = [m["content"] for m in out if m["role"] == "function"]
    assert not results or "did not finish within" in results[0]
    assert after == "3"


def test_every_content_kind_becomes_message_content() -> None:
    from mcp.types import (
        AudioContent,
        BlobResourceContents,
        CallToolResult,
        EmbeddedResource,
        ImageContent,
        ResourceLink,
        TextContent,
        TextResourceContents,
    )

    from chatagent.tools.mcp import result_to_content

    def blob(mime: str | None) -> EmbeddedResource:
        return EmbeddedResource(resource=BlobResourceContents(uri="file:///b", blob="QUJD", mime_type=mime))

    mixed = CallToolResult(
        content=[
            TextContent(text="t"),
            ImageContent(data="QUJD", mime_type="image/jpeg"),
            AudioContent(data="QUJD", mime_type=""),
            EmbeddedResource(resource=TextResourceContents(uri="file:///a", text="notes")),
            blob("image/gif"),
            blob(None),
            blob("application/pdf"),
            ResourceLink(uri="file:///l", name="l"),
        ]
    )
    assert result_to_content(mixed) == [
        ContentItem(text="t"),
        ContentItem(image="data:image/jpeg;base64,QUJD"),
        ContentItem(audio="data:audio/wav;base64,QUJD"),
        ContentItem(text="[resource file:///a]\nnotes"),
        ContentItem(image="data:image/gif;base64,QUJD"),
        ContentItem(text="[resource file:///b (binary), not shown]"),
        ContentItem(text="[resource file:///b (application/pdf), not shown]"),
        ContentItem(text="[resource link file:///l]"),
    ]
    assert result_to_content(CallToolResult(content=[TextContent(text="a"), TextContent(text="b")])) == "a\nb"
    assert result_to_content(CallToolResult(content=[], structured_content={"n": 1})) == '{"n": 1}'
    assert result_to_content(CallToolResult(content=[], structured_content={})) == ""


# ---- SSE servers, resources and prompts ------------------------------------------------------------------------


def _start_sse(port: int, path: str = "/sse") -> subprocess.Popen:
    return _start_http(port, ["sse", str(port), path])


@pytest.mark.timeout(150)
def test_sse_servers_list_call_and_reconnect_after_a_restart() -> None:
    port = _free_port()
    procs = [_start_sse(port)]
    try:
        # Qwen-Agent's form: a url ending in /sse, no type
        tools = make_tools([{"mcpServers": {"old": {"url": f"http://127.0.0.1:{port}/sse", "timeout": 10}}}])
        assert tools["old-add"].call({"a": 2, "b": 3}) == "5"
        assert tools["old-fail"].call({"reason": "x"}).startswith("Error: old-fail failed:")
        procs[0].kill()
        procs[0].wait(5)
        assert tools["old-add"].call({"a": 1, "b": 1}).startswith("Error: old-add")
        procs.append(_start_sse(port))
        assert tools["old-add"].call({"a": 1, "b": 1}) == "2"  # the next call reconnected
        tools["old-add"].close()
        explicit = make_tools([{"mcpServers": {"typed": {"url": f"http://127.0.0.1:{port}/sse", "type": "sse"}}}])
        assert explicit["typed-echo"].call({"text": "hi", "times": 2}) == "hi hi"
        explicit["typed-echo"].close()
    finally:
        for p in procs:
            p.kill()
            p.wait(5)


@pytest.mark.timeout(120)
def test_a_server_that_refuses_streamable_http_is_reached_over_sse() -> None:
    port = _free_port()
    proc = _start_sse(port, "/events")
    try:
        tools = make_tools([{"mcpServers": {"s": {"url": f"http://127.0.0.1:{port}/events", "timeout": 10}}}])
        assert tools["s-add"].call({"a": 20, "b": 22}) == "42"
        assert tools["s-add"].connection.kind == "sse"
        tools["s-add"].close()
        with pytest.raises(ValueError, match="'type' must be 'sse' or 'streamable-http'"):
            make_tools([{"mcpServers": {"bad": {"url": f"http://127.0.0.1:{port}/events", "type": "websocket"}}}])
    finally:
        proc.kill()
        proc.wait(5)


@pytest.mark.timeout(90)
def test_resources_and_prompts_become_tools_and_can_be_read_from_code(stdio_tools: dict) -> None:
    listed = stdio_tools["demo-list_resources"].call({})
    assert "notes://today  today: Today's notes." in listed and "notes://logo" in listed
    assert (
        stdio_tools["demo-read_resource"].call({"uri": "notes://today"})
        == "[resource notes://today]\nbuy milk; call Ann"
    )
    logo = stdio_tools["demo-read_resource"].call({"uri": "notes://logo"})
    assert isinstance(logo, list) and logo[0].image.startswith("data:image/png;base64,")
    assert stdio_tools["demo-read_resource"].call({"uri": "notes://nope"}).startswith("Error: demo-read_resource")
    assert "summarise(topic, words?): Ask for a summary of a topic." in stdio_tools["demo-list_prompts"].call({})
    got = stdio_tools["demo-get_prompt"].call({"name": "summarise", "arguments": {"topic": "MCP", "words": "9"}})
    assert got == "[user] Summarise MCP in at most 9 words."
    conn = stdio_tools["demo-add"].connection
    assert [r.name for r in conn.list_resources()] == ["today", "logo"]
    assert conn.get_prompt("summarise", {"topic": "x"}).messages[0].content.text == "Summarise x in at most 50 words."


def test_an_older_mcp_server_starts_with_one_line_of_noise_at_most(capfd: pytest.CaptureFixture[str]) -> None:
    """A server on mcp 1.x printed pydantic's ~95-line report on our newer handshake (server/discover) at every
    start; now that report is one line, and what else the server prints still shows."""
    old_server = str(Path(SERVER).with_name("mcp1_server.py"))
    tools = tools_from_config({"mcpServers": {"old": {"command": sys.executable, "args": [old_server]}}})
    try:
        assert [t.name for t in tools] == ["old-add"]
        assert tools[0].call({"a": 2, "b": 3}) == "5"
    finally:
        for t in tools:
            t.close()
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    about_the_handshake = [line for line in lines if "Processing request" not in line]
    assert len(about_the_handshake) <= 1, err
    assert "MCP server 'old' runs an older MCP" in err and "validation error" not in err
    assert "Processing request of type CallToolRequest" in err  # the server's own lines pass

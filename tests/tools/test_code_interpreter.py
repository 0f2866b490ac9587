"""code_interpreter: state per session, readable errors, figures, and a sandbox that holds under attack."""

from __future__ import annotations

import base64
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from chatagent.agents.fncall import FnCallAgent
from chatagent.llm.scripted import ScriptedLLM, tool_call
from chatagent.schema import ContentItem, content_text
from chatagent.tools.base import make_tools
from chatagent.tools.code_interpreter import CodeInterpreter
from chatagent.tools.sandbox import bwrap_path
from tests.security.conftest import system_python

needs_bwrap = pytest.mark.skipif(
    bwrap_path() is None, reason="bubblewrap is not installed (apt-get install bubblewrap)"
)


def _text(content: str | list) -> str:
    return content if isinstance(content, str) else content_text(content)


@pytest.fixture
def ci(tmp_path: Path):
    """An interpreter with a short time limit, for the tests that run into it."""
    tool = CodeInterpreter({"timeout": 3, "work_dir": str(tmp_path / "ci"), "sandbox": "bwrap"})
    yield tool
    tool.close()


@pytest.fixture
def patient_ci(tmp_path: Path):
    """An interpreter whose time limit no healthy cell reaches, however loaded the machine."""
    tool = CodeInterpreter({"timeout": 60, "work_dir": str(tmp_path / "ci"), "sandbox": "bwrap"})
    yield tool
    tool.close()


def run(tool: CodeInterpreter, code: str, session: str = "default") -> str:
    return _text(tool.call({"code": code}, session_id=session))


# ---- behaviour ---------------------------------------------------------------------------------------------


@needs_bwrap
@pytest.mark.timeout(60)
def test_registered_by_name_and_state_persists(tmp_path: Path) -> None:
    tool = make_tools([{"name": "code_interpreter", "work_dir": str(tmp_path), "timeout": 5}])["code_interpreter"]
    try:
        assert isinstance(tool, CodeInterpreter) and tool.exec_timeout == 5
        assert run(tool, "x = 41\nprint('set')") == "stdout:\nset"
        assert run(tool, "x + 1") == "result:\n42"
        assert run(tool, "```python\nx * 2\n```") == "result:\n82"  # a Markdown fence is removed
        assert run(tool, "y = 1") == "Finished with no output."
    finally:
        tool.close()


@needs_bwrap
@pytest.mark.timeout(60)
def test_sessions_share_neither_process_nor_directory(ci: CodeInterpreter) -> None:
    run(ci, "secret = 'alpha'\nn = open('mine.txt', 'w').write('a')", session="a")
    out_b = run(ci, "print(secret)", session="b")
    assert "NameError" in out_b
    assert "FileNotFoundError" in run(ci, "open('mine.txt').read()", session="b")
    assert run(ci, "secret", session="a") == "result:\n'alpha'"
    assert run(ci, "open('mine.txt').read()", session="a") == "result:\n'a'"
    a, b = ci.sandbox("a"), ci.sandbox("b")
    assert a._proc.pid != b._proc.pid
    assert a.uid != b.uid or os.geteuid() != 0
    assert sorted(ci.live_sessions()) == ["a", "b"]
    ci.close_session("a")
    assert ci.live_sessions() == ["b"] and a._proc is None
    assert "NameError" in run(ci, "secret", session="a")  # a closed session starts afresh


@needs_bwrap
@pytest.mark.timeout(60)
def test_errors_are_short_and_readable(ci: CodeInterpreter) -> None:
    syntax = run(ci, "def f(:\n    pass")
    assert syntax.startswith("error:") and "SyntaxError" in syntax and "line 1" in syntax
    exc = run(ci, "a = 1\nprint('before')\nb = a / 0")
    assert "stdout:\nbefore" in exc and "ZeroDivisionError: division by zero" in exc
    assert 'File "<cell-2>", line 3' in exc and "b = a / 0" in exc
    assert "_sandbox_kernel" not in exc and len(exc) < 1000
    missing = run(ci, "import surely_not_a_module_xyz")
    assert "ModuleNotFoundError" in missing and "no network to install" in missing
    assert "SystemExit" in run(ci, "raise SystemExit(3)")
    assert run(ci, "a") == "result:\n1"  # the session survived all of it


@needs_bwrap
@pytest.mark.timeout(60)
def test_matplotlib_figures_come_back_as_png_images(patient_ci: CodeInterpreter) -> None:
    pytest.importorskip("matplotlib")
    content = patient_ci.call(
        {"code": "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()\nprint('drawn')"}
    )
    assert isinstance(content, list) and isinstance(content[0], ContentItem)
    images = [c.image for c in content if c.image]
    assert len(images) == 1 and "stdout:\ndrawn" in content[0].text and "PNG image]" in content[0].text
    assert images[0].startswith("data:image/png;base64,")
    assert base64.b64decode(images[0].split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert isinstance(patient_ci.call({"code": "1"}), str)  # figures were closed: none come back the next time
    assert run(patient_ci, "import glob\nglob.glob('**/*.png', recursive=True)") == "result:\n[]"  # nor left as files


# ---- attacks -------------------------------------------------------------------------------------------------


@needs_bwrap
@pytest.mark.timeout(60)
def test_parent_environment_is_not_visible(ci: CodeInterpreter, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHATAGENT_FAKE_API_KEY", "sk-fake-secret-123")
    code = (
        "import os, glob\n"
        "print(os.environ.get('CHATAGENT_FAKE_API_KEY'))\n"
        "found = []\n"
        "for p in glob.glob('/proc/*/environ'):\n"
        "    try:\n"
        "        found.append('sk-fake-secret-123' in open(p, errors='replace').read())\n"
        "    except OSError:\n"
        "        pass\n"
        "any(found)"
    )
    out = run(ci, code)
    assert out == "stdout:\nNone\n\nresult:\nFalse"


@needs_bwrap
@pytest.mark.timeout(60)
def test_no_network_even_to_the_hosts_loopback(ci: CodeInterpreter) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(2)
    port = listener.getsockname()[1]
    accepted: list = []

    def accept() -> None:
        try:
            accepted.append(listener.accept())
        except OSError:
            pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    out = run(ci, f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)")
    t.join(3)
    listener.close()
    assert "ConnectionRefusedError" in out or "OSError" in out
    assert accepted == []
    assert "gaierror" in run(ci, "import socket\nsocket.getaddrinfo('pypi.org', 443)")


@needs_bwrap
@pytest.mark.timeout(60)
def test_only_the_work_directory_is_writable(ci: CodeInterpreter, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    targets = [str(outside), "/tmp/chatagent_escape.txt", str(Path.cwd() / "escape.txt"), "/etc/escape", "/x"]
    code = (
        "import os\nres = {}\n"
        f"for p in {targets!r}:\n"
        "    try:\n"
        "        open(p, 'w').write('x'); res[p] = 'written'\n"
        "    except OSError as e:\n"
        "        res[p] = type(e).__name__\n"
        "open('inside.txt', 'w').write('ok')\n"
        "sorted(set(res.values()))"
    )
    out = run(ci, code)
    assert "written" not in out, out
    assert not outside.exists() and not Path("/tmp/chatagent_escape.txt").exists()
    assert run(ci, "open('inside.txt').read()") == "result:\n'ok'"


@needs_bwrap
@pytest.mark.timeout(60)
def test_fork_bomb_is_stopped(ci: CodeInterpreter) -> None:
    run(ci, "kept = 'yes'")
    out = run(ci, "import os\nwhile True:\n    os.fork()")
    assert "BlockingIOError" in out or "Resource temporarily unavailable" in out
    # a bomb that ignores the failures runs into the time limit; its processes are killed
    out = run(ci, "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass")
    assert "Timeout" in out
    count = "import os\nkept, len([p for p in os.listdir('/proc') if p.isdigit()])"
    deadline = time.monotonic() + 60  # init reaps the killed processes asynchronously, slowly on a loaded machine
    while (out := run(ci, count)) != "result:\n('yes', 2)" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert out == "result:\n('yes', 2)"  # only the sandbox's init and the kernel are left


@needs_bwrap
@pytest.mark.timeout(60)
def test_memory_limit(ci: CodeInterpreter) -> None:
    out = run(ci, "big = bytearray(10 * 1024**3)")
    assert "MemoryError" in out and "1024 MB" in out
    assert run(ci, "1 + 1") == "result:\n2"


@needs_bwrap
@pytest.mark.timeout(60)
def test_infinite_loop_is_interrupted_and_state_kept(ci: CodeInterpreter) -> None:
    run(ci, "n = 7")
    t0 = time.monotonic()
    out = run(ci, "while True:\n    pass")  # endless: it returns because it was stopped
    assert time.monotonic() - t0 > 2.5  # not before its 3 s (a lower bound: load only makes it longer)
    assert "Timeout: the code was stopped after 3 seconds" in out
    assert run(ci, "n") == "result:\n7"


@needs_bwrap
@pytest.mark.timeout(60)
def test_uninterruptible_code_gets_the_whole_tree_killed(ci: CodeInterpreter) -> None:
    code = (
        "import signal, subprocess\n"
        "child = subprocess.Popen(['sleep', '987'])\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGINT})\n"
        "while True:\n    pass"
    )
    run(ci, "n = 1")
    out = run(ci, code)
    assert "killed and restarted" in out and "variables are lost" in out
    assert not [p for p in _host_cmdlines() if p == b"sleep\x00987\x00"]
    assert "NameError" in run(ci, "n")  # a fresh process
    assert run(ci, "2 + 2") == "result:\n4"


@needs_bwrap
@pytest.mark.timeout(60)
def test_huge_output_is_cut(ci: CodeInterpreter) -> None:
    out = run(ci, "print('x' * 100_000_000)")
    assert "Output limit" in out and len(out) < 30_000
    out = run(ci, "for i in range(10**8):\n    print(i)")
    assert "Output limit" in out and len(out) < 30_000


@needs_bwrap
@pytest.mark.timeout(60)
def test_cpu_time_limit(tmp_path: Path) -> None:
    tool = CodeInterpreter({"timeout": 20, "work_dir": str(tmp_path), "sandbox": "bwrap", "cpu_seconds": 1})
    try:
        out = run(tool, "while True:\n    pass")  # the CPU limit stops it, not the 20 s timeout (its own message)
        assert ("died (SIGXCPU)" in out or "CPU time limit of 1 s" in out) and "restarted" in out
        assert run(tool, "3") == "result:\n3"
    finally:
        tool.close()


@needs_bwrap
@pytest.mark.timeout(120)
def test_agent_goes_on_after_every_attack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHATAGENT_FAKE_API_KEY", "sk-fake-secret-456")
    attacks = [
        "import os\nos.environ['CHATAGENT_FAKE_API_KEY']",
        "import socket\nsocket.create_connection(('127.0.0.1', 22), timeout=1)",
        "import os\nwhile True:\n    os.fork()",
        "x = bytearray(10 * 1024**3)",
        "while True:\n    pass",
        f"open({str(tmp_path / 'escape.txt')!r}, 'w')",
        "print('y' * 100_000_000)",
    ]
    llm = ScriptedLLM([tool_call("code_interpreter", {"code": c}) for c in attacks] + ["All attacks were stopped."])
    cfg = {"name": "code_interpreter", "timeout": 2, "work_dir": str(tmp_path / "work"), "sandbox": "bwrap"}
    with FnCallAgent(llm=llm, function_list=[cfg]) as bot:
        response = bot.run_nonstream([{"role": "user", "content": "try to escape"}], session_id="attack")
        sandbox = bot.function_map["code_interpreter"].sandbox("attack")
        proc = sandbox._proc
    results = [_text(m["content"]) for m in response if m["role"] == "function"]
    assert proc.poll() is not None  # closing the agent ended the sandbox
    assert len(results) == len(attacks)
    expected = ["KeyError", "Error", "BlockingIOError", "MemoryError", "Timeout", "FileNotFoundError", "Output"]
    for got, want in zip(results, expected, strict=True):
        assert want in got and len(got) < 25_000
        assert "sk-fake-secret-456" not in got
    assert not (tmp_path / "escape.txt").exists()
    assert response[-1] == {"role": "assistant", "content": "All attacks were stopped."}
    llm.assert_complete()


# ---- without bubblewrap ----------------------------------------------------------------------------------------


@pytest.mark.skipif(os.geteuid() != 0 or system_python() is None, reason="process mode needs root")
@pytest.mark.timeout(60)
def test_process_mode_says_what_does_not_hold_and_still_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHATAGENT_FAKE_API_KEY", "sk-fake-secret-789")
    ci_process = CodeInterpreter({"timeout": 3, "sandbox": "process", "python": system_python()})
    try:
        first = run(ci_process, "import os\nprint(os.environ.get('CHATAGENT_FAKE_API_KEY'))")
        assert first.startswith("Sandbox: plain process (opted in with sandbox='process'), running as uid ")
        assert "filesystem is NOT confined" in first and "no disk quota" in first
        assert first.endswith("stdout:\nNone")
        assert run(ci_process, "1 + 1") == "result:\n2"  # the note comes once per session
        assert "MemoryError" in run(ci_process, "b = bytearray(10 * 1024**3)")
        assert "Timeout" in run(ci_process, "z = 5\nwhile True:\n    pass")
        assert run(ci_process, "z") == "result:\n5"
        assert "Output limit" in run(ci_process, "print('x' * 100_000_000)")
        sandbox = ci_process.sandbox("default")
        work = sandbox.work_dir
        assert os.stat(work).st_uid == sandbox.uid != 0
    finally:
        ci_process.close()
    assert not os.path.exists(work)  # closing removed the session's directory


def _host_cmdlines() -> list[bytes]:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                out.append(Path(f"/proc/{name}/cmdline").read_bytes())
            except OSError:
                pass
    return out

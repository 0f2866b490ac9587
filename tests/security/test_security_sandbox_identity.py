"""Who the sandboxed code runs as: never root, never the agent's user, never a uid another live session has.

Issue 19 item 2 and issue 16 item 9.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from chatagent.tools.code_interpreter import CodeInterpreter
from chatagent.tools.sandbox import bwrap_path
from tests.security.conftest import needs_bwrap, needs_root, needs_system_python, run, system_python
from tests.support import processes

WHO = (
    "import os\n"
    "def peek(p):\n"
    "    try:\n"
    "        return open(p, 'rb').read(64)\n"
    "    except OSError as e:\n"
    "        return type(e).__name__\n"
    "print('uid', os.getuid(), os.geteuid())\n"
    "print('shadow', peek('/etc/shadow'))\n"
    "print('parent', peek(f'/proc/{os.getppid()}/environ'))\n"
    "print('agent', peek('/proc/{agent}/environ'))\n"
)


def _who(tool: CodeInterpreter, session: str = "who") -> str:
    return run(tool, WHO.replace("{agent}", str(os.getpid())), session=session)


def _assert_unprivileged(out: str) -> None:
    assert "uid " in out, out
    uids = out.split("uid ", 1)[1].split("\n", 1)[0].split()
    assert "0" not in uids and str(os.getuid()) not in uids, out
    shadow = Path("/etc/shadow").read_bytes()[:16] if os.access("/etc/shadow", os.R_OK) else b"root:"
    assert repr(shadow)[2:-1] not in out and "sk-fake-agent-key" not in out, out


@needs_bwrap
@needs_root
@pytest.mark.timeout(60)
def test_bubblewrap_code_runs_as_its_own_uid(ci: CodeInterpreter, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHATAGENT_TEST_KEY", "sk-fake-agent-key")
    _assert_unprivileged(_who(ci))


@needs_root
@needs_system_python
@pytest.mark.timeout(60)
def test_process_mode_runs_as_its_own_uid_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHATAGENT_TEST_KEY", "sk-fake-agent-key")
    tool = CodeInterpreter({"timeout": 5, "sandbox": "process", "python": system_python()})
    try:
        _assert_unprivileged(_who(tool))
    finally:
        tool.close()


@needs_root
@pytest.mark.timeout(60)
def test_process_mode_never_falls_back_to_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An interpreter other users cannot run (this venv's, say, under /root) once made process mode run the
    model's code as root."""
    monkeypatch.setenv("CHATAGENT_TEST_KEY", "sk-fake-agent-key")
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    os.chmod(private, 0o700)
    python = private / "python3"
    python.symlink_to(os.path.realpath(sys.executable))  # a symlink others cannot reach
    tool = CodeInterpreter({"timeout": 5, "sandbox": "process", "python": str(python)})
    try:
        try:
            out = _who(tool)
        except Exception as e:  # refusing is right; running as root is not
            out = f"{type(e).__name__}: {e}"
        assert "uid 0" not in out
        assert re.search(r"uid \d", out) or "bubblewrap" in out, out
        if re.search(r"uid \d", out):
            _assert_unprivileged(out)
    finally:
        tool.close()


@pytest.mark.timeout(60)
def test_auto_refuses_when_bubblewrap_cannot_make_a_sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """bubblewrap installed but unable to create namespaces (as in a default Docker container): 'auto' once fell
    back to an unconfined process, as root, with only a log line to show it."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    os.chmod(fake / "bwrap", 0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    monkeypatch.setenv("CHATAGENT_TEST_KEY", "sk-fake-agent-key")
    tool = CodeInterpreter({"timeout": 5, "work_dir": str(tmp_path / "w")})  # sandbox: 'auto', the default
    try:
        try:
            out = _who(tool)
        except Exception as e:
            out = f"{type(e).__name__}: {e}"
        assert not re.search(r"uid \d", out), "model code ran without a sandbox"
        assert "No permissions to create new namespace" in out
        assert "apt-get install bubblewrap" in out and "'sandbox': 'process'" in out
    finally:
        tool.close()


@needs_bwrap
@needs_root
@pytest.mark.timeout(120)
def test_a_session_cannot_reach_another_sessions_processes_or_files(tmp_path: Path) -> None:
    """Uids once repeated every 1000 sandboxes of a process: the 1001st read session 1's directory and, when
    closed, killed session 1's processes. Here many sessions come and go while session 1 lives."""
    tool = CodeInterpreter({"timeout": 5, "work_dir": str(tmp_path / "w"), "sandbox": "bwrap", "max_sessions": 2})
    try:
        assert (
            run(tool, "secret = 'one'\nn = open('mine.txt', 'w').write('one')", session="one")
            == "Finished with no output."
        )
        first_uid = tool.sandbox("one").uid
        uids = {first_uid}
        for i in range(3):
            run(tool, "import os\nprint(os.getuid())", session=f"other-{i}")
            uids.add(tool.sandbox(f"other-{i}").uid)
            tool.close_session(f"other-{i}")
            assert run(tool, "secret", session="one") == "result:\n'one'"
        assert len(uids) == 4
    finally:
        tool.close()


@needs_root
def test_uid_leases_are_unique_within_and_across_processes(tmp_path: Path) -> None:
    from chatagent.tools._sandbox_uids import lease_uid

    mine = [lease_uid() for _ in range(1100)]
    try:
        assert len({lease.uid for lease in mine}) == 1100
        script = textwrap.dedent(
            """
            import sys
            from chatagent.tools._sandbox_uids import lease_uid
            leases = [lease_uid() for _ in range(300)]
            print(' '.join(str(l.uid) for l in leases), flush=True)
            sys.stdin.read()
            """
        )
        procs = [
            processes.popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            for _ in range(2)
        ]
        try:
            theirs = [set(map(int, p.stdout.readline().split())) for p in procs]  # type: ignore[union-attr]
        finally:
            for p in procs:
                p.communicate("", timeout=30)
        assert all(len(t) == 300 for t in theirs)
        assert not theirs[0] & theirs[1] and not (theirs[0] | theirs[1]) & {lease.uid for lease in mine}
    finally:
        for lease in mine:
            lease.release()


def _agent_script(tmp_path: Path, mode: str) -> str:
    cfg = {"timeout": 60, "sandbox": mode, "python": system_python() if mode == "process" else None}
    return textwrap.dedent(
        f"""
        from chatagent.tools.code_interpreter import CodeInterpreter
        tool = CodeInterpreter({cfg!r})
        tool.sandbox().start()
        open({str(tmp_path / "uid")!r}, "w").write(str(tool.sandbox().uid))
        tool.call({{"code": "import subprocess, time\\nsubprocess.Popen(['sleep', '9731'])\\n"
                              "open('started', 'w').write('x')\\ntime.sleep(120)"}})
        """
    )


def _sleepers() -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if Path(f"/proc/{name}/cmdline").read_bytes() == b"sleep\x009731\x00":
                    found.append(int(name))
            except OSError:
                pass
    return found


@needs_root
@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["bwrap", "process"])
def test_a_killed_agent_leaves_no_sandbox_process_behind(tmp_path: Path, mode: str) -> None:
    if mode == "bwrap" and bwrap_path() is None:
        pytest.skip("bubblewrap is not installed")
    if mode == "process" and system_python() is None:
        pytest.skip("no interpreter all users can run")
    from chatagent.tools._sandbox_uids import state_dir

    agent = processes.popen([sys.executable, "-c", _agent_script(tmp_path, mode)])
    try:
        deadline = time.monotonic() + 60
        while not _sleepers() and time.monotonic() < deadline and agent.poll() is None:
            time.sleep(0.05)
        assert _sleepers(), "the cell did not start"
        agent.send_signal(signal.SIGKILL)
        agent.wait(10)
        deadline = time.monotonic() + 15
        while _sleepers() and time.monotonic() < deadline:
            time.sleep(0.05)
        left = _sleepers()
    finally:
        for pid in _sleepers():
            os.kill(pid, signal.SIGKILL)
        if agent.poll() is None:
            agent.kill()
    assert not left, "a background process of the killed agent's sandbox is still running"
    # what it left (its uid's lease, cgroups, and in process mode its work directory) goes with the next agent
    uid = (tmp_path / "uid").read_text()
    lease = Path(state_dir(), uid)
    try:
        recorded = lease.read_text()
        assert bool(recorded) == (mode == "process") and (not recorded or os.path.isdir(recorded))
    except FileNotFoundError:  # another process on this machine swept it first
        recorded = ""
    next_agent = "from chatagent.tools._sandbox_uids import lease_uid\nlease_uid().release()"
    processes.run([sys.executable, "-c", next_agent], check=True, timeout=60)
    assert not lease.exists()
    assert not recorded or not os.path.exists(recorded)
    assert not list(Path("/sys/fs/cgroup").glob(f"**/chatagent-sandbox-{uid}"))


NOBODY_SCRIPT = """
import json, os
from chatagent.tools.code_interpreter import CodeInterpreter
tool = CodeInterpreter({"timeout": 20, "max_disk_mb": 10, "cpu_seconds": 3})
out = {}
out["who"] = tool.call({"code": "import os\\nprint(os.getuid(), os.getcwd())"})
out["disk"] = tool.call({"code": "try:\\n    open('big', 'wb').write(b'x' * 20_000_000)\\nexcept OSError as e:\\n    print(e)"})
out["bg"] = tool.call({"code": "import subprocess\\np = subprocess.Popen(['sleep', '9751'])"})
out["procs"] = tool.call({"code": "import os\\nlen([p for p in os.listdir('/proc') if p.isdigit()])"})
child = "import time\\nwhile time.process_time() < 10:\\n    pass"
burn = "import subprocess, sys\\nps = [subprocess.Popen([sys.executable, '-c', %r]) for _ in range(3)]\\nfor p in ps:\\n    p.wait()" % child
out["cpu"] = tool.call({"code": burn})
out["isolation"] = tool.isolation
tool.close()
print(json.dumps(out))
"""


@needs_bwrap
@needs_root
@pytest.mark.timeout(120)
def test_without_root_bubblewrap_isolates_in_a_user_namespace(tmp_path: Path) -> None:
    """As an ordinary user (here: nobody) the sandbox cannot have a uid of its own: it runs in a user namespace,
    with the same private work directory, quota, process and CPU limits (by accounting: no cgroup)."""
    import json
    import shutil

    import orjson

    python = system_python()
    setpriv = shutil.which("setpriv")
    site = str(Path(orjson.__file__).parents[1])
    repo = str(Path(__file__).resolve().parents[2])
    if python is None or setpriv is None:
        pytest.skip("needs setpriv and an interpreter every user can run")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": f"{repo}:{site}"}
    as_nobody = [setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups", "--", python]
    probe = processes.run([*as_nobody, "-c", "import chatagent.tools.code_interpreter"], env=env, capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"nobody cannot import chatagent here: {probe.stderr.decode()[-200:]}")
    os.chmod(tmp_path, 0o777)
    done = processes.run([*as_nobody, "-c", NOBODY_SCRIPT], env=env, capture_output=True, cwd=tmp_path, timeout=100)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    out = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert out["who"] == "stdout:\n65534 /sandbox"
    assert "No space left on device" in out["disk"]
    assert out["procs"] == "result:\n2"
    assert "CPU time limit of 3 s" in out["cpu"], out["cpu"]
    assert "user namespace" in out["isolation"] and "checked every 0.2 s" in out["isolation"]

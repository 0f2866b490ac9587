"""Limits hold per session, not per process: memory, CPU time, processes left running, disk. Issue 19 item 4."""

from __future__ import annotations

import os
import threading
import time
import uuid
from pathlib import Path

import pytest

from chatagent.tools import _sandbox_limits
from chatagent.tools.code_interpreter import CodeInterpreter
from chatagent.tools.sandbox import bwrap_path
from tests.security.conftest import needs_bwrap, run, system_python

CHILDREN = (
    "import subprocess, sys\n"
    "procs = [subprocess.Popen([sys.executable, '-c', CHILD, str(i)]) for i in range({n})]\n"
    "for p in procs:\n"
    "    p.wait()\n"
)


def _children(child: str, n: int) -> str:
    return f"CHILD = {child!r}\n" + CHILDREN.format(n=n)


@pytest.fixture(params=["cgroup", "accounting"])
def enforcement(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways a session's memory and CPU are limited: by a cgroup (where the kernel lets us make one, as
    here when root) and by accounting over /proc (as where it does not: no cgroup is made)."""
    if request.param == "accounting":
        monkeypatch.setattr(_sandbox_limits, "_own_cgroup_dirs", dict)
    elif os.geteuid() != 0:
        pytest.skip("cgroups are made only as root")
    return request.param


@pytest.fixture(params=["bwrap", "process"])
def mode(request: pytest.FixtureRequest) -> str:
    """Both sandbox modes (process mode needs root and an interpreter every user can run)."""
    if request.param == "bwrap" and bwrap_path() is None:
        pytest.skip("bubblewrap is not installed")
    if request.param == "process" and (os.geteuid() != 0 or system_python() is None):
        pytest.skip("process mode needs root and an interpreter every user can run")
    return request.param


def _tool(tmp_path: Path, mode: str = "bwrap", **cfg: object) -> CodeInterpreter:
    if mode == "process":
        return CodeInterpreter({"timeout": 40, "sandbox": "process", "python": system_python(), **cfg})
    return CodeInterpreter({"timeout": 40, "work_dir": str(tmp_path / "w"), "sandbox": "bwrap", **cfg})


@pytest.mark.timeout(120)
def test_memory_is_limited_for_the_session_as_a_whole(tmp_path: Path, mode: str, enforcement: str) -> None:
    """memory_mb=300 and six processes of 180 MB each: once, each process was allowed its own 300 MB."""
    child = (
        "import sys, time\n"
        "block = b'\\x01' * (180 * 1024 * 1024)\n"
        "time.sleep(4)\n"
        "open(f'alive-{sys.argv[1]}', 'w').write('x')\n"
    )
    tool = _tool(tmp_path, mode, memory_mb=300)
    try:
        out = run(tool, _children(child, 6), session="m")
        how = "enforced by a cgroup" if enforcement == "cgroup" else "checked every 0.2 s"
        assert f"300 MB of memory for the session ({how})" in tool.isolation
        if enforcement == "accounting":
            assert "memory limit of 300 MB" in out, out
        survivors = run(tool, "import glob\nlen(glob.glob('alive-*'))", session="m")
        assert survivors in ("result:\n0", "result:\n1"), survivors
    finally:
        tool.close()


@pytest.mark.timeout(180)
def test_cpu_time_is_limited_for_the_session_as_a_whole(tmp_path: Path, mode: str, enforcement: str) -> None:
    """cpu_seconds=3 and four processes that each want 10 s: once, each process had its own 3 s (12 s in all).
    What the processes used is watched from outside, in /proc, every 10 ms until they are gone."""
    marker = f"cpu-burner-{uuid.uuid4().hex}"  # this test's processes only, not another suite's on the machine
    child = f"import time  # {marker}\nwhile time.process_time() < 10:\n    pass\n"
    tool = _tool(tmp_path, mode, cpu_seconds=3)
    seen: dict[int, float] = {}
    stop = threading.Event()
    watcher = threading.Thread(target=_watch_cpu, args=(marker.encode(), seen, stop), daemon=True)
    watcher.start()
    try:
        out = run(tool, _children(child, 4), session="c")
    finally:
        tool.close()
        stop.set()
        watcher.join(10)
    used = sum(seen.values())
    assert len(seen) == 4, f"saw {len(seen)} of the 4 processes"
    assert used < 3 + 2.5, f"the session's processes used {used:.1f} s of CPU with a limit of 3 s"
    assert "CPU" in out, out


def _watch_cpu(marker: bytes, seen: dict[int, float], stop: threading.Event) -> None:
    """Record the CPU seconds of every process whose command line holds `marker`, until `stop`."""
    tick = os.sysconf("SC_CLK_TCK")
    while not stop.is_set():
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                if marker not in Path(f"/proc/{name}/cmdline").read_bytes():
                    continue
                fields = Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            used = (int(fields[11]) + int(fields[12])) / tick
            seen[int(name)] = max(seen.get(int(name), 0.0), used)
        stop.wait(0.01)


def _processes_named(cmdline: bytes) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if Path(f"/proc/{name}/cmdline").read_bytes() == cmdline:
                    found.append(int(name))
            except OSError:
                pass
    return found


def _gone(cmdline: bytes, wait: float = 5.0) -> bool:
    deadline = time.monotonic() + wait
    while _processes_named(cmdline) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _processes_named(cmdline)


@pytest.mark.timeout(60)
def test_processes_a_call_started_end_with_it_unless_kept(tmp_path: Path, mode: str) -> None:
    tool = _tool(tmp_path, mode)
    kept = _tool(tmp_path / "kept", mode, keep_processes=True)
    try:
        code = "import subprocess, sys\na = subprocess.Popen(['sleep', '{n}'])\nb = subprocess.Popen([sys.executable, '-c', 'while 1: pass'])"
        assert run(tool, code.format(n=9741), session="bg").endswith("Finished with no output.")
        assert _gone(b"sleep\x009741\x00"), "a process the call started is still running after it returned"
        if mode == "bwrap":  # only the namespace's init and the kernel are left
            assert run(tool, "import os\nlen([p for p in os.listdir('/proc') if p.isdigit()])", session="bg") == (
                "result:\n2"
            )
        run(kept, code.format(n=9742), session="bg")
        assert _processes_named(b"sleep\x009742\x00"), "keep_processes=True keeps them"
        kept.close_session("bg")
        assert _gone(b"sleep\x009742\x00"), "closing the session ends them"
    finally:
        tool.close()
        kept.close()
        for pid in _processes_named(b"sleep\x009741\x00") + _processes_named(b"sleep\x009742\x00"):
            os.kill(pid, 9)


@needs_bwrap
@pytest.mark.timeout(120)
def test_the_work_directory_has_a_size_limit(tmp_path: Path) -> None:
    """max_disk_mb=100 with max_file_mb=64: eight files of 60 MB once all fit (480 MB)."""
    tool = _tool(tmp_path, max_disk_mb=100, max_file_mb=64)
    code = (
        "import os\n"
        "errors = 0\n"
        "for i in range(8):\n"
        "    try:\n"
        "        with open(f'f{i}', 'wb') as f:\n"
        "            for _ in range(60):\n"
        "                f.write(b'\\x00' * 1024 * 1024)\n"
        "    except OSError:\n"
        "        errors += 1\n"
        "total = sum(os.path.getsize(n) for n in os.listdir('.') if os.path.isfile(n))\n"
        "print(errors > 0, total <= 100 * 1024 * 1024)\n"
    )
    try:
        assert run(tool, code, session="d") == "stdout:\nTrue True"
        # the files count against the quota until removed; then there is room again
        assert (
            run(
                tool,
                "import os\nfor n in os.listdir('.'):\n    os.remove(n)\nn = open('x', 'wb').write(b'1' * 50_000_000)",
                session="d",
            )
            == "Finished with no output."
        )
    finally:
        tool.close()


@needs_bwrap
@pytest.mark.timeout(120)
def test_dev_shm_counts_toward_the_disk_quota(tmp_path: Path) -> None:
    """Issue 24 item 21: the sandbox's /dev/shm is memory and disk too: with max_disk_mb=24, filling the work
    directory and then /dev/shm once stored 24 MB + 16 MB."""
    tool = _tool(tmp_path, max_disk_mb=24)
    code = (
        "import os\n"
        "def fill(path):\n"
        "    n = 0\n"
        "    try:\n"
        "        with open(path, 'wb') as f:\n"
        "            for _ in range(64):\n"
        "                f.write(b'\\x00' * 1024 * 1024)\n"
        "                f.flush()\n"
        "                n += 1\n"
        "    except OSError:\n"
        "        pass\n"
        "    return n\n"
        "stored = fill('big') + fill('/dev/shm/big')\n"
        "print(stored <= 24)\n"
    )
    try:
        assert run(tool, code) == "stdout:\nTrue", "the work directory and /dev/shm together held more than the quota"
    finally:
        tool.close()

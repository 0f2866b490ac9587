"""Attacks through the files that cross between the host and the sandbox: attached files and figures.

Issue 19 items 1 and 3, issue 16 item 17. Each test performs the attack and checks the host is untouched.
"""

from __future__ import annotations

import base64
import os
import threading
from pathlib import Path

import pytest

from chatagent.agents.fncall import FnCallAgent
from chatagent.schema import ContentItem
from chatagent.tools.code_interpreter import CodeInterpreter
from tests.security.conftest import needs_bwrap, needs_root, needs_system_python, run, text
from tests.support.openai_server import Reply

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


FORGE = (
    "import json, os, stat, sys\n"
    "cell = int(sys._getframe().f_code.co_filename.strip('<>').split('-')[1])\n"
    "frame, rid = sys._getframe(), None\n"
    "while frame is not None and rid is None:  # the kernel's current request, up the stack\n"
    "    req = frame.f_locals.get('req')\n"
    "    rid = req.get('id') if isinstance(req, dict) else None\n"
    "    frame = frame.f_back\n"
    "fake = {{'id': rid, 'cell': cell, 'stdout': {stdout}, 'stderr': '', 'result': None, 'error': None,\n"
    "        'error_kind': None, 'dropped': 0, 'figures': {figures}}}\n"
    "line = (json.dumps(fake) + '\\n').encode()\n"
    "for fd in range(3, 64):\n"
    "    try:\n"
    "        if stat.S_ISFIFO(os.fstat(fd).st_mode):\n"
    "            os.write(fd, line)\n"
    "    except OSError:\n"
    "        pass\n"
)


def _forge(stdout: str, figures: str, prelude: str = "") -> str:
    """Cell code that writes a forged reply (those Python expressions as its stdout and figures) to every pipe
    it holds, answering the kernel's current request as the kernel would."""
    return prelude + FORGE.format(stdout=stdout, figures=figures)


def _attached(path: Path) -> list[dict]:
    return [{"role": "user", "content": [{"text": "analyse this"}, {"file": str(path)}]}]


@needs_bwrap
@pytest.mark.timeout(60)
def test_a_file_attached_before_the_first_call_is_there(ci: CodeInterpreter, tmp_path: Path) -> None:
    data = tmp_path / "sales.csv"
    data.write_text("month,total\njan,10\nfeb,32\n")
    out = run(ci, "print(open('sales.csv').read().split()[-1])", session="fresh", messages=_attached(data))
    assert out == "stdout:\nfeb,32"
    # the code's own edits are kept: the host does not copy the file again over them
    run(ci, "open('sales.csv', 'a').write('mar,5\\n')", session="fresh", messages=_attached(data))
    assert run(ci, "open('sales.csv').read().count('\\n')", session="fresh", messages=_attached(data)) == "result:\n4"


@needs_bwrap
@pytest.mark.timeout(60)
def test_attached_file_replaced_by_a_symlink_to_a_host_path_is_not_followed(
    ci: CodeInterpreter, tmp_path: Path
) -> None:
    """The escape of issue 19 item 1: the sandbox replaces its copy of an attached file with a dangling symlink
    to a host path; the next call must not copy through it (as root) nor chown its target."""
    data = tmp_path / "report.csv"
    data.write_text("a,b\n1,2\n")
    host = tmp_path / "host-site-packages"
    host.mkdir()
    planted = host / "evil.pth"  # does not exist: a copy through the link would create it
    existing = host / "victim.txt"
    existing.write_text("host data")
    os.chmod(existing, 0o600)
    msgs = _attached(data)
    run(ci, "print('session started')", session="s")  # a session that exists before the file is attached
    assert run(ci, "open('report.csv').read()", session="s", messages=msgs) == "result:\n'a,b\\n1,2\\n'"
    attack = (
        "import os\n"
        "os.remove('report.csv')\n"
        f"os.symlink({str(planted)!r}, 'report.csv')\n"
        f"os.symlink({str(existing)!r}, 'victim.txt')\n"
        "print(sorted(os.listdir('.')))"
    )
    assert "report.csv" in run(ci, attack, session="s", messages=msgs)
    attached_too = [*msgs, {"role": "user", "content": [{"file": str(existing)}]}]
    run(ci, "print('again')", session="s", messages=attached_too)
    assert not planted.exists() and not os.path.lexists(planted)
    assert existing.read_text() == "host data"
    st = existing.stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (os.geteuid(), os.getegid(), 0o600)
    assert sorted(os.listdir(host)) == ["victim.txt"]


@needs_bwrap
@pytest.mark.timeout(60)
def test_forged_figure_replies_never_make_the_host_open_a_path(ci: CodeInterpreter) -> None:
    """The sandbox patches the kernel's figure reporting (here: writes a forged reply to its protocol pipe,
    and replaces the kernel's figure function) so that the host would attach /etc/shadow as an image."""
    prelude = (
        "import __main__\n"
        "paths = ['/etc/shadow', '/root/.bash_history', '/etc/passwd']\n"
        "__main__._save_figures = lambda *a, **k: paths\n"
        "__main__._figures = lambda *a, **k: (paths, '')\n"
    )
    forge = _forge("'forged'", "paths + [__import__('base64').b64encode(b'x' * 64).decode()]", prelude)
    replies = [ci.call({"code": forge}, session_id="f"), ci.call({"code": "print('next')"}, session_id="f")]
    secrets = [Path(p).read_bytes() for p in ("/etc/shadow", "/etc/passwd") if os.access(p, os.R_OK)]
    for reply in replies:
        items = reply if isinstance(reply, list) else [ContentItem(text=reply)]
        for item in items:
            if item.image is not None:
                assert item.image.startswith("data:image/png;base64,"), item.image[:80]
                png = base64.b64decode(item.image.split(",", 1)[1])
                assert png.startswith(PNG_MAGIC)
                assert not any(s and s[:64] in png for s in secrets)
        assert "/etc/shadow" not in "".join(i.image or "" for i in items)
        assert not any(s and s[:32].decode(errors="replace") in text(reply) for s in secrets)
    assert run(ci, "1 + 1", session="f").endswith("result:\n2")  # the session goes on


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@needs_bwrap
@pytest.mark.timeout(90)
def test_forged_replies_larger_than_any_honest_one_are_refused(ci: CodeInterpreter) -> None:
    """A 'stdout' of 3 MB (the limit is 20,000 characters) and a 10 MB 'figure' never reach the tool result;
    a 60 MB reply line is not even kept by the host (two 200 MB 'figures' once took it from 66 to 799 MB)."""
    reply = ci.call({"code": _forge("'x' * 3_000_000", "['A' * 10_000_000]")}, session_id="big")
    assert len(text(reply)) < 100_000
    assert not isinstance(reply, list) or all(i.image is None or len(i.image) < 5_000_000 for i in reply)
    peak, stop = [0], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], _rss())
            stop.wait(0.01)

    before = _rss()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        reply = ci.call({"code": _forge("'x' * 40_000_000", "['A' * 20_000_000]")}, session_id="big")
    finally:
        stop.set()
        sampler.join(5)
    assert len(text(reply)) < 100_000
    assert peak[0] - before < 60 * 1024 * 1024, f"the host grew by {(peak[0] - before) >> 20} MB"
    assert run(ci, "print('alive')", session="big") == "stdout:\nalive"


@needs_bwrap
@pytest.mark.timeout(120)
def test_a_deleted_figure_does_not_break_the_conversation(openai_server, tmp_path: Path) -> None:
    """A figure the code deletes afterwards (or never made) must not abort this run or any later one: with a
    multimodal model every call sends the conversation's images to the model again."""
    pytest.importorskip("matplotlib")
    plot = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()\nprint('plotted')"
    wipe = "import glob, os\nfor p in glob.glob('*.png') + glob.glob('**/*.png', recursive=True):\n    os.remove(p)\nprint('wiped')"
    for script in (Reply(tool_calls=[("code_interpreter", {"code": plot})]),
                   Reply(tool_calls=[("code_interpreter", {"code": wipe})]),
                   Reply(tool_calls=[("code_interpreter", {"code": "print(6 * 7)"})]),
                   Reply(text="The plot is done."), Reply(text="Still fine.")):  # fmt: skip
        openai_server.add(script)
    llm = {"model": "gpt-4o", "model_server": openai_server.base_url, "api_key": "k"}
    cfg = {"name": "code_interpreter", "timeout": 20, "work_dir": str(tmp_path / "w"), "sandbox": "bwrap"}
    with FnCallAgent(llm=llm, function_list=[cfg]) as bot:
        response = bot.run_nonstream([{"role": "user", "content": "plot something"}], session_id="plots")
        again = bot.run_nonstream([{"role": "user", "content": "more"}, *response], session_id="plots")
    assert response[-1]["content"] == "The plot is done."
    results = [m for m in response if m["role"] == "function"]
    assert isinstance(results[0]["content"], list)
    assert any(c.get("image", "").startswith("data:image/png;base64,") for c in results[0]["content"])
    assert "wiped" in text(results[1]["content"]) and "42" in text(results[2]["content"])
    assert again[-1]["content"] == "Still fine."  # a later run over the same conversation works too


@needs_root
@needs_system_python
@pytest.mark.timeout(60)
def test_a_link_a_sandbox_planted_on_the_host_is_not_followed_when_attached(ci_process: CodeInterpreter) -> None:
    """Process mode: the code can write world-writable directories; a link it plants there (to /etc/shadow),
    once attached to the conversation, must not make the host read the target and hand it to the sandbox."""
    link = f"/tmp/chatagent-attack-{os.getpid()}.csv"
    try:
        run(ci_process, f"import os\nos.symlink('/etc/shadow', {link!r})", session="p")
        out = run(ci_process, f"print(open({os.path.basename(link)!r}).read()[:40])", session="p",
                  messages=_attached(Path(link)))  # fmt: skip
        assert "was not copied into the work directory" in out and "root:" not in out, out
    finally:
        if os.path.lexists(link):
            os.unlink(link)

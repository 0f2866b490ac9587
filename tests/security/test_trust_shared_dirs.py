"""Stores in a directory another local user can reach (issue 36, items 11 and 20), attacked by a real second uid
(`setpriv` to nobody) that plants files before the victim's first use. Before the fix the victim's checkpoints went
through the attacker's link into the victim's own file (clobbered), and the attacker's empty `sessions.db` and
`memory.db` received the whole conversation and the memories. Now a store's directory must be the user's and
writable by no one else, and an existing database, journal or lock file the user's own."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from chatagent import FnCallAgent, LongTermMemory, ScriptedLLM, Session, tool, tool_call
from chatagent.sessions import SessionStoreError
from tests.security.conftest import needs_root, needs_system_python, system_python
from tests.support import processes

pytestmark = [needs_root, needs_system_python, pytest.mark.timeout(120)]

NOBODY = 65534
SECRET = "my salary is 9,100 a month"


def as_nobody(code: str, cwd: Path) -> None:
    """Run `code` as another local user (nobody), with Debian's Python: the attacker."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("needs setpriv")
    cmd = [setpriv, "--reuid", str(NOBODY), "--regid", str(NOBODY), "--clear-groups", "--", str(system_python())]
    done = processes.run([*cmd, "-c", code], cwd=cwd, capture_output=True, timeout=60, env={"PATH": os.environ["PATH"]})
    assert done.returncode == 0, done.stderr.decode()[-2000:]


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    """A directory every user may write in (sticky, as /tmp is), reachable by nobody."""
    os.chmod(tmp_path, 0o755)
    path = tmp_path / "shared"
    path.mkdir()
    os.chmod(path, 0o1777)
    return path


def agent() -> FnCallAgent:
    @tool
    def note(text: str) -> str:
        """Keep a note."""
        return "kept"

    return FnCallAgent(llm=ScriptedLLM([tool_call("note", {"text": SECRET}), "Noted."]), function_list=[note])


def test_a_planted_store_and_journal_link_in_a_shared_directory_are_refused(tmp_path: Path, shared: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o700)
    notes = victim / "notes.txt"
    notes.write_text("the victim's own notes\n")
    lock = hashlib.sha256(b"local\0s1").hexdigest()[:32]
    as_nobody(
        "import os\n"
        "open('sessions.db', 'w').close(); os.chmod('sessions.db', 0o666)\n"
        "os.mkdir('sessions.db-locks'); os.chmod('sessions.db-locks', 0o777)\n"
        f"os.symlink({str(notes)!r}, 'sessions.db-locks/{lock}.journal')\n",
        shared,
    )
    with pytest.raises(SessionStoreError, match="can be written by other users"):
        session = Session("s1", f"sqlite:///{shared}/sessions.db", user="local")
        agent().run_nonstream([{"role": "user", "content": f"Remember: {SECRET}"}], session=session)
    assert notes.read_text() == "the victim's own notes\n", "the checkpoints went through the attacker's link"
    planted = sqlite3.connect(shared / "sessions.db")
    tables = planted.execute("SELECT name FROM sqlite_master").fetchall()
    assert tables == [], "the victim's conversation went into the attacker's database"


def test_a_database_another_user_left_in_the_directory_is_refused(tmp_path: Path) -> None:
    """The directory was open when another user made the file; the victim made it private since."""
    place = tmp_path / "place"
    place.mkdir()
    os.chmod(tmp_path, 0o755)
    os.chmod(place, 0o777)
    as_nobody("open('sessions.db', 'w').close()\nopen('memory.db', 'w').close()\n", place)
    os.chmod(place, 0o700)
    with pytest.raises(SessionStoreError, match="belongs to another user"):
        Session("s1", f"sqlite:///{place}/sessions.db").messages()
    with pytest.raises(SessionStoreError, match="belongs to another user"):
        LongTermMemory(user="local", store=str(place / "memory.db"), embedder=None).remember(SECRET)
    assert (place / "memory.db").stat().st_size == 0


def test_a_memory_store_in_a_shared_directory_is_refused(shared: Path) -> None:
    as_nobody("import os\nopen('memory.db', 'w').close(); os.chmod('memory.db', 0o666)\n", shared)
    with pytest.raises(SessionStoreError, match="can be written by other users"):
        LongTermMemory(user="local", store=str(shared / "memory.db"), embedder=None).remember(SECRET)
    assert (shared / "memory.db").stat().st_size == 0, "the memory went into the attacker's file"


def test_a_private_store_works_and_its_files_are_the_users(tmp_path: Path) -> None:
    store = tmp_path / "mine" / "sessions.db"
    store.parent.mkdir(mode=0o700)
    session = Session("s1", f"sqlite:///{store}", user="local")
    agent().run_nonstream([{"role": "user", "content": "Remember."}], session=session)
    assert session.messages()[-1]["content"] == "Noted."
    for path in [store.parent, store, store.with_name("sessions.db-locks")]:
        st = path.stat()
        assert st.st_uid == os.geteuid() and not st.st_mode & 0o077, path

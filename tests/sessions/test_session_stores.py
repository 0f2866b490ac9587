"""Session stores: URLs, bad input (a damaged, locked or foreign file, a wrong URL, a newer schema) refused with a
clear error and nothing lost, schema migration on open, and attached files kept by content hash."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from chatagent import Assistant, BasicAgent, ScriptedLLM, Session, SessionStoreError
from chatagent.sessions import close_stores, default_store_url, open_store
from chatagent.sessions import store as store_module
from tests.support.postgres import default_signals


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def echo() -> BasicAgent:
    return BasicAgent(llm=ScriptedLLM(default=lambda messages, functions: f"seen {len(messages)}"))


def stored_conversation(url: str, session_id: str = "kept") -> list[dict]:
    s = Session(session_id, url)
    echo().run_nonstream([user("remember this")], session=s)
    return s.messages()


# ---- URLs -----------------------------------------------------------------------------------------------


def test_store_urls_and_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    relative = open_store("sqlite:///sub/here.db?timeout=2")
    assert relative.url == str(tmp_path / "sub/here.db") and relative.timeout == 2.0
    absolute = open_store(f"sqlite:///{tmp_path}/abs.db")
    assert absolute.url == str(tmp_path / "abs.db")
    assert open_store(tmp_path / "abs.db") is absolute  # a plain path: the same store
    assert default_store_url().endswith("/workspace/sessions/sessions.db")
    monkeypatch.setenv("CHATAGENT_SESSION_STORE", f"sqlite:///{tmp_path}/env.db")
    assert Session("x").store.url == str(tmp_path / "env.db")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://db/chat", "unknown session store URL 'mysql://db/chat'"),
        ("sqlite://host/chat.db", "bad SQLite store URL"),
        ("sqlite:///:memory:", "in-memory databases are not supported"),
        ("sqlite:///chat.db?journal=off", "unknown option 'journal'"),
        ("sqlite:///chat.db?timeout=soon", "timeout must be a number"),
        ("sqlite:////no/such/dir/chat.db", "the directory /no/such/dir does not exist"),
        ("postgresql://app:s3cret@127.0.0.1:1/chat", "cannot connect to PostgreSQL at postgresql://app:\\*\\*\\*@"),
    ],
)
def test_a_wrong_url_is_a_clear_error(url: str, message: str) -> None:
    with pytest.raises(SessionStoreError, match=message) as info:
        Session("x", url)
    assert "s3cret" not in str(info.value)


def test_a_directory_is_not_a_store(tmp_path: Path) -> None:
    with pytest.raises(SessionStoreError, match="is a directory"):
        Session("x", tmp_path)


# ---- damaged, foreign and locked files ------------------------------------------------------------------


def test_a_file_that_is_not_a_database_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"These are my notes, not a database.\n" * 200)
    before = path.read_bytes()
    with pytest.raises(SessionStoreError, match=f"{path} is not a usable SQLite database .* It was not changed"):
        Session("x", path)
    assert path.read_bytes() == before


def test_a_damaged_store_is_a_clear_error_and_is_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    for i in range(30):  # several pages of conversations
        Session(f"s{i}", path).append([user("x" * 2000), {"role": "assistant", "content": "y" * 2000}])
    close_stores()
    sqlite3.connect(path).execute("PRAGMA wal_checkpoint(TRUNCATE)").close()
    data = bytearray(path.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 4096] = b"\xff" * 4096  # a page in the middle is garbage
    path.write_bytes(bytes(data))
    with pytest.raises(SessionStoreError, match="not a usable SQLite database|malformed|is damaged"):
        for i in range(30):
            Session(f"s{i}", path).messages()
    assert path.read_bytes() == bytes(data)


def test_a_locked_store_is_a_clear_error_and_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    before = stored_conversation(str(path))
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys\nc = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
         "c.execute('BEGIN EXCLUSIVE')\nprint('locked', flush=True)\nsys.stdin.read()", str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, preexec_fn=default_signals,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "locked"
        s = Session("kept", f"sqlite:///{path}?timeout=0.2")
        with pytest.raises(SessionStoreError, match=f"{path} is locked by another process .*Nothing was changed"):
            echo().run_nonstream([user("more")], session=s)
    finally:
        holder.stdin.close()
        holder.wait(30)
    assert s.messages() == before
    echo().run_nonstream([user("more")], session=s)  # once the other process lets go
    assert len(s.messages()) == 4


# ---- schema versions ------------------------------------------------------------------------------------


def _set_schema_version(url: str, version: int) -> None:
    store = open_store(url)
    with store._write() as cur:
        cur.execute("UPDATE chatagent_meta SET value = ? WHERE key = 'schema_version'", (str(version),))
    close_stores()


def test_a_store_from_a_newer_chatagent_is_refused_unchanged(store_url: str) -> None:
    before = stored_conversation(store_url)
    current = store_module.SCHEMA_VERSION
    _set_schema_version(store_url, 99)
    with pytest.raises(
        SessionStoreError, match=f"schema version 99, newer than this chatagent understands \\({current}\\)"
    ):
        Session("kept", store_url)
    _set_schema_version_raw(store_url, current)
    assert Session("kept", store_url).messages() == before


def _set_schema_version_raw(url: str, version: int, *statements: str) -> None:
    """Without opening the store through chatagent (which refuses it); `statements` run first."""
    if url.startswith("sqlite"):
        with sqlite3.connect(url[len("sqlite:///") :]) as conn:
            for statement in statements:
                conn.execute(statement)
            conn.execute("UPDATE chatagent_meta SET value = ? WHERE key = 'schema_version'", (str(version),))
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)
        conn.execute("UPDATE chatagent_meta SET value = %s WHERE key = 'schema_version'", (str(version),))


def test_an_older_store_is_migrated_on_open_in_one_transaction(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    before = stored_conversation(store_url)
    close_stores()
    current = store_module.SCHEMA_VERSION
    monkeypatch.setattr(store_module, "SCHEMA_VERSION", current + 1)
    monkeypatch.setitem(store_module.MIGRATIONS, current, ["ALTER TABLE chatagent_sessions ADD COLUMN pinned {int}"])
    s = Session("kept", store_url)
    assert s.messages() == before
    assert s.store._read("SELECT value FROM chatagent_meta") == [(str(current + 1),)]
    assert s.store._read("SELECT pinned FROM chatagent_sessions") == [(None,)]


def test_a_version_1_store_gets_the_tables_of_turns_in_progress_and_usage(store_url: str) -> None:
    before = stored_conversation(store_url)
    close_stores()
    version_2 = ["DROP TABLE chatagent_pending", "DROP TABLE chatagent_checkpoints",
                 "ALTER TABLE chatagent_sessions DROP COLUMN usage", "ALTER TABLE chatagent_turns DROP COLUMN times"]  # fmt: skip
    _set_schema_version_raw(store_url, 1, *version_2)
    s = Session("kept", store_url)
    assert s.messages() == before and s.pending_turn is None and s.usage.calls == 0
    assert s.store._read("SELECT value FROM chatagent_meta") == [(str(store_module.SCHEMA_VERSION),)]
    assert s.store._read("SELECT COUNT(*) FROM chatagent_checkpoints") == [(0,)]


def test_a_failing_migration_leaves_the_store_at_its_version(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    before = stored_conversation(store_url)
    close_stores()
    current = store_module.SCHEMA_VERSION
    monkeypatch.setattr(store_module, "SCHEMA_VERSION", current + 1)
    steps = ["ALTER TABLE chatagent_sessions ADD COLUMN pinned {int}", "THIS IS NOT SQL"]
    monkeypatch.setitem(store_module.MIGRATIONS, current, steps)
    with pytest.raises(SessionStoreError):
        Session("kept", store_url)
    monkeypatch.setattr(store_module, "SCHEMA_VERSION", current)
    s = Session("kept", store_url)
    assert s.messages() == before
    assert s.store._read("SELECT value FROM chatagent_meta") == [(str(current),)]


# ---- attached files -------------------------------------------------------------------------------------


def make_docx(path: Path, secret: str) -> Path:
    import docx

    doc = docx.Document()
    doc.add_heading("Quarterly operations report", 1)
    for i in range(40):
        doc.add_paragraph(f"Section {i}: routine figures for the warehouse, shipping and staffing. " * 3)
    doc.add_paragraph(f"Note for the team: the launch code is {secret}.")
    doc.save(path)
    return path


def test_a_resumed_conversation_still_answers_from_its_files(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = make_docx(tmp_path / "report.docx", "PELICAN-42")

    def reply(messages, functions) -> str:
        excerpts = " ".join(m.text for m in messages if m.role != "assistant")  # not the stored answer
        return "the code is PELICAN-42" if "PELICAN-42" in excerpts else "I see no file"

    s = Session("files", store_url)
    first = [{"role": "user", "content": [{"text": "Read this"}, {"file": str(report)}]}]
    assert Assistant(llm=ScriptedLLM(default=reply)).run_nonstream(first, session=s)[-1]["content"] == (
        "the code is PELICAN-42"
    )
    report.unlink()  # the upload is gone, and this runs on another machine: an empty workspace
    monkeypatch.setenv("CHATAGENT_WORKSPACE", str(tmp_path / "elsewhere"))
    close_stores()
    s = Session("files", store_url)
    out = Assistant(llm=ScriptedLLM(default=reply)).run_nonstream([user("What is the launch code?")], session=s)
    assert out[-1]["content"] == "the code is PELICAN-42"
    path = Path(s.messages()[0]["content"][1]["file"])
    assert path.name == "report.docx" and path.is_relative_to(tmp_path / "elsewhere") and path.exists()


def test_files_are_stored_once_per_content_and_removed_with_the_last_session(store_url: str, tmp_path: Path) -> None:
    a, b = tmp_path / "a.txt", tmp_path / "copy-of-a.txt"
    a.write_text("the same bytes\n" * 100)
    b.write_bytes(a.read_bytes())
    one, two = Session("one", store_url), Session("two", store_url)
    one.append([{"role": "user", "content": [{"text": "a"}, {"file": str(a)}]}])
    two.append([{"role": "user", "content": [{"file": str(b)}, {"image": "https://example.org/cat.png"}]}])
    count = "SELECT count(*) FROM chatagent_blobs"
    assert one.store._read(count) == [(1,)]
    copy = Path(two.messages()[0]["content"][0]["file"])
    assert copy.name == "copy-of-a.txt" and copy.read_bytes() == a.read_bytes()
    assert two.messages()[0]["content"][1] == {"image": "https://example.org/cat.png"}  # URLs stay URLs
    assert one.delete() and one.store._read(count) == [(1,)] and copy.exists()
    two.clear()
    assert two.store._read(count) == [(0,)] and not copy.exists()


def test_a_missing_attachment_keeps_its_path_with_a_warning(store_url: str, caplog: pytest.LogCaptureFixture) -> None:
    s = Session("missing", store_url)
    s.append([{"role": "user", "content": [{"file": "/no/such/file.pdf"}]}])
    assert s.messages()[0]["content"] == [{"file": "/no/such/file.pdf"}]
    assert "attachment /no/such/file.pdf cannot be read" in caplog.text

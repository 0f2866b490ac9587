"""DocStore / retrieve: budgets, content-hash caching, disk cache, concurrency, progress, URLs, hostile names."""

from __future__ import annotations

import http.server
import logging
import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chatagent.rag import DocStore, Progress, retrieve
from chatagent.rag.file_index import format_chunks
from chatagent.rag.store import RACY_NS
from chatagent.rag.urls import fetch_url
from chatagent.utils.tokens import count_tokens

pytestmark = pytest.mark.timeout(60)

TOPICS = {
    "install": "To install packages, call install.packages with the package name and a repository mirror.",
    "plot": "The plot function draws scatter plots; use par to change margins and colours of graphics.",
    "frame": "A data frame is a list of vectors of equal length, printed as a table of rows and columns.",
    "loop": "A for loop repeats its body; vectorised functions like sapply are usually faster than loops.",
}


def manual_text(topic: str, repeat: int = 40) -> str:
    """A long text where one paragraph in the middle is about `topic`, the rest filler."""
    filler = [f"Filler paragraph {i} describes nothing in particular about anything at all." for i in range(repeat)]
    return "\n\n".join(filler[: repeat // 2] + [TOPICS[topic]] + filler[repeat // 2 :])


@pytest.fixture
def store(tmp_path: Path) -> DocStore:
    return DocStore(tmp_path / "ws", chunk_tokens=60, overlap_tokens=10)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_retrieve_gives_the_best_chunks_within_the_budget(tmp_path: Path, store: DocStore) -> None:
    files = [write(tmp_path / f"{t}.txt", manual_text(t)) for t in TOPICS]
    found = store.retrieve(files, "How do I install packages from a mirror?", max_tokens=100)
    assert not found.complete and found.errors == []
    assert found.chunks[0].source == "install.txt" and "install.packages" in found.chunks[0].text
    assert sum(c.tokens for c in found.chunks) < found.tokens <= 100  # headers are counted too
    assert count_tokens(found.as_text()) <= found.tokens
    assert found.chunks[0].page == 1
    text = found.as_text()
    assert text.startswith("[install.txt, p. 1]\n") and format_chunks(found.chunks) == text


def test_overlapping_chunks_do_not_give_the_same_sentence_twice(tmp_path: Path, store: DocStore) -> None:
    filler = "filler " * 300
    manual = write(tmp_path / "m.txt", f"{filler}\n\nThe vault code is 7781.\n\n{filler}")
    found = store.retrieve([manual], "What is the vault code?", 300)
    texts = [c.text for c in found.chunks]
    assert any("7781" in t for t in texts)
    assert sum(t.count("The vault code is 7781.") for t in texts) == 1, texts


def test_everything_is_returned_best_first_when_it_fits(tmp_path: Path, store: DocStore) -> None:
    a = write(tmp_path / "a.md", "# A\n\nAlpha facts.")
    b = write(tmp_path / "b.txt", "Beta facts, unrelated to the question.")
    c = write(tmp_path / "c.txt", "Gamma facts, unrelated too.")
    found = store.retrieve([a, b, c], "alpha", max_tokens=1000)
    assert found.complete
    assert [(c.source, c.page, c.text) for c in found.chunks] == [
        ("a.md", 1, "# A\n\nAlpha facts."),
        ("b.txt", 1, "Beta facts, unrelated to the question."),
        ("c.txt", 1, "Gamma facts, unrelated too."),
    ]
    # the page that matches comes first; the others keep their order
    assert [c.source for c in store.retrieve([c, b, a], "alpha", max_tokens=1000).chunks] == ["a.md", "c.txt", "b.txt"]


def test_cache_is_by_content_not_by_path(tmp_path: Path, store: DocStore) -> None:
    path = write(tmp_path / "notes.txt", manual_text("plot"))
    assert "plot" in store.retrieve([path], "scatter plots margins", 80).chunks[0].text
    assert store.parses == 1
    store.retrieve([path], "scatter plots margins", 80)
    assert store.parses == 1  # unchanged: not parsed again
    write(path, manual_text("frame"))  # edited in place, same name
    found = store.retrieve([path], "data frame list of vectors", 80)
    assert store.parses == 2 and "data frame" in found.chunks[0].text
    copy = write(tmp_path / "other" / "renamed.txt", manual_text("frame"))
    found = store.retrieve([copy], "data frame list of vectors", 80)
    assert store.parses == 2  # same content, new name: no parse
    assert found.chunks[0].source == "renamed.txt"  # cited under the name the user gave


def test_an_edit_is_seen_however_soon_it_follows_a_read(tmp_path: Path, store: DocStore) -> None:
    """A warm question does not read again a file whose inode, size and times are unchanged; an edit of the same
    size within the file system's time tick, its modification time put back (as copy tools do), is still seen,
    and so is an edit of a file the store remembered."""
    path = write(tmp_path / "a.txt", manual_text("plot"))
    assert "scatter plots" in store.retrieve([path], "scatter plots margins", 80).chunks[0].text
    before = path.stat()
    write(path, manual_text("plot").replace("scatter plots", "violin chords"))  # the same size
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    assert "violin chords" in store.retrieve([path], "violin chords margins", 80).chunks[0].text
    deadline = time.monotonic() + 30
    while time.time_ns() - path.stat().st_ctime_ns <= RACY_NS and time.monotonic() < deadline:
        time.sleep(0.1)  # until the file is old enough to be remembered by its times
    assert "violin chords" in store.retrieve([path], "violin chords margins", 80).chunks[0].text
    write(path, manual_text("frame"))
    assert "data frame" in store.retrieve([path], "data frame list of vectors", 80).chunks[0].text
    assert store.parses == 3


def test_adding_a_file_to_a_set_parses_only_that_file(tmp_path: Path, store: DocStore) -> None:
    files = [write(tmp_path / f"{t}.txt", manual_text(t)) for t in TOPICS]
    store.retrieve(files[:3], "loop", 100)
    assert store.parses == 3
    found = store.retrieve(files, "for loop repeats its body", 100)
    assert store.parses == 4 and found.chunks[0].source == "loop.txt"


def test_disk_cache_serves_a_new_store(tmp_path: Path) -> None:
    files = [write(tmp_path / f"{t}.txt", manual_text(t)) for t in TOPICS]
    first = DocStore(tmp_path / "ws", chunk_tokens=60)
    expected = first.retrieve(files, "install packages", 100)
    second = DocStore(tmp_path / "ws", chunk_tokens=60)
    again = second.retrieve(files, "install packages", 100)
    assert second.parses == 0
    assert [(c.id, c.text) for c in again.chunks] == [(c.id, c.text) for c in expected.chunks]
    third = DocStore(tmp_path / "ws", chunk_tokens=60, disk_cache=False)
    third.retrieve(files, "install packages", 100)
    assert third.parses == 4


def test_corrupt_cache_files_are_ignored(tmp_path: Path) -> None:
    path = write(tmp_path / "a.txt", manual_text("install"))
    DocStore(tmp_path / "ws", chunk_tokens=60).retrieve([path], "install", 100)
    for cached in (tmp_path / "ws").rglob("*.*"):
        cached.write_bytes(b"\x00garbage")
    store = DocStore(tmp_path / "ws", chunk_tokens=60)
    assert "install.packages" in store.retrieve([path], "install packages", 100).chunks[0].text
    assert store.parses == 1


def test_workspace_file_names_come_from_hashes_only(tmp_path: Path) -> None:
    hostile = tmp_path / "in" / "..; rm -rf ~; ..txt.txt"
    write(hostile, manual_text("install"))
    nested = tmp_path / "in" / "sub" / ".." / "..%2F..%2Fescape.txt"
    write(nested, manual_text("plot"))
    store = DocStore(tmp_path / "ws", chunk_tokens=60)
    found = store.retrieve([hostile, nested, tmp_path / "bad\x00name.txt"], "install packages", 100)
    assert [e.reason for e in found.errors] == ["broken"]
    assert "\x00" not in str(found.errors[0])
    names = [p.relative_to(tmp_path / "ws") for p in (tmp_path / "ws").rglob("*") if p.is_file()]
    assert names
    for name in names:
        assert re.fullmatch(r"rag/(docs|indexes)/[0-9a-f]{2}/[0-9a-f]{64}\.(json|npz)", name.as_posix()), name
    outside = {p for p in tmp_path.rglob("*") if p.is_file()} - {tmp_path / "ws" / n for n in names}
    assert outside == {hostile, tmp_path / "in" / "..%2F..%2Fescape.txt"}  # nothing written anywhere else


@pytest.mark.timeout(60)
def test_fifty_threads_asking_for_one_new_file_parse_it_once(tmp_path: Path, store: DocStore) -> None:
    path = write(tmp_path / "shared.txt", manual_text("frame", repeat=400))
    barrier = threading.Barrier(50)
    results: list[str] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            barrier.wait(timeout=20)
            found = store.retrieve([path], "data frame", 80)
            results.append(found.chunks[0].text)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors and len(results) == 50
    assert store.parses == 1
    assert all("data frame" in r for r in results)


def test_bad_files_are_reported_and_the_rest_still_answer(tmp_path: Path, store: DocStore) -> None:
    good = write(tmp_path / "good.txt", manual_text("install"))
    empty = write(tmp_path / "empty.txt", "")
    binary = tmp_path / "prog.txt"
    binary.write_bytes(b"\x7fELF" + bytes(range(256)) * 8)
    found = store.retrieve([empty, good, binary, tmp_path / "missing.pdf"], "install packages", 100)
    assert [(e.source, e.reason) for e in found.errors] == [
        ("empty.txt", "broken"),  # 0 bytes
        ("prog.txt", "unsupported"),
        ("missing.pdf", "broken"),
    ]
    assert found.chunks and all(c.source == "good.txt" for c in found.chunks)
    again = store.retrieve([empty, good], "install packages", 100)  # failures are remembered, not re-parsed
    assert [e.reason for e in again.errors] == ["broken"] and store.parses == 3


def test_a_file_whose_content_is_in_the_cache_is_not_said_to_be_read_before(tmp_path: Path) -> None:
    """Issue 43.16: a file uploaded for the first time was shown as 'read before' when its content was in the
    disk cache (parsed earlier, under another name or by another process): the line says where it came from."""
    write(tmp_path / "first.txt", manual_text("install"))
    DocStore(tmp_path / "ws").retrieve([tmp_path / "first.txt"], "x", 100)
    copy = write(tmp_path / "never_read.txt", manual_text("install"))  # the same content, a new name
    events: list[Progress] = []
    DocStore(tmp_path / "ws").retrieve([copy], "x", 100, on_progress=events.append)  # a new store: a new process
    [cached] = [e for e in events if e.stage == "cached"]
    assert cached.describe() == "never_read.txt: taken from the cache of files parsed before (file 1 of 1)"


def test_too_large_limit_applies_in_the_store(tmp_path: Path) -> None:
    path = write(tmp_path / "big.txt", "word " * 1000)
    found = DocStore(tmp_path / "ws", max_bytes=100).retrieve([path], "word", 100)
    assert [e.reason for e in found.errors] == ["too_large"] and found.chunks == []


def test_progress_callback_and_log_lines(tmp_path: Path, store: DocStore, caplog: pytest.LogCaptureFixture) -> None:
    files = [write(tmp_path / f"{t}.txt", manual_text(t)) for t in TOPICS]
    events: list[Progress] = []
    with caplog.at_level(logging.INFO, logger="chatagent.rag.store"):
        store.retrieve(files[:2], "x", 100, on_progress=events.append)
        store.retrieve(files, "x", 100, on_progress=events.append)
    stages = [(e.stage, e.source, e.done, e.total) for e in events]
    assert stages == [
        ("parse", "install.txt", 1, 2),
        ("parse", "plot.txt", 2, 2),
        ("index", "", 2, 2),
        ("search", "", 2, 2),
        ("cached", "install.txt", 1, 4),
        ("cached", "plot.txt", 2, 4),
        ("parse", "frame.txt", 3, 4),
        ("parse", "loop.txt", 4, 4),
        ("index", "", 4, 4),
        ("search", "", 4, 4),
    ]
    assert any("parsed frame.txt" in r.getMessage() and "[3/4]" in r.getMessage() for r in caplog.records)

    def broken_callback(progress: Progress) -> None:
        raise RuntimeError("ui gone")

    assert store.retrieve(files, "install packages", 100, on_progress=broken_callback).chunks


def test_password_reaches_the_pdf_parser(tmp_path: Path, store: DocStore) -> None:
    from tests.rag.test_rag_parsers import encrypt_pdf, make_pdf

    path = tmp_path / "locked.pdf"
    path.write_bytes(encrypt_pdf(make_pdf(["The vault code is 1234."]), "pw"))
    assert [e.reason for e in store.retrieve([path], "vault code", 100).errors] == ["needs_password"]
    found = store.retrieve([path], "vault code", 100, passwords={"locked.pdf": "pw"})
    assert found.errors == [] and "1234" in found.chunks[0].text
    again = store.retrieve([path], "vault code", 100)  # the decrypted text is not served without the password
    assert [e.reason for e in again.errors] == ["needs_password"] and again.chunks == []
    assert not list((tmp_path / "ws").rglob("*.json"))  # text opened with a password is not written to disk


def test_module_level_retrieve_uses_the_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHATAGENT_WORKSPACE", str(tmp_path / "env-ws"))
    path = write(tmp_path / "a.txt", manual_text("loop"))
    found = retrieve([path], "for loop", max_tokens=60)  # chunks are bigger than 60: the best sentences of one
    assert "for loop repeats" in found.chunks[0].text and len(found.chunks) == 1
    assert count_tokens(found.as_text()) <= found.tokens <= 60
    assert list((tmp_path / "env-ws" / "rag").rglob("*.json"))


# -------------------------------------------------------------------------------------------- URLs


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        if self.path == "/slow":
            self.server.released.wait(120)  # type: ignore[attr-defined]  # (set at the fixture's teardown)
        if self.path == "/big":
            body = b"x" * 200_000
        else:
            body = b"<html><head><title>Remote doc</title></head><body><p>The remote answer is 42.</p></body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def web() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.released = threading.Event()  # type: ignore[attr-defined]  # ends the /slow page's 120 s wait
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.released.set()  # type: ignore[attr-defined]
        server.shutdown()
        server.server_close()


@pytest.mark.timeout(30)
def test_urls_are_fetched_with_a_size_limit_and_a_timeout(web: str, tmp_path: Path) -> None:
    store = DocStore(tmp_path / "ws", max_bytes=100_000)
    found = store.retrieve([f"{web}/docs/page"], "remote answer", 100)
    assert found.errors == [] and found.chunks[0].source == "page.html" and "42" in found.chunks[0].text
    big = store.retrieve([f"{web}/big"], "x", 100)
    assert [e.reason for e in big.errors] == ["too_large"]
    with pytest.raises(Exception) as info:  # the page takes 120 s: the 0.5 s timeout ends it within the 30 s
        fetch_url(f"{web}/slow", 100_000, timeout=0.5)
    assert getattr(info.value, "reason", None) == "broken"
    refused = store.retrieve(["http://127.0.0.1:9/nothing.pdf"], "x", 100)
    assert [e.reason for e in refused.errors] == ["broken"]


@pytest.mark.parametrize("budget", [25, 60, 150, 400, 1000, 100_000])
def test_the_prompt_text_never_exceeds_the_budget(tmp_path: Path, store: DocStore, budget: int) -> None:
    files = [write(tmp_path / f"{t}.txt", manual_text(t)) for t in TOPICS]
    for query in ("install packages", "data frame vectors", "nothing matches zzz"):
        found = store.retrieve(files, query, max_tokens=budget)
        assert found.chunks, (budget, query)
        assert count_tokens(found.as_text()) <= budget
        assert found.complete == (budget == 100_000)


def test_an_oversized_chinese_chunk_gives_its_best_sentences(tmp_path: Path) -> None:
    filler = "".join(f"第{i}段文字只是填充内容，没有任何意义。" for i in range(8))
    text = filler + "大熊猫主要以竹子为食。" + filler  # one chunk of sentences with no space after 。
    path = write(tmp_path / "熊猫.txt", text)
    store = DocStore(tmp_path / "ws", chunk_tokens=400, overlap_tokens=0)
    found = store.retrieve([path], "大熊猫吃什么", max_tokens=40)
    assert len(found.chunks) == 1 and not found.complete
    assert "大熊猫主要以竹子为食。" in found.chunks[0].text  # the matching sentence, not the start
    assert count_tokens(found.as_text()) <= found.tokens <= 40


def test_a_set_that_fits_is_formatted_once_not_per_question(tmp_path: Path, store: DocStore) -> None:
    a = write(tmp_path / "a.md", "# A\n\nAlpha facts.")
    first = store.retrieve([a], "alpha", max_tokens=1000)
    second = store.retrieve([a], "something else", max_tokens=1000)
    assert first.complete and second.complete
    assert second.chunks[0] is first.chunks[0]  # the page chunks are made once per index
    second.chunks.clear()  # a caller's list is its own
    assert store.retrieve([a], "alpha", max_tokens=1000).chunks == first.chunks


def test_expired_urls_are_dropped_from_memory(web: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import chatagent.rag.urls as urls_module

    store = DocStore(tmp_path / "ws")
    store.retrieve([f"{web}/one.html"], "remote", 100)
    assert [url for _, url in store._urls.entries] == [f"{web}/one.html"]  # keyed by (URL policy, url)
    monkeypatch.setattr(urls_module, "URL_CACHE_S", 0.0)
    store.retrieve([f"{web}/two.html"], "remote", 100)
    assert [url for _, url in store._urls.entries] == [f"{web}/two.html"]

"""A client growing what `chatagent serve` stores (issue 36, item 21), by HTTP against a real server on loopback with
its default bounds. Before the fix one client grew one conversation by 16 requests of 3.5 MB (a 61 MB store, on
which a short question then took seconds), and one principal's conversations had no bound in all (10,000 of 64 MB).
Now a conversation stops at 16 MB, its files counted, and a principal's conversations at 256 MB in all: a 413
saying so; deleting one makes room."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from chatagent import BasicAgent
from chatagent.llm.base import BaseChatModel
from chatagent.schema import Message
from chatagent.server.conversations import DEFAULT_MAX_SESSION_BYTES
from chatagent.server.runner import AgentServer
from chatagent.sessions import close_stores, open_store

pytestmark = pytest.mark.timeout(300)


class Short(BaseChatModel):
    """Answers every question with one short line."""

    def _chat_stream(self, messages, functions, cfg, usage):
        yield [Message.unchecked("assistant", "noted", None, None, None, {"index": 0})]


@pytest.fixture(autouse=True)
def _workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("CHATAGENT_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.delenv("CHATAGENT_SESSION_STORE", raising=False)
    yield
    close_stores()


def server(tmp_path: Path, **bounds: int) -> AgentServer:
    agent = BasicAgent(llm=Short({"model": "short"}), name="short")
    return AgentServer(agent, "127.0.0.1", 0, api_key="k", store=f"sqlite:///{tmp_path}/s.db", **bounds)


def ask(srv: AgentServer, content: str | list, session: str) -> httpx.Response:
    body = {"model": "short", "messages": [{"role": "user", "content": content}], "session_id": session}
    return httpx.post(f"{srv.url}/chat/completions", json=body, headers={"Authorization": "Bearer k"}, timeout=120)


def test_one_conversation_stops_growing_at_the_default_bound(tmp_path: Path) -> None:
    big = "x" * 3_500_000
    with server(tmp_path) as srv:
        codes = []
        for _ in range(16):
            codes.append(ask(srv, big, "grows").status_code)
            if codes[-1] != 200:
                break
        assert codes[-1] == 413, f"16 requests of 3.5 MB all stored: {codes}"
        refused = ask(srv, big, "grows")
        assert refused.json()["error"]["code"] == "session_too_large" and "start a new one" in refused.text
        stored = open_store(f"sqlite:///{tmp_path}/s.db").size("k", "grows")
        assert stored <= DEFAULT_MAX_SESSION_BYTES, stored
        assert ask(srv, "hello", "fresh").status_code == 200  # a new conversation is fine


def test_files_count_toward_a_conversation(tmp_path: Path) -> None:
    """A file sent as a data: URL is stored beside the turns: it counts as the text does."""
    with server(tmp_path, max_session_bytes=100_000) as srv:
        codes = []
        for n in range(8):
            data = base64.b64encode(f"note {n}\n".encode() + b"0" * 30_000).decode()
            content = [{"text": f"file {n}"}, {"file": f"data:text/plain;base64,{data}"}]
            codes.append(ask(srv, content, "files").status_code)
            if codes[-1] != 200:
                break
        assert codes[-1] == 413, f"files of 30 kB each went past a 100 kB bound: {codes}"


def test_a_principals_conversations_are_bounded_in_all(tmp_path: Path) -> None:
    with server(tmp_path, max_session_bytes=50_000, max_principal_bytes=140_000) as srv:
        codes = [ask(srv, "y" * 40_000, f"c{n}").status_code for n in range(4)]
        assert codes == [200, 200, 200, 413], codes
        refused = ask(srv, "y" * 20_000, "c0")
        assert refused.status_code == 413 and refused.json()["error"]["code"] == "storage_quota_exceeded"
        deleted = httpx.delete(f"{srv.url}/sessions/c1", headers={"Authorization": "Bearer k"}, timeout=30)
        assert deleted.status_code == 200
        assert ask(srv, "hi", "c0").status_code == 200


def test_sizes_on_postgresql(postgres) -> None:  # type: ignore[no-untyped-def]
    """The same sums on a real PostgreSQL store: a session's, and all of a user's."""
    from chatagent import Session

    url = postgres.new_store_url()
    for sid in ("a", "b"):
        Session(sid, url, user="u").append([{"role": "user", "content": "z" * 10_000}])
    store = open_store(url)
    one, both = store.size("u", "a"), store.size("u")
    assert 10_000 <= one < 11_000 and both == one + store.size("u", "b") and store.size("other") == 0

"""A login-less web UI keeps a bounded number of browser identities (issue 36): many fresh cookie-less clients attack
the real page over HTTP (`WebUI.run`, Gradio on loopback). Each one used to get an identity of its own, without
limit, each able to hold conversations, uploads and memories; now the page keeps `max_browsers`, a new one taking the
place of the one unseen longest (whose state is forgotten), or refused while every kept one was seen recently.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from chatagent import Assistant, LongTermMemory, ScriptedLLM, Session
from chatagent.gui import WebUI
from chatagent.gui.security import BROWSER_COOKIE

pytestmark = pytest.mark.timeout(120)

SECRET = "My alarm code is 4711-9902."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Page:
    def __init__(self, url: str, store: str, memory: str, browsers: Path) -> None:
        self.url, self.store, self.memory, self.browsers = url, store, memory, browsers

    def visit(self, cookie: str | None = None) -> httpx.Response:
        """One visit as a fresh client (its own connection; a cookie only when given)."""
        headers = {"cookie": f"{BROWSER_COOKIE}={cookie}"} if cookie else {}
        return httpx.get(self.url, headers=headers, timeout=30)

    def fresh(self) -> tuple[str, httpx.Response]:
        """A fresh client: it loads the page (and gets an identity's cookie), then uploads a file with it (what a
        turn with an attachment starts with: state the page keeps)."""
        cookie = cookie_of(self.visit())
        return cookie, self.upload(cookie)

    def upload(self, cookie: str) -> httpx.Response:
        files = {"files": ("note.txt", SECRET.encode(), "text/plain")}
        return httpx.post(self.url + "gradio_api/upload", files=files, headers={"cookie": f"{BROWSER_COOKIE}={cookie}"},
                          timeout=30)  # fmt: skip

    def state_of(self, user: str) -> tuple[int, int]:
        """(conversations, memories) the page keeps for `user`."""
        return len(Session.list(self.store, user=user)), len(LongTermMemory(user, self.memory, embedder=None).list())


def cookie_of(response: httpx.Response) -> str:
    value = response.cookies.get(BROWSER_COOKIE)
    assert value, f"no identity was given: {response.status_code}"
    return value


@pytest.fixture
def page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Page]]:
    monkeypatch.setenv("CHATAGENT_WORKSPACE", str(tmp_path / "workspace"))  # the page's list of browsers, its own
    uis: list[WebUI] = []

    def start(**limits: float) -> Page:
        store, memory = f"sqlite:///{tmp_path}/conversations.db", f"sqlite:///{tmp_path}/memory.db"
        bot = Assistant(llm=ScriptedLLM(["ok"]), memory=LongTermMemory(store=memory, embedder=None))
        ui = WebUI(bot, conversations=store)
        url = ui.run(server_port=free_port(), block=False, **limits).rstrip("/")  # type: ignore[arg-type]
        uis.append(ui)
        return Page(url + "/", store, memory, tmp_path / "workspace" / "gui" / "browsers.json")

    yield start
    for ui in uis:
        ui.close()


def hold_state(page: Page, cookie: str) -> str:
    """What a visitor's turns leave (a conversation, a memory), under the identity its cookie names."""
    user = "browser:" + cookie.rpartition(".")[0]
    Session(None, page.store, user=user).append([{"role": "user", "content": SECRET}])
    LongTermMemory(user, page.memory, embedder=None).remember(SECRET)
    assert page.state_of(user) == (1, 1)
    return user


def test_many_fresh_clients_take_the_places_of_idle_ones_and_their_state_goes(page) -> None:  # type: ignore[no-untyped-def]
    site = page(max_browsers=3, browser_idle=0)  # every browser is idle at once: the oldest makes room
    first, used = site.fresh()
    assert used.status_code == 200, used.text
    victim = hold_state(site, first)
    assert site.upload(first).status_code == 200 and site.state_of(victim) == (1, 1)  # still kept
    made = [site.fresh() for _ in range(12)]  # twelve fresh clients, no cookie, each leaving state
    assert [r.status_code for _, r in made] == [200] * 12 and len({c for c, _ in made}) == 12
    assert site.state_of(victim) == (0, 0), "a forgotten browser's conversations and memories were kept"
    kept = json.loads(site.browsers.read_text())
    assert len(kept) <= 3 and first.rpartition(".")[0] not in kept, "the page keeps more browsers than it may"


def test_while_every_kept_browser_is_recent_a_new_one_is_refused_and_theirs_stay(page) -> None:  # type: ignore[no-untyped-def]
    site = page(max_browsers=3, browser_idle=3600)
    made = [site.fresh() for _ in range(3)]
    assert [r.status_code for _, r in made] == [200] * 3
    users = [hold_state(site, c) for c, _ in made]
    refused = [site.fresh()[1] for _ in range(20)]  # the page itself still loads for them: it keeps nothing
    assert {r.status_code for r in refused} == {503}, "a page full of recent visitors took state from more"
    for (c, _), user in zip(made, users, strict=True):
        assert site.upload(c).status_code == 200  # the kept ones go on as they were
        assert site.state_of(user) == (1, 1)
    assert len(json.loads(site.browsers.read_text())) == 3

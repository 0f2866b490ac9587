"""Attacks on `chatagent serve` at the HTTP level (issue 24 items 4, 16, 20), each against a real server on
loopback: a web page cannot drive it (CSRF: a cross-site text/plain POST; DNS rebinding: a foreign Host), a slow or
greedy client cannot hold its connections, and an IPv6 form of a loopback address is judged as that address."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from chatagent import FnCallAgent, ScriptedLLM, tool, tool_call
from chatagent.server.runner import AgentServer
from tests.security.test_security_serve import Site, ask_about, assistant

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def ran() -> list:
    return []


@pytest.fixture
def server(ran: list) -> Iterator[AgentServer]:
    @tool
    def send_mail(to: str) -> str:
        """Send mail."""
        ran.append(to)
        return "sent"

    llm = ScriptedLLM([tool_call("send_mail", {"to": "attacker@example.com"})], default="Sent.")
    with AgentServer(FnCallAgent(llm=llm, function_list=[send_mail], name="mailer"), "127.0.0.1", 0) as s:
        yield s


BODY = b'{"model": "mailer", "messages": [{"role": "user", "content": "mail my notes"}]}'


def test_a_cross_site_text_plain_post_runs_nothing(server: AgentServer, ran: list) -> None:
    """What a web page's <form enctype="text/plain"> or fetch(no-cors) sends: no preflight, any body."""
    r = httpx.post(f"{server.url}/chat/completions", content=BODY, timeout=30,
                   headers={"Content-Type": "text/plain", "Origin": "http://evil.example"})  # fmt: skip
    assert r.status_code in (403, 415) and ran == []
    r = httpx.post(f"{server.url}/chat/completions", content=BODY, headers={"Content-Type": "text/plain"}, timeout=30)
    assert r.status_code == 415 and ran == []


def test_a_foreign_origin_is_refused_even_with_json(server: AgentServer, ran: list) -> None:
    headers = {"Content-Type": "application/json", "Origin": "http://evil.example"}
    r = httpx.post(f"{server.url}/chat/completions", content=BODY, headers=headers, timeout=30)
    assert r.status_code == 403 and ran == []
    same = {"Content-Type": "application/json", "Origin": server.url.removesuffix("/v1")}
    assert httpx.post(f"{server.url}/chat/completions", content=BODY, headers=same, timeout=30).status_code == 200


def test_a_rebinding_host_name_is_refused(server: AgentServer, ran: list) -> None:
    """DNS rebinding: the page's own name now resolves to 127.0.0.1, so the browser sends that name as the Host."""
    for path, method in [("/chat/completions", "POST"), ("/models", "GET")]:
        r = httpx.request(method, f"{server.url}{path}", content=BODY, timeout=30,
                          headers={"Host": "rebind.evil.example:80", "Content-Type": "application/json"})  # fmt: skip
        assert r.status_code == 421, r.text
    assert ran == []
    assert httpx.get(f"{server.url}/models", headers={"Host": "localhost"}, timeout=30).status_code == 200


def test_a_configured_name_is_answered() -> None:
    agent = FnCallAgent(llm=ScriptedLLM(default="hi"), name="a")
    with AgentServer(agent, "127.0.0.1", 0, server_names=["chat.example.com"]) as server:
        assert httpx.get(f"{server.url}/models", headers={"Host": "chat.example.com"}).status_code == 200
        assert httpx.get(f"{server.url}/models", headers={"Host": "other.example.com"}).status_code == 421


# ---- 24.16: connections -----------------------------------------------------------------------------------------


def _closed(s: socket.socket, deadline: float) -> bool:
    """Whether the server closed `s` (reads EOF or a reset) before `deadline` (monotonic)."""
    while time.monotonic() < deadline:
        s.settimeout(max(deadline - time.monotonic(), 0.01))
        try:
            if s.recv(4096) == b"":
                return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
    return False


def test_a_slow_loris_client_is_cut_off_and_connections_are_capped() -> None:
    agent = FnCallAgent(llm=ScriptedLLM(default="ok"), name="a")
    with AgentServer(agent, "127.0.0.1", 0, header_timeout=1, max_connections=20) as server:
        host, port = server.socket.getsockname()[:2]
        loris = [socket.create_connection((host, port), timeout=10) for _ in range(20)]
        try:
            for s in loris:
                s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # the rest never comes
            extra = socket.create_connection((host, port), timeout=10)
            with extra:
                assert extra.recv(64).startswith(b"HTTP/1.1 503")  # past the cap: refused at once
            deadline = time.monotonic() + 30
            assert all(_closed(s, deadline) for s in loris)  # each one cut off when its headers are late
        finally:
            for s in loris:
                s.close()
        body = {"model": "a", "messages": [{"role": "user", "content": "hi"}]}
        assert httpx.post(f"{server.url}/chat/completions", json=body, timeout=30).status_code == 200


# ---- 24.20: IPv4 inside IPv6 -----------------------------------------------------------------------------------


@pytest.fixture
def admin() -> Iterator[Site]:
    site = Site({"/secret.txt": (200, {"Content-Type": "text/plain"}, b"The token is T0P.")})
    yield site
    site.close()


def test_an_ipv4_compatible_ipv6_loopback_address_is_refused(tmp_path, admin: Site) -> None:  # type: ignore[no-untyped-def]
    with AgentServer(assistant(tmp_path), "127.0.0.1", 0) as server:
        for host in ("[::127.0.0.1]", "[::ffff:0:127.0.0.1]", "[::7f00:1]"):
            r = ask_about(server, f"http://{host}:{admin.port}/secret.txt")
            assert r.status_code == 400 and r.json()["error"]["code"] == "url_not_allowed", (host, r.text)
    assert admin.seen == []

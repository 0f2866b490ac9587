"""Attacks on `chatagent serve` by a remote client (issue 19, items 7 and 8). Each test performs the attack against
a real server on loopback and fails on the stdlib server that came before the ASGI one.

Names that resolve to loopback (a "public" host pointing at this machine, DNS rebinding) are simulated by replacing
`socket.getaddrinfo` in this process, which every lookup of the server's goes through."""

from __future__ import annotations

import gc
import ipaddress
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from chatagent import BasicAgent, ScriptedLLM
from chatagent.server.runner import AgentServer

pytestmark = pytest.mark.timeout(120)

SECRET = "ADMIN-PANEL-TOKEN-8f3e1d"


class Site:
    """A loopback web server: `routes` maps a path to (status, headers, body); every request path is recorded."""

    def __init__(self, routes: dict[str, tuple[int, dict, bytes]], host: str = "127.0.0.1", port: int = 0) -> None:
        self.routes = routes
        self.seen: list[str] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                site.seen.append(self.path)
                status, headers, body = site.routes.get(self.path, (404, {}, b"no"))
                self.send_response(status)
                for k, v in {"Content-Length": str(len(body)), **headers}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def admin() -> Iterator[Site]:
    site = Site({"/admin/secret.txt": (200, {"Content-Type": "text/plain"}, f"The token is {SECRET}.".encode())})
    yield site
    site.close()


@pytest.fixture
def fake_dns(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Names -> the addresses they resolve to, one list per lookup (the last repeats), for this process."""
    names: dict[str, list[str]] = {}
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):  # type: ignore[no-untyped-def]
        answers = names.get(host.decode() if isinstance(host, bytes) else host)
        if answers is None:
            return real(host, port, *args, **kwargs)
        address = answers.pop(0) if len(answers) > 1 else answers[0]
        return real(address, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return names


def echo_system(msgs, fns) -> str:
    """A model that repeats what it was given: whatever reached its prompt comes back in the answer."""
    return "I was told: " + "\n".join(m.text for m in msgs)


def assistant(tmp_path: Path) -> object:
    from chatagent import Assistant
    from chatagent.rag.store import DocStore

    return Assistant(llm=ScriptedLLM(default=echo_system), name="docs", rag_cfg={"store": DocStore(tmp_path / "ws")})


def ask_about(server: AgentServer, url: str) -> httpx.Response:
    content = [{"type": "text", "text": "Summarise this file."}, {"file": url}]
    body = {"model": "docs", "messages": [{"role": "user", "content": content}]}
    return httpx.post(f"{server.url}/chat/completions", json=body, timeout=60)


# ---- 19.7: SSRF --------------------------------------------------------------------------------------------------


def test_a_client_cannot_make_the_server_fetch_its_own_admin_page(tmp_path: Path, admin: Site) -> None:
    with AgentServer(assistant(tmp_path), "127.0.0.1", 0) as server:
        r = ask_about(server, f"http://127.0.0.1:{admin.port}/admin/secret.txt")
        assert SECRET not in r.text
        assert r.status_code == 400 and r.json()["error"]["code"] == "url_not_allowed"
        assert admin.seen == []  # not even asked
        assert ask_about(server, "data:text/plain,hello").status_code == 200  # the server goes on


def test_closed_and_open_ports_cannot_be_told_apart(tmp_path: Path, admin: Site) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()
    with AgentServer(assistant(tmp_path), "127.0.0.1", 0) as server:
        answers = []
        for port in (admin.port, closed_port):
            r = ask_about(server, f"http://127.0.0.1:{port}/admin/secret.txt")
            answers.append((r.status_code, r.text.replace(str(port), "PORT")))
    assert answers[0] == answers[1]


def test_a_public_looking_name_that_resolves_to_this_machine_is_refused(
    tmp_path: Path, admin: Site, fake_dns: dict
) -> None:
    fake_dns["intranet.example.com"] = ["127.0.0.1"]
    fake_dns["metadata.example.com"] = ["169.254.169.254"]
    with AgentServer(assistant(tmp_path), "127.0.0.1", 0) as server:
        r = ask_about(server, f"http://intranet.example.com:{admin.port}/admin/secret.txt")
        assert r.status_code == 400 and SECRET not in r.text and admin.seen == []
        assert ask_about(server, "http://metadata.example.com/latest/meta-data/").status_code == 400
        assert ask_about(server, f"http://[::ffff:127.0.0.1]:{admin.port}/admin/secret.txt").status_code == 400
        assert ask_about(server, f"http://2130706433:{admin.port}/admin/secret.txt").status_code == 400  # 127.0.0.1


def test_every_redirect_is_checked(tmp_path: Path, admin: Site, fake_dns: dict) -> None:
    """files.example.com is allowed (it resolves to loopback here, as an internal file server would to a private
    address); it redirects to the admin page, which is not."""
    target = f"http://127.0.0.1:{admin.port}/admin/secret.txt"
    redirector = Site({"/doc.txt": (302, {"Location": target}, b"")})
    fake_dns["files.example.com"] = ["127.0.0.1"]
    try:
        agent = assistant(tmp_path)
        with AgentServer(agent, "127.0.0.1", 0, allow_hosts=["files.example.com"]) as server:
            r = ask_about(server, f"http://files.example.com:{redirector.port}/doc.txt")
        assert redirector.seen == ["/doc.txt"]  # the allowed host was fetched...
        assert admin.seen == [] and SECRET not in r.text  # ...its redirect to this machine was not followed
        assert r.status_code == 200 and "could not be fetched" in r.json()["choices"][0]["message"]["content"]
    finally:
        redirector.close()


def test_the_checked_address_is_the_one_connected_to(tmp_path: Path, admin: Site, fake_dns: dict) -> None:
    """DNS rebinding: the name resolves to an allowed address for the checks (the server's, on the request, and the
    fetch's own), then to the admin's for any later lookup. The fetch must connect to the address it checked."""
    decoy_page = (200, {"Content-Type": "text/plain"}, b"Nothing to see here.")
    decoy = Site({"/admin/secret.txt": decoy_page}, "127.0.0.2", admin.port)  # the admin's port, another address
    fake_dns["rebind.example.com"] = ["127.0.0.2", "127.0.0.2", "127.0.0.1"]
    try:
        with AgentServer(assistant(tmp_path), "127.0.0.1", 0, allow_hosts=["127.0.0.2/32"]) as server:
            r = ask_about(server, f"http://rebind.example.com:{decoy.port}/admin/secret.txt")
        assert "Nothing to see here" in r.text and SECRET not in r.text
        assert decoy.seen == ["/admin/secret.txt"] and admin.seen == []
    finally:
        decoy.close()


def test_an_allowlist_opens_a_private_host(tmp_path: Path, admin: Site) -> None:
    with AgentServer(assistant(tmp_path), "127.0.0.1", 0, allow_hosts=["127.0.0.1"]) as server:
        r = ask_about(server, f"http://127.0.0.1:{admin.port}/admin/secret.txt")
    assert r.status_code == 200 and SECRET in r.json()["choices"][0]["message"]["content"]


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("8.8.8.8", True), ("2001:4860:4860::8888", True), ("127.0.0.1", False), ("10.1.2.3", False),
        ("172.16.0.1", False), ("192.168.1.1", False), ("169.254.169.254", False), ("100.64.0.1", False),
        ("0.0.0.0", False), ("224.0.0.1", False), ("255.255.255.255", False), ("240.0.0.1", False), ("::1", False),
        ("::", False), ("fe80::1", False), ("fc00::1", False), ("ff02::1", False), ("::ffff:127.0.0.1", False),
        ("::ffff:10.0.0.1", False), ("2002:7f00:1::1", False), ("64:ff9b::7f00:1", False),
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", False),  # Teredo, whose client is 127.0.0.1
    ],
)  # fmt: skip
def test_which_addresses_count_as_public(address: str, public: bool) -> None:
    from chatagent.utils.url_fetch import is_public

    assert is_public(ipaddress.ip_address(address)) is public


def test_a_bad_allowlist_entry_is_refused_at_startup() -> None:
    with pytest.raises(ValueError, match="not a host name"):
        AgentServer(BasicAgent(llm=ScriptedLLM(default="x")), "127.0.0.1", 0, allow_hosts=["http://x/"])


# ---- 19.8: HTTP handling -----------------------------------------------------------------------------------------


def address(server: AgentServer) -> tuple[str, int]:
    parts = httpx.URL(server.url)
    return parts.host, parts.port  # type: ignore[return-value]


def raw_exchange(server: AgentServer, data: bytes, wait: float = 5.0) -> bytes:
    """Send `data` on one connection and read until the server closes it (or `wait` seconds of silence)."""
    host, port = address(server)
    with socket.create_connection((host, port), timeout=wait) as s:
        s.sendall(data)
        out = b""
        while True:
            try:
                part = s.recv(65536)
            except TimeoutError:
                return out
            if not part:
                return out
            out += part


def still_serving(server: AgentServer) -> bool:
    body = {"model": server.model_name, "messages": [{"role": "user", "content": "hi"}]}
    headers = {"Authorization": "Bearer k-secret-1"}
    return httpx.post(f"{server.url}/chat/completions", json=body, headers=headers, timeout=20).status_code == 200


@pytest.fixture
def server() -> Iterator[AgentServer]:
    with AgentServer(BasicAgent(llm=ScriptedLLM(default="ok")), "127.0.0.1", 0, api_key="k-secret-1") as s:
        yield s


def test_an_unauthenticated_requests_body_is_never_read_as_a_request(server: AgentServer) -> None:
    smuggled = b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    out = raw_exchange(server, head + b"Content-Length: %d\r\n\r\n" % len(smuggled) + smuggled)
    assert out.startswith(b"HTTP/1.1 401") and out.count(b"HTTP/1.1 ") == 1, out
    assert still_serving(server)


def test_deeply_nested_json_is_a_400(server: AgentServer) -> None:
    body = b"[" * 100_000 + b"]" * 100_000
    headers = {"Authorization": "Bearer k-secret-1", "Content-Type": "application/json"}
    r = httpx.post(f"{server.url}/chat/completions", content=body, headers=headers)
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"
    assert "Traceback" not in r.text and still_serving(server)


def test_half_open_connections_take_no_thread_each(server: AgentServer) -> None:
    host, port = address(server)
    before = threading.active_count()
    held = []
    try:
        for _ in range(400):
            s = socket.create_connection((host, port), timeout=10)
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and never the rest
            held.append(s)
        assert still_serving(server)
        assert threading.active_count() - before < 20
    finally:
        for s in held:
            s.close()


def test_a_client_too_slow_to_send_its_body_gets_408() -> None:
    with AgentServer(BasicAgent(llm=ScriptedLLM(default="ok")), "127.0.0.1", 0, body_timeout=1) as server:
        head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" \
            b"Content-Length: 100\r\n\r\n"  # fmt: skip
        out = raw_exchange(server, head + b'{"messages": ', wait=15)
        assert out.startswith(b"HTTP/1.1 408"), out
        assert b"request_timeout" in out
        body = {"model": server.model_name, "messages": [{"role": "user", "content": "hi"}]}
        assert httpx.post(f"{server.url}/chat/completions", json=body, timeout=20).status_code == 200


def test_a_client_that_stops_reading_its_stream_holds_up_no_one_else() -> None:
    """A client asks for a long streamed answer and never reads it: once the socket buffers are full, the server
    must wait on that connection alone (a server that blocks on the write stops answering everyone)."""
    agent = BasicAgent(llm=ScriptedLLM(default="x" * (16 << 20), chunk_size=65536), name="big")
    with AgentServer(agent, "127.0.0.1", 0, api_key="k-secret-1") as server:
        host, port = address(server)
        body = json.dumps({"model": "big", "stream": True, "messages": [{"role": "user", "content": "go"}]}).encode()
        head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer k-secret-1\r\n"
        slow = socket.socket()
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.settimeout(20)
        try:
            slow.connect((host, port))
            slow.sendall(head + b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            assert slow.recv(64).startswith(b"HTTP/1.1 200")  # the stream began; it is never read again
            for _ in range(3):
                assert still_serving(server)
        finally:
            slow.close()
        assert still_serving(server)


def test_fetched_url_bodies_are_bounded_in_memory(tmp_path: Path) -> None:
    from chatagent.rag.store import DocStore
    from chatagent.rag.urls import URL_CACHE_BYTES

    blob = b"\0" * (8 << 20)
    site = Site({f"/blob{i}.bin": (200, {"Content-Type": "application/octet-stream"}, blob) for i in range(8)})
    try:
        store = DocStore(tmp_path / "ws")
        for i in range(8):
            store.retrieve([f"http://127.0.0.1:{site.port}/blob{i}.bin"], "anything", 100)  # fetched, unreadable
        kept = sum(len(entry[1]) for entry in store._urls.entries.values())
    finally:
        site.close()
    assert len(site.seen) == 8
    assert kept <= URL_CACHE_BYTES < 8 * len(blob)


def test_responses_are_sent_with_nagle_off(server: AgentServer) -> None:
    """A response on a reused keep-alive connection took 44 ms (headers and body written apart, Nagle's algorithm
    waiting for the client's delayed ACK). The server's connection sockets must have TCP_NODELAY."""
    host, port = address(server)
    with socket.create_connection((host, port), timeout=10) as s:
        for _ in range(2):
            s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            got = b""
            while not got.endswith(b'"ok"}'):
                got += s.recv(65536)
            assert got.startswith(b"HTTP/1.1 200")
        ours = s.getsockname()
        theirs = []  # TCP_NODELAY of each socket object on the server's side (read at once: another object
        for obj in gc.get_objects():  # wrapping a descriptor may be closed by the server between two calls, EBADF)
            if isinstance(obj, socket.socket) and obj.fileno() != -1:
                try:
                    if obj.getpeername() == ours:
                        theirs.append(obj.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                except OSError:
                    pass
        assert theirs, "the server's side of the connection was not found"
        assert all(theirs)


def test_keys_are_compared_whole(server: AgentServer) -> None:
    url = f"{server.url}/models"
    for given in ("k-secret-", "k-secret-12", "K-SECRET-1", "k-secret-1 extra", "Basic k-secret-1"):
        assert httpx.get(url, headers={"Authorization": f"Bearer {given}"}).status_code == 401
    assert httpx.get(url, headers={"Authorization": "Basic k-secret-1"}).status_code == 401
    assert httpx.get(url, headers={"Authorization": "bearer k-secret-1"}).status_code == 200
    assert json.loads(httpx.get(url, headers={"Authorization": "Bearer k-secret-1"}).text)["data"]

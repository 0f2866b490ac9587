"""The web UI's guards, as ASGI middleware: a Content-Security-Policy that lets the page load and send nothing
outside its own origin, with the usual hardening headers (`SecurityHeaders`); requests whose Host or Origin is not
this server's refused (`HostGuard`: DNS rebinding, other sites); and, without a login, a signed per-browser
identity (`BrowserIdentity`), so that each browser sees only its own conversations.

A reply can carry text a prompt-injected document put there. The renderer (chatagent/gui/render.py) shows Markdown
images as links and escapes HTML; this policy is the second guard: whatever still ends up in the page
(an image, a script, a stylesheet with `url()`, a `fetch`), the browser refuses to contact another origin.
Scripts and styles may be inline because Gradio's page needs that; they still cannot reach anywhere else.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from chatagent.utils.workspace import private_file, workspace_dir

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self' 'unsafe-inline' 'unsafe-eval'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data: blob:",
        "media-src 'self' data: blob:",
        "font-src 'self' data:",
        "connect-src 'self'",
        "frame-src 'self'",
        "worker-src 'self' blob:",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'self'",
    ]
)
HEADERS: list[tuple[bytes, bytes]] = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class SecurityHeaders:
    """ASGI middleware adding `HEADERS` to every HTTP response (replacing any the app set itself)."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name for name, _ in HEADERS}
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                message["headers"] = kept + HEADERS
            await send(message)

        await self.app(scope, receive, send_with_headers)


class HostGuard:
    """ASGI middleware refusing requests whose Host does not name this server (DNS rebinding: 421) or whose Origin
    is another site's (403), HTTP and WebSocket alike (`chatagent.utils.origins`)."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], check: Any) -> None:
        self.app, self.check = app, check

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            headers = dict(scope.get("headers") or [])
            host, origin = headers.get(b"host"), headers.get(b"origin")
            refused = self.check.refusal(
                host.decode("latin-1") if host is not None else None,
                origin.decode("latin-1") if origin is not None else None,
            )
            if refused is not None:
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                body = refused[1].encode()
                await send({"type": "http.response.start", "status": refused[0], "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"), (b"content-length", b"%d" % len(body))]})  # fmt: skip
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


BROWSER_COOKIE = "chatagent_browser"


class BrowserIdentity:
    """ASGI middleware giving each browser its own identity when the page has no login: a random id in a cookie
    signed with the server's key (HttpOnly, SameSite=Strict). A request without a valid one gets a new one (in
    its response, and in its own headers so that the handlers see it); `browser_of` reads it back."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], key: bytes) -> None:
        self.app, self.key = app, key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or browser_of(_cookie_header(scope), self.key) is not None:
            await self.app(scope, receive, send)
            return
        value = signed(secrets.token_urlsafe(18), self.key)
        headers = [(k, v) for k, v in scope.get("headers") or [] if k != b"cookie"]
        old = _cookie_header(scope)
        cookie = f"{old}; {BROWSER_COOKIE}={value}" if old else f"{BROWSER_COOKIE}={value}"
        scope = {**scope, "headers": [*headers, (b"cookie", cookie.encode("latin-1"))]}
        set_cookie = f"{BROWSER_COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age=31536000".encode()

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"set-cookie", set_cookie)]
            await send(message)

        await self.app(scope, receive, send_with_cookie)


def _cookie_header(scope: Scope) -> str:
    return b"; ".join(v for k, v in scope.get("headers") or [] if k == b"cookie").decode("latin-1")


def signed(browser_id: str, key: bytes) -> str:
    return browser_id + "." + hmac.new(key, browser_id.encode(), hashlib.sha256).hexdigest()[:32]


def browser_of(cookie_header: str, key: bytes) -> str | None:
    """The browser id in a Cookie header, if its signature is ours."""
    for part in cookie_header.split(";"):
        name, _, value = part.strip().partition("=")
        if name == BROWSER_COOKIE:
            browser_id = value.rpartition(".")[0]
            if browser_id and hmac.compare_digest(signed(browser_id, key), value):
                return browser_id
    return None


def identity_key() -> bytes:
    """The key that signs browser identities: kept in the workspace (0600), so identities outlive a restart."""
    path = workspace_dir("gui") / "identity.key"
    private_file(path)
    key = path.read_bytes()
    if len(key) < 32:
        key = secrets.token_bytes(32)
        path.write_bytes(key)
    return key

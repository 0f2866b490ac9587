"""The web UI's guards, as ASGI middleware: a Content-Security-Policy that lets the page load and send nothing
outside its own origin, with the usual hardening headers (`SecurityHeaders`); requests whose Host or Origin is not
this server's refused (`HostGuard`: DNS rebinding, other sites); and, without a login, a signed per-browser
identity (`BrowserIdentity`), so that each browser sees only its own conversations, of which the page keeps a
bounded number (`Browsers`: a flood of fresh clients cannot mint unlimited identities, each with its state).

A reply can carry text a prompt-injected document put there. The renderer (chatagent/gui/render.py) shows Markdown
images as links and escapes HTML; this policy is the second guard: whatever still ends up in the page
(an image, a script, a stylesheet with `url()`, a `fetch`), the browser refuses to contact another origin.
Scripts and styles may be inline because Gradio's page needs that; they still cannot reach anywhere else.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from chatagent.utils.workspace import private_file, workspace_dir

logger = logging.getLogger("chatagent.gui")

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
DEFAULT_MAX_BROWSERS = 1000  # browser identities a login-less web UI keeps, each with its state
DEFAULT_BROWSER_IDLE = 3600.0  # seconds unseen after which a browser's place may go to a new one
_READS = ("GET", "HEAD", "OPTIONS")  # requests that read: a browser is kept (admitted) at its first other one
_FULL = b"this page has as many visitors as it keeps: try again later"


class Browsers:
    """The browser identities a login-less page keeps, and so the state they hold (conversations with their uploads,
    memories, traces): at most `limit`, each with when it was last seen, in a file of the workspace (0600) so that
    they outlive a restart. A browser beyond the limit takes the place of the one unseen longest, if that one was
    unseen for more than `idle` seconds: its state is forgotten (`forget('browser:<id>')`) and its identity with it;
    when every one was seen more recently, the new browser is refused until one is idle."""

    def __init__(self, forget: Callable[[str], None], limit: int = DEFAULT_MAX_BROWSERS,
                 idle: float = DEFAULT_BROWSER_IDLE, path: Path | None = None) -> None:  # fmt: skip
        if type(limit) is not int or limit < 1:
            raise ValueError(f"max_browsers must be a positive integer, got {limit!r}")
        if not isinstance(idle, (int, float)) or idle < 0:
            raise ValueError(f"browser_idle must be a number of seconds, at least 0, got {idle!r}")
        self.forget, self.limit, self.idle = forget, limit, float(idle)
        self.path = path or workspace_dir("gui") / "browsers.json"
        self._lock = threading.Lock()
        self.seen: dict[str, float] = self._load()

    def _load(self) -> dict[str, float]:
        private_file(self.path)
        try:
            found = json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            logger.warning("the web UI's list of browsers could not be read: it starts empty")
            return {}
        if not isinstance(found, dict):
            return {}
        return {str(k): float(v) for k, v in found.items() if isinstance(v, (int, float))}

    def _save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(self.seen, f)
        os.replace(tmp, self.path)

    def known(self, browser_id: str) -> bool:
        """Whether the page keeps `browser_id` (then it is seen now)."""
        with self._lock:
            if browser_id not in self.seen:
                return False
            self.seen[browser_id] = time.time()
            return True

    def admit(self, browser_id: str) -> bool:
        """Keep `browser_id` (a new browser, or one whose place went to another), in the place of the one unseen
        longest when the page keeps `limit` already; False when every one was seen within `idle` seconds."""
        gone: list[str] = []
        with self._lock:
            now = time.time()
            while len(self.seen) >= self.limit:
                oldest = min(self.seen, key=self.seen.__getitem__)
                if now - self.seen[oldest] < self.idle:
                    break
                del self.seen[oldest]
                gone.append(oldest)
            admitted = len(self.seen) < self.limit
            if admitted:
                self.seen[browser_id] = now
            if admitted or gone:
                self._save()
        for old in gone:
            try:
                self.forget(f"browser:{old}")
            except Exception as e:  # the place is given all the same: the log says what was left behind
                logger.error("the state of a forgotten browser could not be removed: %s", type(e).__name__)
        return admitted


class BrowserIdentity:
    """ASGI middleware giving each browser its own identity when the page has no login: a random id in a cookie
    signed with the server's key (HttpOnly, SameSite=Strict). A request without a valid one gets a new one (in
    its response, and in its own headers so that the handlers see it); `browser_of` reads it back. With `browsers`,
    a request that may leave state behind (not a GET, HEAD or OPTIONS: a turn, an upload, the page's socket) is
    served for an identity the page keeps (`Browsers`): a new one, or one whose place went to another, is admitted
    first (503 when the page keeps as many as it may, all of them seen recently)."""

    def __init__(
        self, app: Callable[[Scope, Receive, Send], Awaitable[None]], key: bytes, browsers: Browsers | None = None
    ) -> None:
        self.app, self.key, self.browsers = app, key, browsers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        found, browsers = browser_of(_cookie_header(scope), self.key), self.browsers
        writes = scope["type"] == "websocket" or scope.get("method") not in _READS  # what may leave state behind
        if found is not None and (browsers is None or browsers.known(found) or not writes):
            await self.app(scope, receive, send)
            return
        browser_id = found or secrets.token_urlsafe(18)
        if browsers is not None and writes and not await asyncio.to_thread(browsers.admit, browser_id):
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1013})
                return
            await send({"type": "http.response.start", "status": 503, "headers": [
                (b"content-type", b"text/plain; charset=utf-8"), (b"retry-after", b"60")]})  # fmt: skip
            await send({"type": "http.response.body", "body": _FULL})
            return
        if found is not None:  # its valid cookie, admitted again: the request goes on as it came
            await self.app(scope, receive, send)
            return
        value = signed(browser_id, self.key)
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

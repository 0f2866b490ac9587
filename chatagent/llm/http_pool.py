"""The HTTP clients of the model backends: one `httpx.Client` per (endpoint, options) in a process for the
synchronous path (`shared_sync_client`, thread-safe), and for asyncio one per (endpoint, options, event loop), built off
the loop and spread over several small connection pools (`shared_client`).

`shared_client(endpoint, options)` gives every model instance with the same endpoint and client options on one
event loop the same `httpx.AsyncClient`: its connections are reused across agents, and the first one is built
in a worker thread (with its SSL context, whose CA bundle takes ~20 ms of CPU to load, one per process and
settings), so that a new agent's first call does not stall the loop. The clients keep no cookies: a cookie one
model's server sets must not reach another model (another key) on the same endpoint; nor do they read any (httpx
would parse every answer's headers through urllib for a jar that keeps nothing). `request_url` parses a request's
URL once per process, not at every request.

A burst of requests (a thousand runs started at once) would open a thousand connections at once, and their connect
timeouts would count the time each waits for the busy event loop to run it: most would time out. `ShardedTransport`
lets at most `CONNECTING` connections be made at once; a request beyond waits for its turn, and its connect
timeout starts with its own connect (`_ConnectGate`).

httpcore's connection pool re-examines every connection it holds whenever a request starts or ends, work that
grows with the square of its size: one pool carrying a thousand concurrent streams spends most of the process's
time in that bookkeeping (measured: tens of seconds before the last stream's first chunk). `ShardedTransport`
gives each request to the first pool with fewer than `per_pool` requests in flight, making pools as needed, so
that no pool grows large. One request at a time always goes to the first pool, whose connections are reused as
with a single pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import select
import socket
import sys
import threading
import weakref
from collections.abc import AsyncIterator
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any

import httpx

from chatagent.utils.lazy import settle_imports

_lock = threading.Lock()
_ssl_contexts: dict[tuple[Any, ...], Any] = {}  # (trust_env, SSL_CERT_FILE, SSL_CERT_DIR) -> ssl.SSLContext
# event loop -> (endpoint, options) -> the client and what is being built for it
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Any]] = weakref.WeakKeyDictionary()
_sync_clients: dict[str, httpx.Client] = {}  # (process, endpoint, options) -> the synchronous client
_sync_lock = threading.Lock()  # not `_lock`: making a client takes that one for its SSL context
TIMEOUT = httpx.Timeout(600.0, connect=5.0)  # a stream may think for minutes; a connection is made in seconds


def shared_sync_client(endpoint: str, options: dict[str, Any]) -> httpx.Client:
    """The `httpx.Client` (made with `options`) of every model that calls `endpoint` in this process, from any
    thread; a forked child makes its own (its parent's connections are not its to use)."""
    key = f"{os.getpid()}\0{endpoint}\0{sorted(options.items())!r}"
    client = _sync_clients.get(key)
    if client is None:
        with _sync_lock:
            client = _sync_clients.get(key)
            if client is None:
                trust_env = options.get("trust_env", True)
                given: dict[str, Any] = {"timeout": TIMEOUT, **options}
                client = _Client(verify=_ssl_context(trust_env), cookies=no_cookies(), **given)
                _sync_clients[key] = client
    return client


async def shared_client(endpoint: str, options: dict[str, Any]) -> httpx.AsyncClient:
    """The `httpx.AsyncClient` (made with `options`) of every model that calls `endpoint` on the running event loop.
    The first call per (endpoint, options, loop) builds it in a worker thread; the calls after it cost a lookup."""
    loop = asyncio.get_running_loop()
    key = f"{endpoint}\0{sorted(options.items())!r}"
    with _lock:
        clients = _clients.get(loop)
        if clients is None:
            clients = _clients[loop] = {}
    client = clients.get(key)
    if isinstance(client, httpx.AsyncClient):
        return client
    if client is None:  # the first: build it; the others wait for the same build
        client = clients[key] = asyncio.ensure_future(asyncio.to_thread(_new_client, options))
    try:
        built = await asyncio.shield(client)
    except BaseException:
        if clients.get(key) is client and client.done():
            del clients[key]  # a failed build is tried again by the next call
        raise
    clients[key] = built
    return built


def _new_client(options: dict[str, Any]) -> httpx.AsyncClient:
    """A client of several small connection pools sharing one SSL context, keeping no cookies (in any thread).
    Timeouts: 5 s to connect, 600 s between two reads, unless `options` say otherwise (a request's own win)."""
    modules = len(sys.modules)
    trust_env = options.get("trust_env", True)
    ssl_context = _ssl_context(trust_env)
    # several small connection pools: one pool's bookkeeping grows with the square of its streams
    transport = ShardedTransport(verify=ssl_context, trust_env=trust_env)
    transport.add_pool()  # httpcore is imported here, not on the loop at the first request
    with contextlib.suppress(ImportError):  # nor anyio's asyncio backend, which httpcore's locks load on first use
        importlib.import_module("anyio._backends._asyncio")
        _first_exchange(importlib.import_module("h11"))  # (httpcore's, as anyio is: not chatagent's dependencies)
    options = {"timeout": TIMEOUT, **options}
    client = _AsyncClient(transport=transport, verify=ssl_context, cookies=no_cookies(), **options)
    settle_imports(modules)  # (httpcore, anyio, h11, imported here)
    return client


def _first_exchange(h11: Any) -> None:
    """One HTTP/1.1 request and streamed answer through h11 (httpcore's HTTP/1.1), in memory: what its first use
    does once (typing's unions built by its casts) done here, off the loop, not at the first answer."""
    conn = h11.Connection(h11.CLIENT)
    put = conn.send  # (bytes made in memory: nothing is sent)
    put(h11.Request(method="POST", target="/", headers=[("Host", "x"), ("Content-Length", "2")]))
    put(h11.Data(data=b"{}"))
    put(h11.EndOfMessage())
    conn.receive_data(_ANSWER)
    while type(conn.next_event()) is not h11.EndOfMessage:
        pass


_ANSWER = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"
)


def no_cookies() -> CookieJar:
    """A cookie jar that keeps none: a cookie one model's server sets must not reach another model on it."""
    return CookieJar(DefaultCookiePolicy(allowed_domains=[]))


class _NoCookies(httpx.Cookies):
    """The cookies of the shared clients: none, and an answer's `Set-Cookie` not even read (httpx's reading makes a
    urllib request and an email message of every answer's headers, and compiles urllib's patterns at the first)."""

    def __init__(self) -> None:
        super().__init__(no_cookies())

    def extract_cookies(self, response: httpx.Response) -> None:
        pass


class _KeepsNoCookies:
    """A client whose `cookies` are `_NoCookies` (httpx reads `self.cookies` at every request and answer)."""

    _none = _NoCookies()

    @property
    def cookies(self) -> httpx.Cookies:
        return self._none

    @cookies.setter
    def cookies(self, cookies: Any) -> None:
        raise TypeError("the shared model clients keep no cookies")


class _Client(_KeepsNoCookies, httpx.Client):
    pass


class _AsyncClient(_KeepsNoCookies, httpx.AsyncClient):
    pass


_urls: dict[str, httpx.URL] = {}


def request_url(url: str) -> httpx.URL:
    """`url` parsed (once per process: httpx would parse the string at every request; an `httpx.URL` it takes as
    it is)."""
    parsed = _urls.get(url)
    if parsed is None:
        if len(_urls) >= 256:  # a process calls a few servers; one that makes up URLs does not grow this
            _urls.clear()
        parsed = _urls[url] = httpx.URL(url)
    return parsed


def _ssl_context(trust_env: bool) -> Any:
    """httpx's SSL context for these settings, one per process (the CA bundle is loaded once)."""
    key = (trust_env, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
    context = _ssl_contexts.get(key)
    if context is None:
        with _lock:
            context = _ssl_contexts.get(key)
            if context is None:
                context = _ssl_contexts[key] = httpx.create_ssl_context(trust_env=trust_env)
    return context


CONNECTING = 16  # connections a client makes at once (the others wait their turn, their timeout not started)


class ShardedTransport(httpx.AsyncBaseTransport):
    """`httpx.AsyncHTTPTransport`s (made with `options`, sharing one SSL context), each with at most `per_pool`
    requests in flight; a request counts until its response is closed. At most `connecting` connections are
    made at once, over all the pools."""

    def __init__(self, per_pool: int = 8, connecting: int = CONNECTING, **options: Any) -> None:
        if "verify" not in options:  # one SSL context for all pools: loading the CA bundle once
            options["verify"] = _ssl_context(options.get("trust_env", True))
        self._options = options
        self._per_pool = per_pool
        self._pools: list[httpx.AsyncHTTPTransport] = []
        self._busy: list[int] = []
        self._connecting = connecting
        self._gate: asyncio.Semaphore | None = None  # made on the loop, at the first connection

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        busy = self._busy
        i = next((i for i, n in enumerate(busy) if n < self._per_pool), len(busy))
        if i == len(busy):
            self.add_pool()
        busy[i] += 1
        try:
            response = await self._pools[i].handle_async_request(request)
        except BaseException:
            busy[i] -= 1
            raise
        response.stream = _Counted(response.stream, busy, i)
        return response

    def add_pool(self) -> None:
        """One more connection pool (the requests go to the first one with room)."""
        pool = httpx.AsyncHTTPTransport(**self._options)
        # httpcore's pool (or proxy) makes its connections through this backend: the gate goes around it
        inner: Any = getattr(pool, "_pool", None)
        if inner is not None and hasattr(inner, "_network_backend"):
            inner._network_backend = _ConnectGate(inner._network_backend, self)
        self._pools.append(pool)
        self._busy.append(0)

    def gate(self) -> asyncio.Semaphore:
        """The semaphore a connection holds while it is being made (one for all the pools)."""
        if self._gate is None:
            self._gate = asyncio.Semaphore(self._connecting)
        return self._gate

    async def aclose(self) -> None:
        for pool in self._pools:
            await pool.aclose()


class _ConnectGate:
    """httpcore's network backend, with at most the transport's `connecting` TCP connections being made at once:
    the connect timeout counts from a connection's own start, not from when it began to wait."""

    def __init__(self, backend: Any, transport: ShardedTransport) -> None:
        self._backend = backend
        self._transport = transport

    async def connect_tcp(self, *args: Any, **kwargs: Any) -> Any:
        async with self._transport.gate():
            return _Stream(await self._backend.connect_tcp(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:  # connect_unix_socket, sleep: as they are
        return getattr(self._backend, name)


class _Stream:
    """httpcore's network stream, with its socket looked up once: the pool asks every idle connection whether its
    socket is readable (closed by the server) at every request's start and end, and anyio makes a dict of all its
    attributes at each lookup (a third of the loop's work with 50 agents at once)."""

    __slots__ = ("_stream", "_socket")

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._socket = stream.get_extra_info("socket")

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable" and self._socket is not None:
            return _readable(self._socket)
        if info == "socket":
            return self._socket
        return self._stream.get_extra_info(info)

    async def start_tls(self, *args: Any, **kwargs: Any) -> Any:
        return _Stream(await self._stream.start_tls(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:  # read, write, aclose: as they are
        return getattr(self._stream, name)


def _readable(sock: socket.socket) -> bool:
    """Whether `sock` has something to read (for an idle connection: the server closed it), as httpcore asks."""
    fd = sock.fileno()
    if fd < 0:
        return True
    if not hasattr(select, "poll"):  # Windows
        return bool(select.select([fd], [], [], 0)[0])
    poll = select.poll()
    poll.register(fd, select.POLLIN)
    return bool(poll.poll(0))


class _Counted(httpx.AsyncByteStream):
    """A response body that takes its request off its pool's count when closed."""

    __slots__ = ("_stream", "_busy", "_pool")

    def __init__(self, stream: Any, busy: list[int], pool: int) -> None:
        self._stream = stream
        self._busy = busy
        self._pool = pool

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._stream.__aiter__()  # the pool's own iterator: nothing added per read

    async def aclose(self) -> None:
        if self._pool >= 0:
            self._busy[self._pool] -= 1
            self._pool = -1
        await self._stream.aclose()


__all__ = ["ShardedTransport", "no_cookies", "request_url", "shared_client", "shared_sync_client"]

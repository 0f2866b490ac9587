"""An httpx transport that spreads concurrent requests over several connection pools.

httpcore's connection pool re-examines every connection it holds whenever a request starts or ends, work that
grows with the square of its size: one pool carrying a thousand concurrent streams spends most of the process's
time in that bookkeeping (measured: tens of seconds before the last stream's first chunk). `ShardedTransport`
gives each request to the first pool with fewer than `per_pool` requests in flight, making pools as needed, so
that no pool grows large. One request at a time always goes to the first pool, whose connections are reused as
with a single pool.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx


class ShardedTransport(httpx.AsyncBaseTransport):
    """`httpx.AsyncHTTPTransport`s (made with `options`, sharing one SSL context), each with at most `per_pool`
    requests in flight; a request counts until its response is closed."""

    def __init__(self, per_pool: int = 32, **options: Any) -> None:
        if "verify" not in options:  # one SSL context for all pools: loading the CA bundle once
            options["verify"] = httpx.create_ssl_context(trust_env=options.get("trust_env", True))
        self._options = options
        self._per_pool = per_pool
        self._pools: list[httpx.AsyncHTTPTransport] = []
        self._busy: list[int] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        busy = self._busy
        i = next((i for i, n in enumerate(busy) if n < self._per_pool), len(busy))
        if i == len(busy):
            self._pools.append(httpx.AsyncHTTPTransport(**self._options))
            busy.append(0)
        busy[i] += 1
        try:
            response = await self._pools[i].handle_async_request(request)
        except BaseException:
            busy[i] -= 1
            raise
        response.stream = _Counted(response.stream, busy, i)
        return response

    async def aclose(self) -> None:
        for pool in self._pools:
            await pool.aclose()


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


__all__ = ["ShardedTransport"]

"""HTTP to a party a run was configured to talk to (a remote A2A agent, ...): only to the origins it was configured
for, under the run's URL policy, and every response's body bounded.

    client = guarded_client(["https://partner.example"], policy=current_run().egress, max_bytes=8 << 20,
                            headers={"Authorization": "Bearer k"}, timeout=30)

Every request the client sends is checked before any connection is made: its origin (scheme, host and port) must
be one of `origins`, so the credentials in `headers` reach no one else, whatever a remote party names (a card's
interface URL, a redirect); and under a `policy` (`chatagent.utils.url_fetch.URLPolicy`, what `chatagent serve`
runs remote clients' requests under) the host must be one the policy allows, the connection going to the address
that was checked (no second lookup), unless it is one of `admitted` (hosts the operator configured, as a model
server is). A response body longer than `max_bytes` raises `FetchTooLarge` as it is read, so an endless answer
stops there. Needs httpx (imported here: import this module where it is used).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from typing import Any

import httpx

from chatagent.utils.url_fetch import BlockedURLError, FetchTooLarge, URLPolicy, checked_address

_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(url: str | httpx.URL) -> str:
    """`scheme://host:port` of `url`, lower-cased, the port always written."""
    u = url if isinstance(url, httpx.URL) else httpx.URL(str(url))
    port = u.port or _DEFAULT_PORTS.get(u.scheme, 0)
    return f"{u.scheme}://{u.host.lower().rstrip('.')}:{port}"


def host_of(url: str) -> str:
    """The host of `url`, lower-cased."""
    return httpx.URL(url).host.lower().rstrip(".")


class _Bounded(httpx.AsyncByteStream):
    """A response body that raises FetchTooLarge past `limit` bytes."""

    def __init__(self, stream: httpx.AsyncByteStream, limit: int, where: str) -> None:
        self._stream, self._limit, self._where = stream, limit, where

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for part in self._stream:
            size += len(part)
            if size > self._limit:
                raise FetchTooLarge(f"the answer of {self._where} is larger than {self._limit} bytes")
            yield part

    async def aclose(self) -> None:
        await self._stream.aclose()


class GuardedTransport(httpx.AsyncHTTPTransport):
    """The transport of `guarded_client` (see the module docstring)."""

    def __init__(
        self, origins: Iterable[str], policy: URLPolicy | None, admitted: Iterable[str], max_bytes: int
    ) -> None:
        super().__init__()
        self.origins = frozenset(origin_of(o) for o in origins)
        self.policy = policy
        self.admitted = frozenset(h.lower().rstrip(".") for h in admitted)
        self.max_bytes = max_bytes

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        origin = origin_of(request.url)
        if origin not in self.origins:
            raise BlockedURLError(f"{origin} is not where this connection was configured to go")
        host = request.url.host.lower().rstrip(".")
        if self.policy is not None and host not in self.admitted:
            port = request.url.port or _DEFAULT_PORTS[request.url.scheme]
            address = await asyncio.to_thread(checked_address, host, port, self.policy)  # resolving may block
            if request.url.scheme == "https":
                request.extensions = {**request.extensions, "sni_hostname": host}
            request.url = request.url.copy_with(host=address)  # the Host header keeps the name
        response = await super().handle_async_request(request)
        stream = response.stream
        assert isinstance(stream, httpx.AsyncByteStream)
        response.stream = _Bounded(stream, self.max_bytes, origin)
        return response


def guarded_client(
    origins: Iterable[str], *, policy: URLPolicy | None, admitted: Iterable[str] = (), max_bytes: int,
    headers: dict[str, str] | None = None, timeout: float,
) -> httpx.AsyncClient:  # fmt: skip
    """An `httpx.AsyncClient` that sends only to `origins`, under `policy`, reading at most `max_bytes` of each
    response (see the module docstring). Redirects are not followed."""
    transport = GuardedTransport(origins, policy, admitted, max_bytes)
    options: dict[str, Any] = {"headers": headers or {}, "timeout": timeout, "follow_redirects": False}
    return httpx.AsyncClient(transport=transport, trust_env=policy is None, **options)


__all__ = ["GuardedTransport", "guarded_client", "host_of", "origin_of"]

"""Fetching http(s) URLs: bounded in size and time, and for remote clients never this machine's own network.

    content, final_url, content_type = fetch(url, max_bytes=20 << 20, timeout=30)

By default a URL is fetched as any HTTP client would (the caller is the machine's own user). Inside
`public_urls_only(policy)` (what `chatagent serve` wraps every request in) the URL names a remote client's choice,
so its host must be public: the name is resolved once, every address it resolves to is checked (loopback,
private, link-local, carrier-grade NAT, multicast, reserved and unspecified addresses are refused, IPv4 and IPv6,
IPv4 embedded in IPv6 included), the connection goes to the checked address (no second lookup, so a name cannot
resolve to a public address for the check and a private one for the connection), and each redirect is checked the
same way. `URLPolicy(allow=[...])` opens hosts by name, address or network (`docs.internal`, `10.1.2.3`,
`10.0.0.0/8`). Refused URLs raise `BlockedURLError` before any connection is made, so a refusal says nothing
about what listens there.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import time
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, NamedTuple

from chatagent.errors import ChatAgentError

if TYPE_CHECKING:
    import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
MAX_REDIRECTS = 5
# IPv6 ranges whose last 32 bits are an IPv4 address: NAT64, IPv4-compatible (`::a.b.c.d`, deprecated but still
# parsed and routed by some stacks) and IPv4-translated (`::ffff:0:a.b.c.d`, SIIT)
_EMBEDDING = tuple(map(ipaddress.ip_network, ("64:ff9b::/96", "::/96", "::ffff:0:0:0/96")))


class FetchError(ChatAgentError):
    """The URL could not be fetched (the message says why, in words for a person)."""


class FetchTooLarge(FetchError):
    """The content is larger than the limit."""


class BlockedURLError(FetchError):
    """The URL leads to an address remote clients may not reach (this machine, a private network)."""


class URLPolicy(NamedTuple):
    """Where remote clients' URLs may lead: public addresses, and the hosts of `allow` (names, addresses, networks)."""

    names: frozenset[str] = frozenset()
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()

    @classmethod
    def allowing(cls, allow: Iterable[str] = ()) -> URLPolicy:
        """A policy opening the hosts in `allow`: a host name (exact), an IP address, or a network in CIDR form.
        ValueError names an entry that is none of these."""
        names: set[str] = set()
        networks = []
        for entry in allow:
            text = str(entry).strip().lower().rstrip(".")
            if not text:
                raise ValueError("an empty entry in the list of allowed hosts")
            try:
                networks.append(ipaddress.ip_network(text, strict=False))
                continue
            except ValueError:
                pass
            if "/" in text or ":" in text or not all(part for part in text.split(".")):
                raise ValueError(f"{entry!r} is not a host name, an IP address or a network like 10.0.0.0/8")
            names.add(text.encode("idna").decode("ascii") if not text.isascii() else text)
        return cls(frozenset(names), tuple(networks))


_POLICY: ContextVar[URLPolicy | None] = ContextVar("chatagent_url_policy", default=None)


def url_policy() -> URLPolicy | None:
    """The policy URLs fetched now are held to (None: any URL, the caller being the machine's own user)."""
    return _POLICY.get()


@contextlib.contextmanager
def public_urls_only(policy: URLPolicy | None = None) -> Iterator[URLPolicy]:
    """Within this block (and the tasks and worker threads it starts), URLs must lead to public hosts or to hosts
    `policy` allows."""
    policy = policy if policy is not None else URLPolicy()
    token = _POLICY.set(policy)
    try:
        yield policy
    finally:
        _POLICY.reset(token)


def _resolve(host: str, port: int) -> list[str]:
    """The addresses of `host`, each once, in the resolver's order."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))  # (an int only for families other than IP)


def is_public(ip: IPAddress) -> bool:
    """Whether a remote client may reach `ip`: a global unicast address, also when it embeds an IPv4 address."""
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if embedded is None and any(ip in net for net in _EMBEDDING):
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:  # judged by the IPv4 address it carries, whatever the IPv6 range says
            return is_public(embedded)
    return ip.is_global and not ip.is_multicast


def checked_address(host: str, port: int, policy: URLPolicy) -> str:
    """The address to connect to for `host` under `policy`: resolved once, every address checked. BlockedURLError
    if one is not allowed, FetchError if the name does not resolve."""
    name = host.lower().rstrip(".")
    try:
        addresses = _resolve(name, port)
    except (OSError, UnicodeError) as e:
        raise FetchError(f"the host {host!r} could not be resolved ({type(e).__name__})") from None
    if not addresses:
        raise FetchError(f"the host {host!r} could not be resolved")
    if name in policy.names:
        return addresses[0]
    for text in addresses:
        ip = ipaddress.ip_address(text.split("%", 1)[0])
        if not is_public(ip) and not any(ip in net for net in policy.networks if net.version == ip.version):
            raise BlockedURLError(
                f"the host {host!r} is on this machine or a private network, which this server does not fetch for "
                "its clients"
            )
    return addresses[0]


def check_url(url: str, policy: URLPolicy | None = None) -> None:
    """Raise BlockedURLError (or FetchError for a URL that is not http(s) or whose host does not resolve) unless
    `url` may be fetched under `policy` (default: the current one; nothing to check without one)."""
    policy = policy if policy is not None else url_policy()
    if policy is None:
        return
    target = _parsed(url)
    checked_address(target.raw_host.decode("ascii"), target.port or _default_port(target), policy)


def fetch(url: str, max_bytes: int, timeout: float) -> tuple[bytes, str, str]:
    """GET `url`, following up to 5 redirects: (content, final URL, content type). At most `max_bytes` within
    `timeout` seconds in all; FetchTooLarge, BlockedURLError (see the module docstring) or FetchError otherwise."""
    import httpx

    policy = url_policy()
    deadline = time.monotonic() + timeout
    target = _parsed(url)
    try:
        with httpx.Client(timeout=timeout, follow_redirects=False, trust_env=policy is None) as client:
            for _ in range(MAX_REDIRECTS + 1):
                response = client.send(_request(client, target, policy), stream=True)
                try:
                    if response.is_redirect:
                        target = _parsed(str(target.join(response.headers["location"])))
                        continue
                    if response.status_code >= 400:
                        raise FetchError(f"HTTP {response.status_code}")
                    content = _body(response, max_bytes, deadline, timeout)
                    return content, str(target), response.headers.get("content-type", "")
                finally:
                    response.close()
    except httpx.HTTPError as e:
        raise FetchError(f"{type(e).__name__}: {e}") from None
    raise FetchError(f"more than {MAX_REDIRECTS} redirects")


def _parsed(url: str) -> httpx.URL:
    import httpx

    try:
        target = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as e:
        raise FetchError(f"not a valid URL ({e})") from None
    if target.scheme not in ("http", "https") or not target.raw_host:
        raise FetchError("only http and https URLs with a host are fetched")
    return target


def _default_port(target: httpx.URL) -> int:
    return 443 if target.scheme == "https" else 80


def _request(client: httpx.Client, target: httpx.URL, policy: URLPolicy | None) -> httpx.Request:
    """The request for `target`: as is without a policy; else to the checked address, with the name as the Host
    header and for TLS (so the certificate is checked against the name)."""
    if policy is None:
        return client.build_request("GET", target)
    host = target.raw_host.decode("ascii")
    address = checked_address(host, target.port or _default_port(target), policy)
    extensions = {"sni_hostname": host} if target.scheme == "https" else {}
    headers = {"Host": target.netloc.decode("ascii")}
    return client.build_request("GET", target.copy_with(host=address), headers=headers, extensions=extensions)


def _body(response: httpx.Response, max_bytes: int, deadline: float, timeout: float) -> bytes:
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise FetchTooLarge(f"larger than {max_bytes} bytes")
    chunks: list[bytes] = []
    size = 0
    for part in response.iter_bytes():
        size += len(part)
        if size > max_bytes:
            raise FetchTooLarge(f"larger than {max_bytes} bytes")
        if time.monotonic() > deadline:
            raise FetchError(f"not fetched within {timeout:.0f} s")
        chunks.append(part)
    return b"".join(chunks)


__all__ = [
    "BlockedURLError",
    "FetchError",
    "FetchTooLarge",
    "URLPolicy",
    "check_url",
    "checked_address",
    "fetch",
    "is_public",
    "public_urls_only",
    "url_policy",
]

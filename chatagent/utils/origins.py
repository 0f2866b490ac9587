"""Which requests a server on this machine answers by their `Host` and `Origin`: DNS rebinding and cross-site
requests from web pages refused (`chatagent serve` and the web UI both use it).

Any web page the user opens can make the browser send requests to a server on this machine (CSRF), and a name the
page's owner resolves to 127.0.0.1 (DNS rebinding) lets the page read the answers too, as its own origin. So a
request is answered only when its `Host` names this server: a loopback name or address, the address the server is
bound to (any IP address when it is bound to all of them: a literal address cannot be rebound), or a name it was
given (`names`; `*` accepts any); and when it carries an `Origin` (browsers send one with cross-site and with
script requests), only when that origin is the server's own, reached by an accepted name.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

ANY = "*"
_WILDCARDS = ("", "0.0.0.0", "::")


def host_name(value: str) -> str:
    """The host of a `Host` header value or an origin's netloc: without the port and brackets, lower case."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    if value.count(":") == 1:
        value = value.partition(":")[0]
    return value.rstrip(".")


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None


class HostCheck:
    """The `Host` and `Origin` rules of one server (see the module docstring).

    Args:
        bound: the address the server listens on ('0.0.0.0' or '::' for all of them).
        names: other names clients reach it by (a reverse proxy's, the machine's DNS name); `*` accepts any Host.
    """

    __slots__ = ("names", "any_name", "bound", "any_ip")

    def __init__(self, bound: str, names: Iterable[str] = ()) -> None:
        cleaned = {host_name(n) for n in names if str(n).strip()}
        self.any_name = ANY in cleaned
        self.names = frozenset(cleaned - {ANY})
        self.bound = _ip(host_name(bound))
        self.any_ip = host_name(bound) in _WILDCARDS

    def host_allowed(self, host: str) -> bool:
        """Whether a request whose `Host` is `host` is meant for this server."""
        name = host_name(host)
        if not name:
            return False
        if self.any_name or name in self.names or name == "localhost" or name.endswith(".localhost"):
            return True  # (browsers resolve *.localhost to loopback themselves: it cannot be rebound)
        ip = _ip(name)
        if ip is None:
            return False
        return ip.is_loopback or self.any_ip or ip == self.bound

    def refusal(self, host: str | None, origin: str | None) -> tuple[int, str] | None:
        """None when the request may be answered, else (HTTP status, why): 421 for a Host that does not name this
        server, 403 for an Origin other than the server's own."""
        if host is None or not self.host_allowed(host):
            return 421, "this server does not answer to that Host name (DNS rebinding is refused)"
        if origin is None or self.any_name:
            return None
        parts = urlsplit(origin.strip())
        if not parts.netloc or _place(parts.netloc, parts.scheme) != _place(host, parts.scheme):
            return 403, "requests from other web sites are refused (the Origin is not this server)"
        return None


def _place(netloc: str, scheme: str) -> tuple[str, str]:
    """(host, port) of a netloc, the port defaulted by the scheme."""
    name = host_name(netloc)
    tail = netloc.strip().rpartition("]")[2] if netloc.strip().startswith("[") else netloc.strip()
    port = tail.rpartition(":")[2] if tail.count(":") == 1 else ""
    return name, port or ("443" if scheme.lower() == "https" else "80")


__all__ = ["ANY", "HostCheck", "host_name"]

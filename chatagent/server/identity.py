"""Who is asking `chatagent serve`: the principal of a request, from the API key it sends.

Each key is its own principal: `api_key` is one key, a list of keys, or a dict of client name -> key (the name is
then the principal, so that a key can be replaced without losing the client's conversations). Without keys every
client is the one principal `serve:anonymous`, whose conversations are reachable only by their server-issued,
unguessable ids (see `chatagent.server.conversations`). No principal of `serve` is ever the local user of the
command line or a web UI visitor: their conversations in a shared store are out of its reach.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping

from chatagent.server.openai_api import RequestError
from chatagent.utils.keys import clean_api_key

ANONYMOUS = "serve:anonymous"

ApiKeys = str | Iterable[str] | Mapping[str, str] | None


class Principals:
    """The server's keys and the principal each one stands for."""

    __slots__ = ("_keys",)

    def __init__(self, api_key: ApiKeys) -> None:
        pairs: list[tuple[str | None, str]]
        if api_key is None or isinstance(api_key, str):
            pairs = [(None, api_key)] if api_key is not None else []
        elif isinstance(api_key, Mapping):
            pairs = [(str(name), key) for name, key in api_key.items()]
        else:
            pairs = [(None, key) for key in api_key]
        keys: list[tuple[bytes, str]] = []
        for name, given in pairs:
            if not isinstance(given, str):
                raise TypeError(f"an API key must be a string, got {type(given).__name__}")
            key = clean_api_key(given, "the server's api_key")
            if key is None:
                if len(pairs) > 1:
                    raise ValueError("an API key in the list is empty")
                continue
            digest = hashlib.sha256(key.encode()).digest()
            if any(hmac.compare_digest(digest, d) for d, _ in keys):
                raise ValueError("two clients have the same API key: each key must be its own")
            if name is not None and (not name or not name.isprintable() or len(name) > 100):
                raise ValueError(f"a client name must be 1 to 100 printable characters, got {name[:40]!r}")
            keys.append((digest, f"client:{name}" if name is not None else "key:" + digest.hex()[:16]))
        self._keys = keys

    @property
    def required(self) -> bool:
        """Whether requests must carry a key."""
        return bool(self._keys)

    def of(self, headers: Mapping[bytes, bytes]) -> str:
        """The principal of a request; RequestError 401 when keys are required and it carries none of them."""
        if not self._keys:
            return ANONYMOUS
        given = headers.get(b"authorization", b"")
        token = given[7:].strip() if given[:7].lower() == b"bearer " else b""
        digest = hashlib.sha256(token).digest()
        found = None
        for known, principal in self._keys:  # every key compared, in constant time: the same time for any key
            if hmac.compare_digest(digest, known) and token:
                found = principal
        if found is None:
            raise RequestError(401, "invalid or missing API key (send Authorization: Bearer <key>)", "invalid_api_key")
        return found


__all__ = ["ANONYMOUS", "ApiKeys", "Principals"]

"""API keys: cleaned when they are configured, and masked in every error and log line.

    key = clean_api_key(os.environ.get("OPENAI_API_KEY"))   # stripped, checked, remembered for masking
    message = mask_secrets(f"cannot reach the server: {error}")

A key read from a file or a mounted secret usually ends in a newline; sent as is, the HTTP client refuses
the header and its error quotes the whole header (`Illegal header value b'Bearer sk-...\\n'`). So a key is
stripped of surrounding whitespace when it is configured, and a key holding a character no HTTP header can
carry is refused then, with a message that names the position, not the key.

Every key configured in this process is remembered; `mask_secrets` replaces any run of 8 or more characters
of one of them (so a key quoted with escapes, cut, or with its newline still counts), the token of any
`Bearer ...` header form, a `Basic ...` credential (base64 of `user:password`), the user part of any URL
(`http://user:password@host` -> `http://***@host`) and its query parameters that can hold a credential. Errors
(ModelServiceError, the server's error bodies, the web UI's and the terminal's error lines) and every log line of
the command line pass through it.

Model servers are remembered too (`remember_endpoint`, when a model is configured): `hide_endpoints` says "the model
server" for each of them and for any other URL, which is what a client of a shared surface may be told of a model
service's failure (`ModelServiceError.public_message`).
"""

from __future__ import annotations

import base64
import logging
import re
import threading
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote, urlsplit

MIN_MASKED = 8  # a run of this many characters of a key is masked wherever it appears
MASK = "***"
PLACEHOLDERS = frozenset({"EMPTY", "none", "None", "dummy", "sk-no-key-required"})
_BEARER = re.compile(r"(?i)(\bbearer\s+)[^\s'\",;)\]}]+")
_BASIC = re.compile(r"(?i)(\bbasic\s+)([A-Za-z0-9+/]{4,}={0,2})(?![A-Za-z0-9+/=])")
_URL = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^\s'\"<>()\[\]{}]+")
_known: set[str] = set()
_endpoints: set[str] = set()
_lock = threading.Lock()


def clean_api_key(value: str | None, what: str = "api_key") -> str | None:
    """`value` without surrounding whitespace, None if nothing is left; ValueError if a character in it cannot be
    sent in an HTTP header. The key is remembered so that `mask_secrets` hides it from then on."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, not {type(value).__name__}")
    key = value.strip()
    if not key:
        return None
    for position, char in enumerate(key):
        if not "!" <= char <= "~":
            kind = "a space" if char == " " else "a control character" if ord(char) < 32 else "a non-ASCII character"
            raise ValueError(
                f"{what} has {kind} at position {position + 1} of {len(key)}: an API key is printable ASCII with "
                "no spaces; check the file or variable it was read from"
            )
    remember_secret(key)
    return key


_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "api-key", "x-api-key", "x-goog-api-key"})


def clean_headers(headers: dict[str, Any] | None) -> dict[str, Any] | None:
    """Extra HTTP headers with each value cleaned as `clean_api_key` cleans a key (credentials among them are
    remembered for masking, without their 'Bearer ' prefix)."""
    if not headers:
        return headers
    out: dict[str, Any] = {}
    for name, value in headers.items():
        if not isinstance(value, str):
            out[name] = value  # the HTTP client's own sentinels (e.g. openai.Omit) pass through
            continue
        lower = str(name).lower()
        scheme, _, token = value.strip().partition(" ")
        if lower in _SECRET_HEADERS and token and scheme.lower() in ("bearer", "basic", "token"):
            out[name] = f"{scheme} {clean_api_key(token.strip(), f'the {name} header') or ''}".strip()
        elif lower in _SECRET_HEADERS:
            out[name] = clean_api_key(value, f"the {name} header") or ""
        else:
            out[name] = value.strip()
    return out


def remember_secret(secret: str) -> None:
    """Mask `secret` in every error and log line from now on (placeholders like 'EMPTY' are not secrets)."""
    secret = secret.strip()
    if len(secret) >= 4 and secret not in PLACEHOLDERS:
        with _lock:
            _known.add(secret)


def mask_secrets(text: str, secrets: Iterable[str | None] = ()) -> str:
    """`text` with every known key (and `secrets`) masked, by any run of MIN_MASKED or more of its characters,
    and the token of every `Bearer ...` masked."""
    if not text:
        return text
    with _lock:
        candidates = set(_known)
    candidates.update(s.strip() for s in secrets if s and s.strip() not in PLACEHOLDERS)
    pieces: set[str] = set()  # every run of MIN_MASKED characters of every long key: masked in one pass
    for secret in candidates:
        if len(secret) < 4:
            continue
        if len(secret) < MIN_MASKED:
            text = text.replace(secret, MASK)
        else:
            pieces.update(secret[i : i + MIN_MASKED] for i in range(len(secret) - MIN_MASKED + 1))
    if pieces:
        text = _mask_runs(text, pieces)
    text = _BEARER.sub(lambda m: m.group(1) + MASK, text)
    if "asic" in text or "ASIC" in text:
        text = _BASIC.sub(_mask_basic, text)
    if "://" in text:
        text = _URL.sub(_mask_url, text)
    return text


def _mask_basic(m: re.Match[str]) -> str:
    """A `Basic` credential masked: a token that is base64 of `user:password` (not the word after "basic")."""
    try:
        decoded = base64.b64decode(m.group(2), validate=True)
    except ValueError:
        return m.group(0)
    return m.group(1) + MASK if b":" in decoded else m.group(0)


def _mask_url(m: re.Match[str]) -> str:
    """A URL with its user part and the query parameters that can hold a credential masked."""
    scheme, _, rest = m.group(0).partition("://")
    cut = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    authority, tail = rest[:cut], rest[cut:]
    if "@" in authority:
        authority = MASK + "@" + authority.rpartition("@")[2]
    if "?" in tail:
        path, _, query = tail.partition("?")
        query, hash_mark, fragment = query.partition("#")
        pairs = [p.partition("=")[0] + "=" + MASK if "=" in p and _is_credential(unquote(p.partition("=")[0])) else p
                 for p in query.split("&")]  # fmt: skip
        tail = f"{path}?{'&'.join(pairs)}{hash_mark}{fragment}"
    return f"{scheme}://{authority}{tail}"


def remember_endpoint(url: str | None) -> None:
    """Remember a model server (a URL, or a host) so that `hide_endpoints` names it as "the model server"."""
    if not url or not isinstance(url, str):
        return
    text = url.strip().rstrip("/")
    forms = {text, mask_secrets(text)}
    try:
        parts = urlsplit(text if "://" in text else f"http://{text}")
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if host:
        forms.add(f"{host}:{port}" if port else host)
        forms.add(host)
        if "://" in text:
            forms.add(text.split("://", 1)[1].rpartition("@")[2])
    with _lock:
        _endpoints.update(f for f in forms if len(f) >= 4)


def hide_endpoints(text: str) -> str:
    """`text` (secrets masked) with every remembered model server, and any other URL, said as "the model server"."""
    text = _URL.sub("the model server", mask_secrets(text))
    with _lock:
        forms = sorted(_endpoints, key=len, reverse=True)
    for form in forms:
        if form in text:
            text = text.replace(form, "the model server")
    return text


def _mask_runs(text: str, pieces: set[str]) -> str:
    """`text` with every stretch covered by `pieces` (runs of MIN_MASKED characters of keys) replaced by one MASK."""
    n = MIN_MASKED
    if not any(p[:4] in text for p in pieces):  # the common case, cheaply: nothing of the key is there
        return text
    out: list[str] = []
    start = i = 0
    while i + n <= len(text):
        if text[i : i + n] in pieces:
            end = i + n
            while end < len(text) and text[end - n + 1 : end + 1] in pieces:
                end += 1
            out += [text[start:i], MASK]
            start = i = end
        else:
            i += 1
    out.append(text[start:])
    return "".join(out)


class MaskSecretsFilter(logging.Filter):
    """A logging filter (for a handler) that masks keys in the message and in the exception text of each record."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = mask_secrets(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = mask_secrets(record.exc_text)
        return True


_CREDENTIAL_WORDS = ("pass", "secret", "token", "key", "auth", "cred")


def redact(url: str) -> str:
    """`url` without its credentials: the password of its user part, and the value of every query parameter that
    can hold one (libpq's `password`, `sslpassword`, `passfile`, `sslkey`, and any name with `pass`, `secret`,
    `token`, `key`, `auth` or `cred` in it)."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return "<unparsable URL>"
    changed = False
    if password is not None:
        userinfo, _, hostport = parts.netloc.rpartition("@")
        parts, changed = parts._replace(netloc=userinfo.partition(":")[0] + ":***@" + hostport), True
    if parts.query:
        pairs = parts.query.split("&")
        masked = [p.partition("=")[0] + "=***" if _is_credential(unquote(p.partition("=")[0])) else p for p in pairs]
        if masked != pairs:
            parts, changed = parts._replace(query="&".join(masked)), True
    if not changed:
        return url
    return f"{parts.scheme}://{parts.netloc}{parts.path}" + (f"?{parts.query}" if parts.query else "")


def _is_credential(name: str) -> bool:
    return any(word in name.lower() for word in _CREDENTIAL_WORDS)

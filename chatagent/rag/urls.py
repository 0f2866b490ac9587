"""Documents at http(s) URLs: fetched with a size limit and a timeout, named for their content type, and kept
in memory for a few minutes."""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING

from chatagent.rag.parsers import DocumentError
from chatagent.utils.url_fetch import FetchError, FetchTooLarge, fetch, url_policy

if TYPE_CHECKING:
    from chatagent.utils.url_fetch import URLPolicy

__all__ = ["URL_CACHE_BYTES", "URL_CACHE_S", "URL_TIMEOUT_S", "FetchedUrls", "fetch_url", "is_url", "read_data_url"]

URL_TIMEOUT_S = 30.0
URL_CACHE_S = 300.0  # a fetched URL is fetched again after this many seconds
URL_CACHE_BYTES = 32 * 2**20  # fetched contents kept at most, in all (the oldest go first)


class FetchedUrls:
    """Contents fetched in the last URL_CACHE_S seconds, URL_CACHE_BYTES at most in all (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # (URL policy, url) -> (when fetched, content, name); oldest first
        self.entries: OrderedDict[tuple[URLPolicy | None, str], tuple[float, bytes, str]] = OrderedDict()

    def get(self, url: str, max_bytes: int) -> tuple[bytes, str]:
        """(content, a file name for it) of `url`: from memory while fresh, else fetched (see fetch_url)."""
        key = (url_policy(), url)  # what a remote client may not fetch is not served to it from the cache either
        with self._lock:
            cached = self.entries.get(key)
        if cached is not None and time.monotonic() - cached[0] < URL_CACHE_S:
            return cached[1], cached[2]
        data, name = fetch_url(url, max_bytes)
        now = time.monotonic()
        with self._lock:
            self.entries.pop(key, None)
            while self.entries and now - next(iter(self.entries.values()))[0] >= URL_CACHE_S:
                self.entries.popitem(last=False)  # expired content is not kept in memory
            self.entries[key] = (now, data, name)
            kept = sum(len(c) for _, c, _ in self.entries.values())
            while kept > URL_CACHE_BYTES:  # nor more than the bound (the oldest go first)
                kept -= len(self.entries.popitem(last=False)[1][1])
        return data, name

    def clear(self) -> None:
        with self._lock:
            self.entries.clear()


def is_url(text: str, *schemes: str) -> bool:
    """Whether `text` is a URL of one of `schemes` (compared in any case, as URL schemes are)."""
    scheme, colon, _ = text.partition(":")
    return bool(colon) and scheme.lower() in schemes


def read_data_url(url: str, max_bytes: int) -> tuple[bytes, str]:
    """The content of a `data:` URL (base64 or percent-encoded) and a file name: its `name` parameter (as an OpenAI
    file part's filename is kept, see `chatagent.schema.parts`), else one for its media type."""
    import base64
    from urllib.parse import quote, unquote, unquote_to_bytes

    head, comma, body = url.partition(",")
    meta = head.partition(":")[2].split(";")
    if not comma:
        raise DocumentError("broken", "a data: URL without its comma (data:TYPE;base64,DATA) could not be read.")
    try:
        data = base64.b64decode(body, validate=False) if "base64" in (m.lower() for m in meta[1:]) else \
            unquote_to_bytes(body)  # fmt: skip
    except ValueError:
        raise DocumentError("broken", "a data: URL's base64 content could not be decoded.") from None
    if len(data) > max_bytes:
        raise _url_too_large("a data: URL", max_bytes)
    named = [unquote(m[5:]) for m in meta[1:] if m.lower().startswith("name=")]
    name = os.path.basename(named[0].replace("\\", "/")).strip() if named else ""
    return data, _url_name(quote(name) if name and name not in (".", "..") else "document", meta[0] or "text/plain")


def fetch_url(url: str, max_bytes: int, timeout: float = URL_TIMEOUT_S) -> tuple[bytes, str]:
    """Download `url` (at most `max_bytes` within `timeout` seconds in all) -> (content, a file name for it).
    Under `chatagent.utils.url_fetch.public_urls_only` (a remote client's request) only public hosts are fetched."""
    shown = url if len(url) <= 120 else url[:117] + "..."
    try:
        data, final_url, content_type = fetch(url, max_bytes, timeout)
    except FetchTooLarge:
        raise _url_too_large(shown, max_bytes) from None
    except FetchError as e:
        raise DocumentError("broken", f"'{shown}' could not be fetched: {e}.", shown) from None
    return data, _url_name(final_url, content_type)


_CONTENT_TYPES = {
    "application/pdf": "pdf",
    "text/html": "html",
    "application/xhtml+xml": "html",
    "text/plain": "txt",
    "text/markdown": "md",
    "text/csv": "csv",
    "text/tab-separated-values": "tsv",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "pptx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
}


def _url_name(url: str, content_type: str) -> str:
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(url)
    base = os.path.basename(unquote(parts.path).rstrip("/")) or parts.hostname or "page"
    by_type = _CONTENT_TYPES.get(content_type.split(";")[0].strip().lower())
    if by_type and Path(base).suffix.lower().lstrip(".") != by_type:
        base = f"{base}.{by_type}"
    return base


def _url_too_large(url: str, limit: int) -> DocumentError:
    return DocumentError("too_large", f"'{url}' is larger than the limit of {limit / 2**20:.1f} MB.", url)

"""Opening session stores by URL (see `chatagent.sessions.store` for the URLs): one store per URL in a process.

Above the store and its dialects (`sqlite`, `postgres`), which it picks by the URL's scheme.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from urllib.parse import urlsplit

from chatagent.sessions.errors import SessionStoreError
from chatagent.sessions.sqlite import SQLiteStore, parse_sqlite_url
from chatagent.sessions.store import SQLStore
from chatagent.utils.keys import redact
from chatagent.utils.workspace import workspace_root

_stores: dict[str, SQLStore] = {}
_stores_lock = threading.Lock()


def default_store_url() -> str:
    """$CHATAGENT_SESSION_STORE, else the SQLite file `<workspace>/sessions/sessions.db`."""
    env = os.environ.get("CHATAGENT_SESSION_STORE")
    if env:
        return env

    return "sqlite:///" + str(workspace_root() / "sessions" / "sessions.db")


def open_store(store: str | os.PathLike[str] | SQLStore | None = None) -> SQLStore:
    """The store for a URL or a file path (one per URL in a process); None means `default_store_url()`."""
    if isinstance(store, SQLStore):
        return store
    if store is None:
        url, default = default_store_url(), True
    elif isinstance(store, (str, os.PathLike)):
        url, default = os.fspath(store), False
    else:
        raise TypeError(f"store must be a URL, a file path or a store, got {type(store).__name__}")
    key = url if "://" in url else "sqlite:///" + str(Path(url).expanduser().resolve())
    with _stores_lock:
        found = _stores.get(key)
        if found is None:
            found = _stores[key] = _open(url, default)
        return found


def _open(url: str, create_dir: bool) -> SQLStore:
    if "://" not in url:
        return SQLiteStore(Path(url).expanduser(), create_dir=create_dir)
    scheme = urlsplit(url).scheme.lower()
    if scheme == "sqlite":
        path, options = parse_sqlite_url(url)
        return SQLiteStore(path, create_dir=create_dir, **options)
    if scheme in ("postgresql", "postgres"):
        from chatagent.sessions.postgres import PostgresStore  # psycopg: postgresql:// URLs only

        return PostgresStore(url)
    raise SessionStoreError(
        f"unknown session store URL {redact(url)!r}: use sqlite:///path.db (or a file path) or postgresql://host/db"
    )


def close_stores() -> None:
    """Close the idle connections of every store opened in this process and forget them (the next `open_store`
    opens anew; Session objects holding a store keep working, connecting again when used)."""
    with _stores_lock:
        stores = list(_stores.values())
        _stores.clear()
    for s in stores:
        s.close()


__all__ = ["close_stores", "default_store_url", "open_store"]

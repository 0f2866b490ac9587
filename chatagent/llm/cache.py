"""The response cache: the same question with the same settings gets the earlier answer, streamed as it came.

    llm = get_chat_model({'model': ..., 'generate_cfg': {'cache': 'sqlite:///cache.db', 'temperature': 0}})
    bot = BasicAgent(llm=llm, generate_cfg={'cache': '/var/cache/answers'})    # or a directory; per run too

A reply is stored once it has streamed to its end (a stopped or failed call stores nothing), as the pieces it
streamed in; a hit streams those pieces again, so the caller sees what it saw the first time, without calling the
model (and without counting tokens). The key is a hash of the model (its class, its name, the endpoint it resolved
to and a hash of the key it sends, so that two servers, two accounts or a revoked key never share answers), the
messages as sent, the tool schemas, and every setting that shapes the answer (retries, time limits and the cache
setting itself do not). Files are readable by their user alone.

Only deterministic settings are cached: `temperature` 0 or `top_k` 1. A sampled answer is a draw, and serving
it again would hide that; `cache_nondeterministic=True` caches those too (for tests and demos). `cache_dir` (Qwen-
Agent's name) is the same as `cache` with a directory.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, cast
from urllib.parse import unquote, urlsplit

import orjson

from chatagent.llm.pumps import Blocking, Give, Plan, Relay
from chatagent.schema import Message
from chatagent.schema.fragment import Fragment, as_fragment
from chatagent.utils.sql import connect_sqlite, private_sqlite_file
from chatagent.utils.workspace import private_dirs, read_private, write_atomic

if TYPE_CHECKING:
    from chatagent.llm.settings import Settings

logger = logging.getLogger("chatagent.llm")

# A stored reply: the pieces it streamed as, each piece its fragments as message dicts (`Message.model_dump()`).
Pieces: TypeAlias = list[list[dict[str, Any]]]

# framework settings that do not change the answer (everything else in the key)
_NOT_IN_KEY = frozenset(
    {"max_retries", "retry_delay", "max_retry_wait", "request_timeout", "deadline", "lang", "cache",
     "cache_nondeterministic", "cache_dir"}
)  # fmt: skip
_FORMAT = 1  # bump when the stored form changes: older entries are then simply not found
_opened: dict[str, ResponseCache] = {}
_opened_lock = threading.Lock()


def deterministic(cfg: dict[str, Any]) -> bool:
    """Whether these generation settings choose the most likely answer (temperature 0 or top_k 1)."""
    return cfg.get("temperature") == 0 or cfg.get("top_k") == 1


def cache_key(
    model: object, messages: list[Message], functions: list[dict[str, Any]] | None, cfg: dict[str, Any]
) -> str:
    """The hash that identifies a model call's answer (see the module docstring)."""
    ident: dict[str, Any] = {
        "v": _FORMAT,
        "model": [type(model).__qualname__, getattr(model, "model", ""), *_endpoint(model)],
        "messages": [m.model_dump() for m in messages],
        "functions": functions or [],
        "cfg": {k: v for k, v in cfg.items() if k not in _NOT_IN_KEY},
    }
    data = orjson.dumps(ident, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str)
    return hashlib.sha256(data).hexdigest()


def _endpoint(model: object) -> tuple[str, str]:
    """(where the model's calls go, a hash of the credential they carry) as the backend resolved them."""
    where = getattr(model, "endpoint", None)
    if callable(where):
        where = where()
    found = getattr(model, "cfg", None)
    cfg = cast("dict[str, Any]", found) if isinstance(found, dict) else {}
    if not isinstance(where, str) or not where:
        where = str(getattr(model, "base_url", None) or cfg.get("model_server") or cfg.get("base_url")
                    or cfg.get("api_base") or "")  # fmt: skip
    key = getattr(model, "api_key", None) or cfg.get("api_key")
    return where, hashlib.sha256(str(key).encode()).hexdigest() if key else ""


class ResponseCache:
    """Stored replies by key: `get(key)` -> the pieces as stored or None; `put(key, pieces)`."""

    def get(self, key: str) -> Pieces | None:
        raise NotImplementedError

    def put(self, key: str, pieces: Pieces) -> None:
        raise NotImplementedError


class SQLiteCache(ResponseCache):
    """Replies in one table of a SQLite file; one connection per thread, WAL so that readers do not wait."""

    def __init__(self, path: Path) -> None:
        self.path = path
        private_sqlite_file(path)  # 0600 (and so its -wal and -shm): the answers are the users'
        self._local = threading.local()
        with self._db() as db:
            db.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, pieces BLOB NOT NULL) WITHOUT ROWID")

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = self._local.db = connect_sqlite(self.path, timeout=10, wal=True)
        return db

    def get(self, key: str) -> Pieces | None:
        row = self._db().execute("SELECT pieces FROM replies WHERE key = ?", (key,)).fetchone()
        return orjson.loads(row[0]) if row else None

    def put(self, key: str, pieces: Pieces) -> None:
        with self._db() as db:
            db.execute("INSERT OR REPLACE INTO replies (key, pieces) VALUES (?, ?)", (key, orjson.dumps(pieces)))


class DirectoryCache(ResponseCache):
    """Replies as files `<dir>/<2 hex>/<key>.json`, written atomically."""

    def __init__(self, path: Path) -> None:
        self.path = path
        private_dirs(path)

    def _file(self, key: str) -> Path:
        return self.path / key[:2] / f"{key}.json"

    def get(self, key: str) -> Pieces | None:
        try:
            return orjson.loads(read_private(self._file(key)))  # (not a file another user left there)
        except FileNotFoundError:
            return None

    def put(self, key: str, pieces: Pieces) -> None:
        write_atomic(self._file(key), orjson.dumps(pieces))


def open_cache(spec: Any) -> ResponseCache:
    """The cache for `sqlite:///relative.db`, `sqlite:////absolute.db`, a directory path, or a ResponseCache (one per
    place in a process). Raises ValueError for anything else."""
    if isinstance(spec, ResponseCache):
        return spec
    text = None
    if isinstance(spec, (str, os.PathLike)):  # a path's __fspath__ gives str or bytes
        text = os.fspath(cast("str | os.PathLike[str] | os.PathLike[bytes]", spec))
    if not isinstance(text, str) or not text:  # (a path object that gives bytes too)
        raise ValueError(f"generate_cfg['cache'] must be 'sqlite:///file.db' or a directory, got {spec!r:.80}")
    with _opened_lock:
        found = _opened.get(text)
        if found is None:
            found = _opened[text] = _open(text)
        return found


def _open(text: str) -> ResponseCache:
    if "://" not in text:
        return DirectoryCache(Path(text).expanduser())
    parts = urlsplit(text)
    path = unquote(parts.path)[1:]
    if parts.scheme != "sqlite" or parts.netloc or not path or path == ":memory:" or parts.query:
        raise ValueError(
            f"bad cache URL {text!r}: write sqlite:///relative/file.db or sqlite:////absolute/file.db, or a directory"
        )
    return SQLiteCache(Path(path).expanduser())


def lookup(
    model: object,
    messages: list[Message],
    functions: list[dict[str, Any]] | None,
    cfg: dict[str, Any],
    settings: Settings,
) -> tuple[ResponseCache | None, str]:
    """(the cache, the key) for a call with backend settings `cfg` and framework `settings`, or (None, '') when the
    settings are not to be cached."""
    spec = settings.cache or settings.cache_dir
    if not (deterministic(cfg) or settings.cache_nondeterministic):
        logger.debug("response cache skipped: the settings sample (set temperature=0 or cache_nondeterministic)")
        return None, ""
    ours = {k: v for k, v in vars(settings).items() if k not in _NOT_IN_KEY}
    return open_cache(spec), cache_key(model, messages, functions, {**cfg, **ours})


def replay(stored: Pieces) -> Iterator[list[Fragment]]:
    """A stored reply's fragments, piece by piece as they first streamed."""
    for piece in stored:
        yield [as_fragment(d) for d in piece]


def recording(store: ResponseCache, key: str, call: Callable[[], object]) -> Plan:
    """The stored reply under `key` if there is one, else `call()`'s fragments, stored once they have run to their
    end (a plan: on an event loop, `aplayed` reads and writes the store in a worker thread)."""
    found = Blocking(store.get, key)
    yield found
    stored: Pieces | None = found.result
    if stored is not None:
        yield Give(replay(stored))
        return
    recorded: Pieces = []

    def record(fragments: list[Fragment]) -> list[Fragment]:
        recorded.append([f.model_dump() for f in fragments])  # now: the consumer may move their indexes
        return fragments

    yield Relay(call, each=record)
    yield Blocking(store.put, key, recorded)


__all__ = [
    "DirectoryCache",
    "ResponseCache",
    "SQLiteCache",
    "cache_key",
    "deterministic",
    "lookup",
    "open_cache",
    "recording",
    "replay",
]

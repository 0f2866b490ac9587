"""Where a corpus is indexed: the retrieval backend interface, and a PostgreSQL backend for corpora too large for
one process.

    from chatagent.rag.backends import PostgresBackend
    corpus = PostgresBackend('postgresql://app@db/knowledge', table='manuals')
    corpus.add_texts(ids, texts, titles)         # analysed and embedded here, stored there
    corpus.search('Which car parts wear out?', top_k=10)      # [(id, score)], best first

A backend is anything with `add_texts(ids, texts, titles=None)`, `search(query, top_k)` and `delete(ids)`:
`chatagent.rag.Index` (in this process: the default) and `PostgresBackend`. docs/retrieval.md shows how
OpenSearch or Qdrant would fit the same three methods.

PostgreSQL does the keyword side with its full-text search: each passage's terms are made by our analyser
(stems, Chinese bigrams; PostgreSQL has no Chinese parser) and stored as a `tsvector`; a query's terms are OR-ed
in a `tsquery` and ranked by `ts_rank_cd`. Vectors live in the database too: in a pgvector `vector` column,
searched through an HNSW index on their cosine (approximate: `hnsw.ef_search` at least the candidates asked for),
when the extension can be created; else in a `real[]` column, compared in SQL (exact, every row read: install
pgvector for large corpora). The best candidates of both sides are fused as the in-process index fuses them
(`chatagent.rag.fusion`, the meaning side weighted by how much of the query the best keyword match covers).

A lost connection (a server restart, a failover, a network cut) fails the call in progress with a
RetrievalBackendError saying so, and the next call connects again; a search the server does not answer within the
URL's `answer_timeout` seconds (30 by default, as the stores': `chatagent.utils.sql_watch`) fails the same way.
Indexing (`add_texts`, `delete`) has no such deadline: a large batch may take the server longer.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from chatagent.errors import ChatAgentError
from chatagent.rag.analysis import analyze
from chatagent.rag.embedders import Embedder, default_embedder, query_vector
from chatagent.rag.fusion import coverage, fuse
from chatagent.utils.keys import redact
from chatagent.utils.sql import connect_postgres, first_line, lock_schema
from chatagent.utils.sql_watch import answer_timeout, watching

__all__ = ["IndexingError", "PostgresBackend", "RetrievalBackend", "RetrievalBackendError"]

CANDIDATES = 100  # per side, fused
MAX_EF_SEARCH = 1000  # pgvector's ceiling for hnsw.ef_search: more candidates than this are found exactly
_TABLE = re.compile(r"[a-z_][a-z0-9_]{0,62}")


class RetrievalBackendError(ChatAgentError, RuntimeError):
    """The retrieval backend's server was lost or did not answer in time (the next call connects again)."""


class IndexingError(ChatAgentError, ValueError):
    """Some passages of a batch were refused by the store (`failed`: their ids); every other one was stored."""

    def __init__(self, failed: dict[str, str]) -> None:
        self.failed = list(failed)
        shown = "; ".join(f"{pid[:80]!r}: {why}" for pid, why in list(failed.items())[:5])
        more = f" (and {len(failed) - 5} more)" if len(failed) > 5 else ""
        super().__init__(f"{len(failed)} passage(s) could not be indexed, the others were: {shown}{more}")


def tsquery_text(terms: Sequence[str]) -> str:
    """The `tsquery` (as text) OR-ing `terms`, each quoted; '' (PostgreSQL's empty query, matching nothing) for
    none. A term is written as a quoted lexeme: its quotes doubled, backslashes and NULs left out."""
    quoted = (t.replace("\\", "").replace("\x00", "").replace("'", "''") for t in terms)
    return " | ".join(f"'{q}'" for q in quoted if q)


def _no_nul(text: str) -> str:
    return text.replace("\x00", "") if "\x00" in text else text  # (PostgreSQL's text holds no NUL)


@runtime_checkable
class RetrievalBackend(Protocol):
    """What retrieval needs of the place a corpus is indexed."""

    def add_texts(
        self, ids: Sequence[Any], texts: Sequence[str], titles: Sequence[str | None] | None = None
    ) -> None: ...

    def search(self, query: str, top_k: int = 10) -> list[tuple[Any, float]]: ...


class PostgresBackend:
    """Passages, their terms and their vectors in one PostgreSQL table (see the module docstring).

    Args:
        url: a `postgresql://` URL (psycopg, `chatagent[postgres]`).
        table: the table's name (created if missing; lower-case letters, digits, _).
        embedder: for the meaning side ('default': `default_embedder()`; None: keywords only).
    """

    def __init__(self, url: str, table: str = "chatagent_passages", *, embedder: Embedder | str | None = "default"):
        if not _TABLE.fullmatch(table):
            raise ValueError(f"table must be lower-case letters, digits and _, not {table!r}")
        self.table = table
        self.embedder: Embedder | None = default_embedder() if embedder == "default" else embedder  # type: ignore[assignment]
        self.url = redact(url)
        self._conninfo, self.answer_timeout = answer_timeout(url)
        self._conn: Any = self._connect()
        self._lock = threading.Lock()
        self._vector = self._pgvector_type()  # the schema-qualified type, or None: vectors in real[]
        self.pgvector = self._vector is not None
        self.dim: int | None = None
        self._indexed = False  # the HNSW index is there (made once the vectors' size is known)
        self._ef_search = 0
        self._ensure_table()

    def _connect(self) -> Any:
        return connect_postgres(self._conninfo, needed_for="the PostgreSQL retrieval backend", autocommit=True)

    @contextlib.contextmanager
    def _connection(self, watched: bool = False) -> Iterator[Any]:
        """The connection, the lock held: a new one when the last was lost (its session settings made again), a
        call on it failing with RetrievalBackendError when it is lost, or not answered in time when `watched`."""
        with self._lock:
            if self._conn.closed or self._conn.broken:
                self._conn, self._ef_search = self._connect(), 0
            conn = self._conn
            with watching(conn, self.answer_timeout if watched else 0) as watch:
                try:
                    yield conn
                except Exception as e:
                    if watch.fired:
                        raise RetrievalBackendError(
                            f"PostgreSQL at {self.url} gave no answer in {self.answer_timeout:g} s (its "
                            "answer_timeout); the next call reconnects"
                        ) from e
                    if type(e).__module__.startswith("psycopg") and conn.broken:
                        raise RetrievalBackendError(
                            f"lost the connection to PostgreSQL at {self.url}: {first_line(e)}; the next call reconnects"
                        ) from e
                    raise

    def _pgvector_type(self) -> str | None:
        """pgvector's type, qualified by the schema the extension lives in (it may be off this search_path)."""
        import psycopg

        try:
            with self._connection() as conn, conn.transaction():
                lock_schema(conn)
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                row = conn.execute(
                    "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
                    "WHERE e.extname = 'vector'"
                ).fetchone()
        except psycopg.Error:  # not installed, or not allowed: vectors in real[] instead
            return None
        return '"' + row[0].replace('"', '""') + '".vector'

    def _ensure_table(self) -> None:
        with self._connection() as conn, conn.transaction():
            lock_schema(conn)  # processes opening one table at once
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self.table} (id TEXT PRIMARY KEY, title TEXT, text TEXT NOT NULL, "
                "terms TSVECTOR NOT NULL, embedding " + (self._vector or "REAL[]") + ")"
            )
            conn.execute(f"CREATE INDEX IF NOT EXISTS {self.table}_terms ON {self.table} USING GIN (terms)")

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __len__(self) -> int:
        with self._connection(watched=True) as conn:
            return int(conn.execute(f"SELECT count(*) FROM {self.table}").fetchone()[0])

    def add_texts(self, ids: Sequence[Any], texts: Sequence[str], titles: Sequence[str | None] | None = None) -> None:
        """Add or replace passages: analysed and embedded (in batches) here, stored in one transaction.

        NUL characters (which PostgreSQL's text cannot hold) are left out. A passage the store refuses (its terms
        beyond a tsvector's 1 MB, say) is reported alone: IndexingError names it once every other one is stored."""
        if len(ids) != len(texts) or (titles is not None and len(titles) != len(texts)):
            raise ValueError("ids, texts and titles must have the same length")
        texts = [_no_nul(t) for t in texts]
        named = [_no_nul(t) if t else t for t in titles] if titles is not None else [None] * len(texts)
        terms = [" ".join(analyze(t) + analyze(title or "")) for t, title in zip(texts, named, strict=True)]
        vectors: list[Any] = [None] * len(texts)
        if self.embedder is not None and texts:
            full = [f"{title}\n{t}" if title else t for t, title in zip(texts, named, strict=True)]
            matrix = np.concatenate([self.embedder.embed_passages(full[i : i + 32]) for i in range(0, len(full), 32)])
            vectors = [self._vector_param(v) for v in matrix]
        cast = f"::{self._vector or 'real[]'}"
        rows = [(str(i), title, t, tv, v) for i, title, t, tv, v in zip(ids, named, texts, terms, vectors, strict=True)]
        sql = (
            f"INSERT INTO {self.table} (id, title, text, terms, embedding) VALUES (%s, %s, %s, "
            f"to_tsvector('simple', %s), %s{cast}) ON CONFLICT (id) DO UPDATE SET title = excluded.title, "
            "text = excluded.text, terms = excluded.terms, embedding = excluded.embedding"
        )
        refused = self._store_rows(sql, rows)
        if self.embedder is not None and texts:
            with self._connection():
                self._hnsw()  # made as the first vectors come, not by the first search
        if refused:
            raise IndexingError(refused)

    def _store_rows(self, sql: str, rows: list[tuple[Any, ...]]) -> dict[str, str]:
        """Store `rows` in one transaction; if the store refuses one, each row in its own: the refused ones' ids
        and PostgreSQL's reason."""
        import psycopg  # (installed: __init__ connected with it)

        bad_data = (psycopg.DataError, psycopg.errors.ProgramLimitExceeded)
        with self._connection() as conn:
            try:
                with conn.transaction(), conn.cursor() as cur:
                    cur.executemany(sql, rows)
                return {}
            except bad_data:
                pass
            refused: dict[str, str] = {}
            for row in rows:
                try:
                    with conn.transaction():
                        conn.execute(sql, row)
                except bad_data as e:
                    refused[row[0]] = str(e).splitlines()[0] if str(e) else type(e).__name__
        return refused

    def delete(self, ids: Sequence[Any]) -> int:
        with self._connection() as conn:
            cur = conn.execute(f"DELETE FROM {self.table} WHERE id = ANY(%s)", ([str(i) for i in ids],))
            return cur.rowcount

    def search(self, query: str, top_k: int = 10) -> list[tuple[str, float]]:
        """The `top_k` best passages for `query` as (id, score), best first: fused when there are vectors."""
        if top_k <= 0:
            return []
        query = _no_nul(query)
        terms = sorted(set(analyze(query)))
        tsquery = tsquery_text(terms)
        if self.embedder is None:
            if not tsquery:  # a question of no term ('???', emoji) matches no passage by keywords
                return []
            with self._connection(watched=True) as conn:
                rows = conn.execute(
                    f"SELECT id, ts_rank_cd(terms, q) AS r FROM {self.table}, CAST(%s AS tsquery) q "
                    "WHERE terms @@ q ORDER BY r DESC, id LIMIT %s",
                    (tsquery, top_k),
                ).fetchall()
            return [(r[0], float(r[1])) for r in rows]
        v = self._vector_param(query_vector(self.embedder, query))
        n = max(CANDIDATES, top_k)
        with self._connection(watched=self._indexed or not self._vector) as conn:  # (not while it makes the index)
            rows = conn.execute(self._hybrid_sql(n), {"q": tsquery, "v": v, "n": n}).fetchall()
        if not rows:
            return []
        ids = [r[0] for r in rows]
        best_terms = next((r[3] for r in rows if r[3] is not None), None)
        covered = coverage(terms, best_terms) if best_terms is not None else 0.0
        scores = fuse(np.array([float(r[1]) for r in rows]), np.array([float(r[2]) for r in rows]), covered)
        order_ = sorted(range(len(ids)), key=lambda i: (-scores[i], ids[i]))[:top_k]
        return [(ids[i], float(scores[i])) for i in order_]

    def _hybrid_sql(self, n: int) -> str:
        """One statement: the `n` best of each side, with each candidate's keyword rank, cosine and (for the best
        keyword match only) its terms. With pgvector it also readies the connection for it (`_hnsw`: the index made
        if missing, `hnsw.ef_search` set): call with the lock held, right before running it."""
        if self._vector:
            schema = self._vector.removesuffix(".vector")
            if n <= MAX_EF_SEARCH and self._hnsw(n):
                vector = f"{self._vector}({self.dim})"  # the HNSW index's expression: sized vectors
                distance = f"embedding::{vector} OPERATOR({schema}.<=>) %(v)s::{vector}"
            else:  # more candidates than the index can give: every row compared
                distance = f"embedding OPERATOR({schema}.<=>) %(v)s::{self._vector}"
            similarity, order = f"1 - ({distance})", distance
        else:
            similarity = "(SELECT sum(a * b) FROM unnest(embedding, %(v)s::real[]) AS pair(a, b))"
            order = f"{similarity} DESC"
        return (
            f"WITH q AS (SELECT CAST(%(q)s AS tsquery) AS tq), "
            f"lexical AS (SELECT id FROM {self.table}, q WHERE terms @@ tq "
            f"ORDER BY ts_rank_cd(terms, tq) DESC LIMIT %(n)s), "
            f"dense AS (SELECT id FROM {self.table} WHERE embedding IS NOT NULL ORDER BY {order} LIMIT %(n)s), "
            f"scored AS (SELECT id, terms, ts_rank_cd(terms, tq) AS rank, COALESCE({similarity}, 0) AS cosine "
            f"FROM {self.table}, q WHERE id IN (SELECT id FROM lexical UNION SELECT id FROM dense)) "
            "SELECT id, rank, cosine, CASE WHEN rank > 0 AND row_number() OVER (ORDER BY rank DESC, id) = 1 "
            "THEN tsvector_to_array(terms) END FROM scored"
        )

    def _hnsw(self, n: int = CANDIDATES) -> bool:
        """Make the HNSW index on the vectors' cosine once their size is known, and let a search find `n`; whether
        it is there. Call with the lock held."""
        if not self._vector or self.dim is None:
            return False
        if not self._indexed:
            schema = self._vector.removesuffix(".vector")
            self._conn.execute(
                f"CREATE INDEX IF NOT EXISTS {self.table}_embedding ON {self.table} "
                f"USING hnsw ((embedding::{self._vector}({self.dim})) {schema}.vector_cosine_ops)"
            )
            self._indexed = True
        ef = min(n, MAX_EF_SEARCH)
        if ef != self._ef_search:
            self._conn.execute(f"SET hnsw.ef_search = {int(ef)}")
            self._ef_search = ef
        return True

    def _vector_param(self, vector: np.ndarray) -> Any:
        values = [float(x) for x in vector]
        if self.dim is None:
            self.dim = len(values)
        return "[" + ",".join(f"{x:.6g}" for x in values) + "]" if self.pgvector else values

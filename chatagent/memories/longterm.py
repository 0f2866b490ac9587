"""LongTermMemory: what a user told an agent, kept across conversations and processes, recalled by meaning.

    from chatagent import LongTermMemory
    mem = LongTermMemory(user='alice')                 # store: the URL forms of Session (SQLite default, PostgreSQL)
    mem.remember('Alice is allergic to peanuts.', importance=0.9)
    mem.ingest(messages, session_id='trip')            # a conversation's turns (with llm=: the facts drawn from them)
    hits = mem.recall("what can't Alice eat?", k=5)    # [MemoryMatch(record, score)], best first
    hits[0].record.text, hits[0].record.source         # source: {'session': 'trip', 'message': 3}
    mem.forget(hits[0].record.id)

Records are stored at once and found by their keywords at once; their vectors are computed on the low-priority
embedding thread and join the search when ready. Records still waiting for a vector (the process ended first) are
completed by the next recall or by any later process (`chatagent.memories.vectors`; `wait_for_vectors()` waits). Recall scores meaning, recency and
importance (`chatagent.memories.recall`). Each user's records are apart: a LongTermMemory reads and changes only
its `user`'s (`for_user()` gives the same store for another user, as the web UI does for the signed-in user).
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from chatagent.memories.boilerplate import is_boilerplate
from chatagent.memories.extraction import ask_for_facts
from chatagent.memories.indexes import forget_saved, user_index
from chatagent.memories.recall import RecallWeights, UserIndex
from chatagent.memories.records import MemoryMatch, MemoryRecord
from chatagent.memories.store import MemoryStore, open_memory_store
from chatagent.memories.vectors import VectorQueue, vector_queue
from chatagent.rag.embedders import Embedder, default_embedder, query_vector
from chatagent.schema import ASSISTANT, USER, Message, to_messages
from chatagent.sessions.store import DEFAULT_USER

if TYPE_CHECKING:
    from chatagent.llm.base import BaseChatModel

__all__ = ["LongTermMemory"]

logger = logging.getLogger("chatagent.memories")

MAX_TEXT_CHARS = 4000  # of one record: a longer turn is kept by its start
RELATED = 10  # memories shown to a fact-drawing model
BY_IDS = 64  # records waiting for vectors asked of the store by id (more: the store finds them itself)


class LongTermMemory:
    """A user's long-term memory (see the module docstring).

    Args:
        user: whose memories these are (the user names sessions use; default: the local user).
        store: a URL (`sqlite:///path.db`, `postgresql://...`), a file path, a MemoryStore, or None for
            $CHATAGENT_MEMORY_STORE, else `<workspace>/memory/memory.db`.
        embedder: for recall by meaning ('default': `chatagent.rag.embedders.default_embedder()`; None:
            keywords only).
        llm: a chat model (config dict or instance): `ingest` then stores the facts it draws from a conversation,
            updating the memories they contradict or repeat, instead of the raw turns.
        weights: how recall weighs meaning, recency and importance (`RecallWeights`).
        keep_answers: keep the assistant's answers of a conversation as memories too (those that say something:
            `chatagent.memories.boilerplate`); by default only what the user said is kept (and, with `llm=`, the
            facts the model draws from both).
    """

    def __init__(
        self,
        user: str = DEFAULT_USER,
        store: str | os.PathLike[str] | MemoryStore | None = None,
        *,
        embedder: Embedder | str | None = "default",
        llm: BaseChatModel | dict[str, Any] | None = None,
        weights: RecallWeights | None = None,
        keep_answers: bool = False,
    ) -> None:
        self.user = _checked_user(user)
        self.store = open_memory_store(store)
        if embedder == "default":
            embedder = default_embedder()
        elif isinstance(embedder, str):
            raise ValueError(f"embedder must be an Embedder, None or 'default', not {embedder!r}")
        self.embedder: Embedder | None = embedder
        self.llm = llm
        self.weights = weights or RecallWeights()
        self.keep_answers = bool(keep_answers)

    def __repr__(self) -> str:
        return f"LongTermMemory(user={self.user!r}, store={self.store!r})"

    def for_user(self, user: str) -> LongTermMemory:
        """The same memory (store, embedder, model, weights) for another user."""
        if user == self.user:
            return self
        return LongTermMemory(
            user, self.store, embedder=self.embedder, llm=self.llm, weights=self.weights, keep_answers=self.keep_answers
        )

    # ---- storing -------------------------------------------------------------------------------------------

    def remember(
        self,
        text: str,
        *,
        importance: float = 0.5,
        scope: str = "",
        source: dict[str, Any] | None = None,
        at: float | None = None,
    ) -> MemoryRecord:
        """Store one fact (told at Unix time `at`, default now); it can be recalled at once (by meaning once
        embedded)."""
        return self._add([(_checked_text(text), scope, importance, dict(source or {}))], at)[0]

    def ingest(
        self,
        messages: Sequence[dict[str, Any] | Message],
        *,
        session_id: str | None = None,
        scope: str = "",
        first_index: int = 0,
        importance: float = 0.5,
        at: float | None = None,
        keep_answers: bool | None = None,
    ) -> list[MemoryRecord]:
        """Store a conversation's user turns, and its assistant turns that say something when the memory keeps
        answers (`keep_answers`: this call's choice, default the memory's) (message `i` is cited as
        `first_index + i` of `session_id`; `at`: when it took place, default now); with `llm=`, the facts the
        model draws from them instead. The records stored or updated."""
        msgs = to_messages(list(messages))
        if self.llm is not None:
            facts = self._facts(msgs, session_id, scope, first_index)
            if facts is not None:
                return facts
        answers = self.keep_answers if keep_answers is None else keep_answers
        items = []
        question = ""
        for i, m in enumerate(msgs):
            text = m.text.strip() if m.role in (USER, ASSISTANT) and m.function_call is None else ""
            if m.role == USER:
                question = text
            elif text and (not answers or is_boilerplate(text, question)):
                continue
            if text:
                source: dict[str, Any] = {"session": session_id, "message": first_index + i, "role": m.role}
                items.append((text[:MAX_TEXT_CHARS], scope, importance, source))
        return self._add(items, at)

    def update(self, record_id: str, text: str, *, importance: float | None = None) -> bool:
        """Change a record's text (and importance); its vector is made again. False if it is not this user's."""
        old = self.store.get(self.user, record_id)
        if old is None:
            return False
        level = old.importance if importance is None else _checked_importance(importance)
        changed = self.store.update(self.user, record_id, _checked_text(text), level, time.time())
        if changed:
            new = self.store.get(self.user, record_id)
            if new is not None:
                self._embed([new])
        return changed

    def forget(self, record_id: str) -> bool:
        """Delete one of this user's records; False if there is none of that id."""
        deleted = self.store.delete(self.user, [record_id]) > 0
        if deleted:
            forget_saved(self.store, self.user)
        return deleted

    def forget_all(self) -> int:
        """Delete every record of this user; how many there were."""
        count = self.store.delete(self.user)
        forget_saved(self.store, self.user)
        return count

    # ---- reading -------------------------------------------------------------------------------------------

    def recall(self, query: str, k: int = 5, *, scope: str | None = None) -> list[MemoryMatch]:
        """The `k` records that best answer `query`, best first (see `chatagent.memories.recall`)."""
        if not isinstance(query, str):
            raise TypeError(f"query must be a string, got {type(query).__name__}")
        return self._matches(query, k, self.weights, scope)

    def _matches(self, query: str, k: int, weights: RecallWeights, scope: str | None) -> list[MemoryMatch]:
        index = self._index()
        if self.embedder is not None and index.waiting:  # the queue of records waiting for vectors
            ids = index.waiting_ids()
            waiting = self.store.unembedded(self.user, self.embedder.name, ids if len(ids) <= BY_IDS else None)
            if self._vectors().catch_up(waiting):
                index = self._index()
        vector = query_vector(self.embedder, query) if self.embedder is not None and index.has_vectors else None
        found = index.search(query, vector, k, weights, scope)
        records = self.store.get_many(self.user, [rid for rid, _ in found])
        return [MemoryMatch(records[rid], score) for rid, score in found if rid in records]

    def list(self, scope: str | None = None) -> list[MemoryRecord]:
        """This user's records, most recently updated first."""
        return self.store.list(self.user, scope)

    def get(self, record_id: str) -> MemoryRecord | None:
        return self.store.get(self.user, record_id)

    def wait_for_vectors(self, timeout: float | None = None) -> bool:
        """Wait until none of this user's records waits for a vector (by this memory's embedder), whichever process
        stored them; False on timeout or failure. True at once without an embedder."""
        return self.embedder is None or self._vectors().wait(timeout)

    def embed_now(self) -> bool:
        """Embed this user's records that wait for vectors on the calling thread (at its priority, not the
        background thread's); True when all have them."""
        return self.embedder is None or self._vectors().wait(None, here=True)

    # ---- inside ---------------------------------------------------------------------------------------------

    def _facts(
        self, msgs: list[Message], session_id: str | None, scope: str, first_index: int
    ) -> list[MemoryRecord] | None:
        """The model's facts of `msgs` applied (see `chatagent.memories.extraction`); None when its answer was not
        usable (the caller then keeps the turns as they are)."""
        turns = [(first_index + i, m) for i, m in enumerate(msgs) if m.role in (USER, ASSISTANT) and m.text.strip()]
        if not turns:
            return []
        related = self.recall(" ".join(m.text for _, m in turns if m.role == USER)[-2000:], k=RELATED)
        plan = ask_for_facts(self.llm, turns, [m.record for m in related])
        if plan is None:
            logger.warning("the memory model's answer is not the JSON asked for; keeping the turns as they are")
            return None
        out = [
            self.remember(text, importance=level, scope=scope, source={"session": session_id, "messages": cited})
            for text, level, cited in plan.add
        ]
        for rid, text, level in plan.update:
            if self.update(rid, text, importance=level):
                out.extend(r for r in [self.get(rid)] if r is not None)
        for rid in plan.delete:
            self.forget(rid)
        return out

    def _add(self, items: list[tuple[str, str, float, dict[str, Any]]], at: float | None = None) -> list[MemoryRecord]:
        now = time.time() if at is None else float(at)
        records = [
            MemoryRecord(uuid.uuid4().hex, self.user, text, _checked_scope(scope), _checked_importance(level), source,
                         now, now)
            for text, scope, level, source in items
        ]  # fmt: skip
        self.store.add(records)
        self._embed(records)
        return records

    def _embed(self, records: list[MemoryRecord]) -> None:
        """Queue the records' vectors on the embedding thread; they are stored when ready (see
        `chatagent.memories.vectors`: until then the store keeps them waiting, for any process to complete)."""
        if self.embedder is not None and records:
            self._vectors().submit([(r.id, r.text) for r in records])

    def _vectors(self) -> VectorQueue:
        assert self.embedder is not None
        return vector_queue(self.store, self.user, self.embedder)

    def _index(self) -> UserIndex:
        """This user's records as recall searches them, up to date with the store (`chatagent.memories.indexes`)."""
        return user_index(self.store, self.user, self.embedder.name if self.embedder is not None else None)


def _checked_user(user: Any) -> str:
    """A user name as sessions take it: 1 to 256 printable characters."""
    if not isinstance(user, str):
        raise TypeError(f"user must be a string, got {type(user).__name__}")
    if not user or len(user) > 256 or not user.isprintable():
        raise ValueError(f"user must be 1 to 256 printable characters, got {user[:80]!r}")
    return user


def _checked_text(text: Any) -> str:
    if not isinstance(text, str) or not text.strip():
        raise ValueError("a memory's text must be a non-empty string")
    return text.strip()[:MAX_TEXT_CHARS]


def _checked_importance(value: Any) -> float:
    if not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"importance must be a number from 0 to 1, got {value!r}")
    return float(value)


def _checked_scope(value: Any) -> str:
    if not isinstance(value, str) or len(value) > 100:
        raise ValueError("scope must be a string of at most 100 characters")
    return value

"""CrewAI's `Memory`: remember and recall, on chatagent's long-term memory (`chatagent.memories`).

    memory = Memory(embedder={"provider": "openai", "config": {"model": "text-embedding-3-small"}})
    memory.remember("The client prefers weekly reports.", scope="/client", categories=["preferences"])
    memory.recall("how often does the client want reports?", limit=3)   # [MemoryMatch(record, score)]

Records live in a SQLite file (`storage`: a path or URL as chatagent's memory takes, default `memory.db` in the
project's storage folder, see `chatagent.crewai.storage`), so a second process recalls what the first remembered.
Whose memories they are comes from the run the call is made in (the principal it acts for, `RunContext.trust`, as
`chatagent.memories.context.run_memory` decides it), never from the caller: outside a run they are the local
user's; a run of a shared surface for no one (`serve` without keys, outside a conversation) keeps and recalls none. `storage=` also takes a provider in Mem0's shape (an
object with `add(messages, user_id=, metadata=)` and `search(query, user_id=, limit=)`), which then keeps them.

`Crew(memory=True)` gives every task what the crew's memory recalls for it (marked as untrusted data) and
remembers each task's answer; a memory that fails degrades: the task goes on without it, with a warning.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from chatagent.crewai.events import base_events as ev
from chatagent.crewai.events.bus import crewai_event_bus
from chatagent.crewai.knowledge.knowledge import embedder_of
from chatagent.crewai.memory.types import MemoryMatch, MemoryRecord
from chatagent.crewai.storage import storage_dir
from chatagent.memories.context import CONVERSATION
from chatagent.memories.longterm import LongTermMemory
from chatagent.memories.records import MemoryRecord as StoredRecord
from chatagent.run.context import CURRENT, RunContext, current_trust

logger = logging.getLogger("chatagent.crewai.memory")
LOCAL_USER = "local"


class Memory:
    """CrewAI's unified memory (see the module docstring)."""

    def __init__(self, llm: Any = None, storage: Any = None, embedder: Any = None, *, read_only: bool = False,
                 root_scope: str | None = None, **kwargs: Any) -> None:  # fmt: skip
        unknown = set(kwargs) - {"recency_weight", "semantic_weight", "importance_weight", "recency_half_life_days",
                                 "consolidation_threshold", "consolidation_limit", "default_importance"}  # fmt: skip
        if unknown:
            raise TypeError(f"Memory() got unexpected keyword arguments: {', '.join(sorted(unknown))}")
        self.llm = llm
        self.read_only = read_only
        self.root_scope = root_scope
        self.default_importance = float(kwargs.get("default_importance", 0.5))
        self.provider = storage if _is_provider(storage) else None
        self._url = None if self.provider is not None else storage
        self._embedder = embedder_of(embedder) if embedder is not None else None
        self._memories: dict[str, LongTermMemory] = {}

    def _mine(self) -> LongTermMemory | None:
        """The memory of whoever the current run is for (None: no one's)."""
        user = principal()
        if user is None:
            return None
        found = self._memories.get(user)
        if found is None:
            url = self._url or str(storage_dir() / "memory.db")
            found = self._memories[user] = LongTermMemory(user, url, embedder=self._embedder)
        return found

    # ---- storing ----------------------------------------------------------------------------------------

    def remember(self, content: str, scope: str | None = None, categories: Sequence[str] | None = None,
                 metadata: dict[str, Any] | None = None, importance: float | None = None, source: str | None = None,
                 private: bool = False, agent_role: str | None = None, root_scope: str | None = None,
                 ) -> MemoryRecord | None:  # fmt: skip
        """Keep `content` (None when the memory is read-only, or the run acts for no one: see `principal`)."""
        if not isinstance(content, str) or not content.strip():
            raise ValueError("remember() needs content (a non-empty text)")
        if self.read_only:
            return None
        return self.keep(content, scope=scope, categories=categories, metadata=metadata, importance=importance,
                         source=source, agent_role=agent_role, root_scope=root_scope)  # fmt: skip

    def keep(self, content: str, *, scope: str | None = None, categories: Sequence[str] | None = None,
             metadata: dict[str, Any] | None = None, importance: float | None = None, source: str | None = None,
             agent_role: str | None = None, root_scope: str | None = None, drawn_from: Sequence[str] = (),
             ) -> MemoryRecord | None:  # fmt: skip
        """`remember`, the record also naming the untrusted text it was `drawn_from` (beside what the running run's
        models had read: `chatagent.run.trust.Provenance`), which comes back with it (`MemoryRecord.metadata`'s
        'drawn_from'); None when the run acts for no one (see `principal`)."""
        user, mine = principal(), self._mine()
        if user is None or (self.provider is None and mine is None):
            _for_no_one("nothing is remembered")
            return None
        path = _scope(root_scope or self.root_scope, scope)
        crewai_event_bus.emit(self, ev.MemorySaveStartedEvent(value=content, metadata=metadata, agent_role=agent_role))
        extra: dict[str, Any] = {"categories": list(categories or []), "metadata": dict(metadata or {}),
                                 "origin": source}  # fmt: skip
        if drawn_from:
            extra["from"] = list(drawn_from)
        weight = self.default_importance if importance is None else float(importance)
        if self.provider is not None:
            self.provider.add([{"role": "user", "content": content}], user_id=user,
                              metadata={**extra["metadata"], "scope": path, "drawn_from": list(drawn_from)})  # fmt: skip
            record = MemoryRecord(id="", content=content, scope=path, categories=extra["categories"],
                                  metadata=extra["metadata"], importance=weight, source=source)  # fmt: skip
        else:
            assert mine is not None
            stored = mine.remember(content, importance=weight, scope=path, source=extra)
            record = _record(stored)
        crewai_event_bus.emit(self, ev.MemorySaveCompletedEvent(value=content, metadata=metadata,
                                                                agent_role=agent_role))  # fmt: skip
        return record

    def remember_many(self, contents: Sequence[str], **kwargs: Any) -> list[MemoryRecord]:
        return [r for c in contents if (r := self.remember(c, **kwargs)) is not None]

    def drain_writes(self) -> None:
        """Wait until what was remembered can be recalled by meaning."""
        for memory in self._memories.values():
            memory.embed_now()

    # ---- reading ----------------------------------------------------------------------------------------

    def recall(self, query: str, scope: str | None = None, categories: Sequence[str] | None = None,
               limit: int = 10, depth: str = "deep", source: str | None = None, include_private: bool = False,
               ) -> list[MemoryMatch]:  # fmt: skip
        """The memories that best answer `query`, best first (`scope`: only those under it)."""
        if depth not in ("shallow", "deep"):
            raise ValueError("depth is 'shallow' or 'deep'")
        crewai_event_bus.emit(self, ev.MemoryQueryStartedEvent(query=query, limit=limit))
        user = principal()
        if user is None:
            _for_no_one("nothing is recalled")
            found = []
        elif self.provider is not None:
            found = _provider_matches(self.provider.search(query, user_id=user, limit=limit))
        else:
            self.drain_writes()
            prefix = _scope(self.root_scope, scope) if scope or self.root_scope else None
            mine = self._mine()
            matches = mine.recall(query, k=max(limit * 3, limit)) if mine is not None else []
            found = [MemoryMatch(record=_record(m.record), score=round(m.score, 4), match_reasons=["semantic"])
                     for m in matches if prefix is None or m.record.scope.startswith(prefix)]  # fmt: skip
            if categories:
                found = [m for m in found if set(categories) & set(m.record.categories)]
            found = found[:limit]
        crewai_event_bus.emit(self, ev.MemoryQueryCompletedEvent(query=query, results=found, limit=limit))
        return found

    def list_records(self, scope: str | None = None, limit: int = 200) -> list[MemoryRecord]:
        mine = self._mine()
        records = [_record(r) for r in mine.list()] if mine is not None else []
        return [r for r in records if scope is None or r.scope.startswith(scope)][:limit]

    def forget(self, scope: str | None = None, record_ids: Sequence[str] | None = None, **kwargs: Any) -> int:
        mine = self._mine()
        ids = list(record_ids or [r.id for r in self.list_records(scope)])
        return sum(1 for i in ids if mine is not None and mine.forget(i))

    def reset(self, scope: str | None = None) -> None:
        """Forget every memory (under `scope`) of whoever the current run is for."""
        mine = self._mine()
        if scope is None and mine is not None:
            mine.forget_all()
        elif scope is not None:
            self.forget(scope)

    def extract_memories(self, content: str) -> list[str]:
        """The facts in `content`: its sentences (CrewAI asks its model; chatagent keeps what was said)."""
        return [s.strip() for s in content.replace("\n", " ").split(". ") if s.strip()]

    def __repr__(self) -> str:
        return f"Memory(storage={self._url or self.provider or 'default'!r})"


class TaskMemory:
    """The memories of a crew's tasks as a context source of chatagent's Crew: each task is given what the memory
    of its agent (`Agent(memory=...)`, else the crew's) recalls for it, and that memory is told the answer."""

    source = "memory"

    def __init__(self, memory: Memory | None, limit: int = 5, agents: Sequence[Any] = ()) -> None:
        self.memory, self.limit = memory, limit
        self.agents = {getattr(a, "role", None): a for a in agents if isinstance(getattr(a, "memory", None), Memory)}

    def _of(self, agent: Any) -> Memory | None:
        own = getattr(agent, "memory", None)
        return own if isinstance(own, Memory) else self.memory

    def context_for(self, task_text: str, agent: Any) -> str:
        memory = self._of(agent)
        return recalled(memory, task_text, self.limit) if memory is not None else ""

    def task_done(self, output: Any) -> None:
        memory = self._of(self.agents.get(output.agent))
        if memory is None:
            return
        try:
            memory.remember(f"{output.description.strip()}\n{output.raw}", scope="/crew",
                            metadata={"task": output.name or "", "agent": output.agent or ""},
                            agent_role=output.agent)  # fmt: skip
        except Exception as e:  # noqa: BLE001 (the same: the crew goes on, what it did is not remembered)
            logger.warning("the memory could not keep a task's answer: %s", type(e).__name__)


def recalled(memory: Memory, query: str, limit: int) -> str:
    """What `memory` recalls for `query`, one line each ('' when nothing, or when the memory fails: then with a
    warning, as the run goes on without it)."""
    try:
        found = memory.recall(query, limit=limit, depth="shallow")
    except Exception as e:  # noqa: BLE001 (a memory that fails degrades: the task goes on without it)
        logger.warning("the memory could not be read; the run goes on without it: %s", type(e).__name__)
        crewai_event_bus.emit(memory, ev.MemoryRetrievalFailedEvent(error=type(e).__name__))
        return ""
    return "\n".join(f"- {m.record.content}" for m in found)


def agent_memory(memory: Any) -> Memory | None:
    """An agent's `memory=`: True (a Memory of its own), a Memory, or False/None (none: the crew's, if any)."""
    if memory is True:
        return Memory()
    if memory is False or memory is None:
        return None
    if isinstance(memory, Memory):
        return memory
    raise TypeError(f"an Agent's memory is True, False or a Memory, got {type(memory).__name__}")


def _for_no_one(what: str) -> None:
    logger.warning("the memory is no one's here (a shared surface's run without a principal or a conversation): %s",
                   what)  # fmt: skip


def principal() -> str | None:
    """Whose memories a call reaches: the principal the run it is made in acts for (`RunContext.trust`); on a
    shared surface without one, the conversation's the server issued (`conversation:<id>`), else no one's (None);
    in the machine's own user's code, the user of the run's session (or of the run that run is part of), else the
    local user."""
    trust = current_trust()
    if trust.principal is not None:
        return trust.principal
    context: RunContext | None = CURRENT.get()
    if trust.shared:
        while context is not None and context.session is None:
            context = context.parent
        return CONVERSATION + context.session.id if context is not None else None
    while context is not None:
        session = context.session
        user = getattr(session, "user", None) if session is not None else None
        if isinstance(user, str) and user:
            return user
        context = context.parent
    return LOCAL_USER


def _scope(root: str | None, scope: str | None) -> str:
    parts = [p for part in (root, scope) if part for p in part.split("/") if p]
    return "/" + "/".join(parts)


def _record(stored: StoredRecord) -> MemoryRecord:
    extra = stored.source if isinstance(stored.source, dict) else {}
    metadata = dict(extra.get("metadata") or {})
    if extra.get("from"):
        metadata["drawn_from"] = [str(s) for s in extra["from"]]
    return MemoryRecord(id=stored.id, content=stored.text, scope=stored.scope or "/",
                        categories=list(extra.get("categories") or []), metadata=metadata,
                        importance=stored.importance, source=extra.get("origin"))  # fmt: skip


def _is_provider(storage: Any) -> bool:
    return storage is not None and callable(getattr(storage, "add", None)) and callable(getattr(storage, "search",
                                                                                                 None))  # fmt: skip


def _provider_matches(found: Any) -> list[MemoryMatch]:
    items = found.get("results", []) if isinstance(found, dict) else list(found or [])
    out = []
    for k, item in enumerate(items):
        text = item.get("memory") or item.get("content") or json.dumps(item) if isinstance(item, dict) else str(item)
        score = float(item.get("score", 1.0 / (k + 1))) if isinstance(item, dict) else 1.0 / (k + 1)
        out.append(MemoryMatch(record=MemoryRecord(id=str(item.get("id", k)) if isinstance(item, dict) else str(k),
                                                   content=text), score=score))  # fmt: skip
    return out


__all__ = ["Memory", "TaskMemory", "agent_memory", "principal", "recalled"]

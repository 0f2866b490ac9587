"""`EntityMemory` (CrewAI's entity memory): entities saved with their type and description, and found again by
what a task is about; a crew given one (`Crew(entity_memory=...)`) hands each task the entities its text calls
up, marked as untrusted memory text, and after each task has a model draw the entities from its answer
(`chatagent.memories.entities`: the memory's `llm=`, else the model of the task's agent). It keeps them in a
`Memory` (its own, or the one given), under `/entities/<type>`, so they are per principal and outlive the process
as the memory does.

    entities = EntityMemory()
    entities.save(EntityMemoryItem(name="Acme", type="company", description="Our client since 2021."))
    entities.search("Acme's contract", limit=3)   # [{'context': 'Acme (company): Our client since 2021.', ...}]

An entity a model drew keeps where it came from: the task whose answer named it, and the untrusted text the run's
models had read before (a tool's result, a document: `chatagent.run.trust.Provenance`); when it is handed to a
later task it says so ("drawn from: ..."), inside the memory's untrusted-data markers.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from chatagent.crewai.memory.entity.entity_memory_item import EntityMemoryItem
from chatagent.crewai.memory.unified_memory import Memory
from chatagent.memories.entities import ask_for_entities

logger = logging.getLogger("chatagent.crewai.memory")
SCOPE = "/entities"
EXTRACTED = "entity extraction"  # the origin of an entity a model drew from a task's answer


class EntityMemory:
    """Entities in a Memory (see the module docstring)."""

    source = "memory"  # how what it finds is labelled to the model

    def __init__(self, memory: Memory | None = None, *, storage: Any = None, embedder: Any = None, llm: Any = None,
                 **kwargs: Any) -> None:  # fmt: skip
        kwargs.pop("crew", None)  # CrewAI's: the crew it serves (a crew hands it its tasks here)
        if kwargs:
            raise TypeError(f"EntityMemory() got unexpected keyword arguments: {', '.join(sorted(kwargs))}")
        self.memory = memory if memory is not None else Memory(storage=storage, embedder=embedder)
        self.llm = llm  # what draws the entities from an answer (None: the task's agent's model)
        self.agents: dict[str, Any] = {}  # role -> agent, given by the crew it serves

    def save(self, items: EntityMemoryItem | Sequence[EntityMemoryItem], *, origin: str | None = None,
             drawn_from: Sequence[str] = ()) -> None:  # fmt: skip
        """Keep one entity or several (`origin`, `drawn_from`: where they came from, kept with them)."""
        for item in [items] if isinstance(items, EntityMemoryItem) else list(items):
            if not isinstance(item, EntityMemoryItem):
                raise TypeError(f"save() takes EntityMemoryItems, got {type(item).__name__}")
            text = f"{item.name} ({item.type}): {item.description}"
            if item.relationships:
                text += f" Relationships: {item.relationships}"
            self.memory.keep(text, scope=f"{SCOPE}/{item.type.strip().lower()}", categories=["entity", item.type],
                             metadata={"name": item.name, "type": item.type, "relationships": item.relationships},
                             source=origin, drawn_from=drawn_from)  # fmt: skip

    def search(self, query: str, limit: int = 3, score_threshold: float = 0.0) -> list[dict[str, Any]]:
        """The entities that best match `query`: [{'context', 'metadata', 'score'}], best first."""
        found = self.memory.recall(query, scope=SCOPE, limit=limit, depth="shallow")
        return [{"context": m.record.content, "metadata": m.record.metadata, "score": m.score} for m in found
                if m.score >= score_threshold]  # fmt: skip

    def reset(self) -> None:
        """Forget every entity (of whoever the current run is for)."""
        self.memory.reset(SCOPE)

    # ---- as a context source of a crew ---------------------------------------------------------------------

    def context_for(self, task_text: str, agent: Any) -> str:
        try:
            found = self.search(task_text)
        except Exception as e:  # noqa: BLE001 (a memory that fails degrades: the task goes on without it)
            logger.warning("the crew's entity memory could not be read; the task goes on without it: %s",
                           type(e).__name__)  # fmt: skip
            return ""
        return "Entities:\n" + "\n".join(f"- {r['context']}{_drawn(r['metadata'])}" for r in found) if found else ""

    def task_done(self, output: Any) -> None:
        """Have a model draw the entities from the task's answer and keep them, with where they came from."""
        agent = self.agents.get(output.agent)
        llm = self.llm if self.llm is not None else getattr(agent, "llm", None)
        if llm is None or not str(output.raw or "").strip():
            return
        task = f"task {' '.join(str(output.name or output.description or '').split())[:60]}".strip()
        try:
            found = ask_for_entities(llm, str(output.raw), "task output")
            self.save([EntityMemoryItem(e.name, e.type, e.description, e.relationships) for e in found],
                      origin=EXTRACTED, drawn_from=[task])  # fmt: skip
        except Exception as e:  # noqa: BLE001 (the crew goes on: what the answer named is not remembered)
            logger.warning("the entities of a task's answer could not be kept: %s", type(e).__name__)


def _drawn(metadata: dict[str, Any]) -> str:
    drawn = metadata.get("drawn_from")
    return f" (drawn from: {', '.join(map(str, drawn))})" if drawn else ""


__all__ = ["EntityMemory", "EntityMemoryItem"]

"""`EntityMemory` (CrewAI's entity memory): entities saved with their type and description, and found again by
what a task is about; a crew given one (`Crew(entity_memory=...)`) hands each task the entities its text calls
up, marked as untrusted data. It keeps them in a `Memory` (its own, or the one given), under `/entities/<type>`,
so they are per principal and outlive the process as the memory does.

    entities = EntityMemory()
    entities.save(EntityMemoryItem(name="Acme", type="company", description="Our client since 2021."))
    entities.search("Acme's contract", limit=3)   # [{'context': 'Acme (company): Our client since 2021.', ...}]
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from chatagent.crewai.memory.entity.entity_memory_item import EntityMemoryItem
from chatagent.crewai.memory.unified_memory import Memory

logger = logging.getLogger("chatagent.crewai.memory")
SCOPE = "/entities"


class EntityMemory:
    """Entities in a Memory (see the module docstring)."""

    source = "memory"  # how what it finds is labelled to the model

    def __init__(self, memory: Memory | None = None, *, storage: Any = None, embedder: Any = None,
                 **kwargs: Any) -> None:  # fmt: skip
        kwargs.pop("crew", None)  # CrewAI's: the crew it serves (a crew hands it its tasks here)
        if kwargs:
            raise TypeError(f"EntityMemory() got unexpected keyword arguments: {', '.join(sorted(kwargs))}")
        self.memory = memory if memory is not None else Memory(storage=storage, embedder=embedder)

    def save(self, items: EntityMemoryItem | Sequence[EntityMemoryItem]) -> None:
        """Keep one entity or several."""
        for item in [items] if isinstance(items, EntityMemoryItem) else list(items):
            if not isinstance(item, EntityMemoryItem):
                raise TypeError(f"save() takes EntityMemoryItems, got {type(item).__name__}")
            text = f"{item.name} ({item.type}): {item.description}"
            if item.relationships:
                text += f" Relationships: {item.relationships}"
            self.memory.remember(text, scope=f"{SCOPE}/{item.type.strip().lower()}", categories=["entity", item.type],
                                 metadata={"name": item.name, "type": item.type,
                                           "relationships": item.relationships})  # fmt: skip

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
        return "Entities:\n" + "\n".join(f"- {r['context']}" for r in found) if found else ""

    def task_done(self, output: Any) -> None:
        """Entities are saved by `save` (CrewAI asks its model to draw them from each answer; chatagent does not)."""


__all__ = ["EntityMemory", "EntityMemoryItem"]

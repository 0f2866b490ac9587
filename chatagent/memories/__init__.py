"""Long-term memory: what users told an agent, kept per user across conversations, recalled by meaning.

    from chatagent.memories import LongTermMemory
    mem = LongTermMemory(user='alice')
    mem.remember('Alice is allergic to peanuts.', importance=0.9)
    mem.recall("what can't Alice eat?")      # [MemoryMatch(record, score)], best first

Names are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chatagent.utils.lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "LongTermMemory": "chatagent.memories.longterm",
    "MemoryMatch": "chatagent.memories.records",
    "MemoryRecord": "chatagent.memories.records",
    "MemoryStore": "chatagent.memories.store",
    "RecallWeights": "chatagent.memories.recall",
    "memory_tools": "chatagent.memories.tools",
}

__all__ = ["LongTermMemory", "MemoryMatch", "MemoryRecord", "MemoryStore", "RecallWeights", "memory_tools"]

if TYPE_CHECKING:
    from chatagent.memories.longterm import LongTermMemory
    from chatagent.memories.recall import RecallWeights
    from chatagent.memories.records import MemoryMatch, MemoryRecord
    from chatagent.memories.store import MemoryStore
    from chatagent.memories.tools import memory_tools

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
